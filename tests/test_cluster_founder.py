"""A server used alone, with tables, then joined (docs/clustering.md, "Converting a
founder that has tables"): at the first join its tables move into replicated shards
(this server their only replica), with nothing lost: every document is read through
every server, the secondary index is rebuilt and used, writes go on, a changefeed
opened before the join sees later writes. Then `reconfigure(replicas=3)` copies the
data to the new servers, and with the founder killed (-9) the others still read and
write everything. A founder killed -9 while it converts comes back with all its data,
converted or not, and converts when it can."""
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError

from test_cluster_join import start, wait_for, names, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import retrying, connect_or_none

pytestmark = pytest.mark.single_server('starts its own clusters')

A = r.db("test").table("a")
B = r.db("test").table("b")
# Keys over the whole key space: both shards of `a` hold some.
A_IDS = ["%04x" % (i * 211 % 65536) for i in range(600)]
B_IDS = list(range(400))


def founder_with_tables(dirs, procs):  # noqa: F811
    """alpha alone: `a` (2 shards) and `b` (index `v`), 1000 documents. The server and
    a connection."""
    a = start(dirs(), "alpha")
    procs.append(a)
    conn = a.connect()
    r.db("test").table_create("a", shards=2).run(conn)
    r.db("test").table_create("b").run(conn)
    B.index_create("v").run(conn)
    B.index_wait("v").run(conn)
    assert A.insert([{"id": k, "n": i} for i, k in enumerate(A_IDS)]).run(conn)["inserted"] == 600
    assert B.insert([{"id": i, "v": i % 4} for i in B_IDS]).run(conn)["inserted"] == 400
    assert len(A.config()["shards"].run(conn)) == 2
    return a, conn


def replicated(conn):
    """Whether the server behind `conn` logged that its catalog (and tables) became
    replicated."""
    logs = [row["message"] for row in r.db("rethinkdb").table("logs").run(conn)]
    return any("catalog is now replicated" in m for m in logs)


def switched(conns):
    """How many shard groups logged that their voters became the wanted ones."""
    done = set()
    for cn in conns:
        for row in r.db("rethinkdb").table("logs").run(cn):
            m = row["message"]
            if ": ReplaceVoters(" in m and "failed" not in m and "timed out" not in m:
                done.add(m.split(":")[0])
    return len(done)


def everything_through(conn, mode="single", timeout=30):
    """Every document of both tables and index `v` as read through `conn`."""
    a_ids = retrying(lambda: sorted(r.db("test").table("a", read_mode=mode)["id"]
                                    .coerce_to("array").run(conn)), timeout=timeout)
    b_ids = retrying(lambda: sorted(r.db("test").table("b", read_mode=mode)["id"]
                                    .coerce_to("array").run(conn)), timeout=timeout)
    twos = retrying(lambda: sorted(B.get_all(2, index="v")["id"].coerce_to("array")
                                   .run(conn)), timeout=timeout)
    return a_ids, b_ids, twos


def test_a_founder_with_tables_is_joined_and_its_data_reaches_every_server(
        dirs, procs):  # noqa: F811
    a, conn = founder_with_tables(dirs, procs)
    feed_conn = a.connect()
    feed = A.changes().run(feed_conn)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    c = start(dirs(), "gamma", joins=[a])
    procs.append(c)
    wait_for(lambda: replicated(conn), lambda ok: ok, timeout=30)
    conns = {s: wait_for(lambda: connect_or_none(s), lambda x: x is not None, timeout=30)
             for s in (b, c)}
    conns[a] = conn
    for cn in conns.values():
        wait_for(lambda: names(cn), lambda n: n == ["alpha", "beta", "gamma"])
        wait_for(lambda: r.db("test").table_list().run(cn), lambda t: t == ["a", "b"],
                 timeout=30)
    # Placed on the founder alone, shard for shard.
    for shard in A.config()["shards"].run(conn):
        assert shard["replicas"] == ["alpha"] and shard["primary_replica"] == "alpha", shard
    want_twos = [i for i in B_IDS if i % 4 == 2]
    for cn in conns.values():
        assert everything_through(cn) == (sorted(A_IDS), B_IDS, want_twos)
        wait_for(lambda: [s["ready"] for s in B.index_status().run(cn)], lambda x: x == [True])
    # Writes go on, through every server; the feed opened before the join sees them.
    for n, s in enumerate((a, b, c)):
        res = retrying(lambda: A.insert({"id": "new%d" % n}).run(conns[s]))
        assert res["inserted"] == 1, res
    seen = sorted(feed.next(wait=20)["new_val"]["id"] for _ in range(3))
    assert seen == ["new0", "new1", "new2"]
    feed.close()
    a_ids = sorted(A_IDS + ["new0", "new1", "new2"])
    status = A.status().run(conn)
    assert status["status"]["all_replicas_ready"], status

    # Three replicas: the new servers receive the data.
    for t in (A, B):
        res = retrying(lambda: t.reconfigure(shards=len(t.config()["shards"].run(conn)),
                                             replicas=3).run(conn))
        assert res["reconfigured"] == 1, res
    for t in (A, B):
        def ready(st):
            return (st["status"]["all_replicas_ready"]
                    and all(sorted(x["server"] for x in sh["replicas"])
                            == ["alpha", "beta", "gamma"] for sh in st["shards"]))
        wait_for(lambda: retrying(lambda: t.status().run(conn)), ready, timeout=90)
    for s in (b, c):
        wait_for(lambda: everything_through(conns[s], "outdated")[:2], lambda x: x ==
                 (a_ids, B_IDS), timeout=60)
    # `table_status` shows a caught-up learner `ready` before the voters are switched:
    # the founder's log says when each of the three shards' groups switched.
    wait_for(lambda: switched(conns.values()), lambda n: n == 3, timeout=60)

    # The founder dies: the others (a majority) read and write everything.
    a.kill9()
    for s in (b, c):
        got = everything_through(conns[s], "majority", timeout=60)
        assert got == (a_ids, B_IDS, want_twos)
    res = retrying(lambda: B.insert({"id": 1000, "v": 2}).run(conns[b]), timeout=60)
    assert res["inserted"] == 1, res
    assert retrying(lambda: B.get_all(2, index="v").count().run(conns[c])) == len(want_twos) + 1


# The conversion starts within a round (0.5 s) of the joiner connecting and takes a few
# milliseconds here: the kills land before, during or after it (the exact points are
# tested in crates/cluster/tests/catalog_raft/founder.rs).
@pytest.mark.parametrize("delay", [0.0, 0.15, 0.3, 0.45, 0.6, 1.0])
def test_a_founder_killed_while_it_converts_keeps_its_data(dirs, procs, delay):  # noqa: F811
    a, conn = founder_with_tables(dirs, procs)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    time.sleep(delay)
    a.kill9()
    a.start()
    conn = wait_for(lambda: connect_or_none(a), lambda x: x is not None, timeout=30)
    want_twos = [i for i in B_IDS if i % 4 == 2]
    # Converted or not, every document is there; the conversion completes (the
    # joiner serves the tables).
    assert everything_through(conn, timeout=60) == (sorted(A_IDS), B_IDS, want_twos)
    res = retrying(lambda: A.insert({"id": "after"}).run(conn), timeout=30)
    assert res["inserted"] == 1, res
    bc = wait_for(lambda: connect_or_none(b), lambda x: x is not None, timeout=30)
    wait_for(lambda: r.db("test").table_list().run(bc), lambda t: t == ["a", "b"], timeout=30)
    got = everything_through(bc, timeout=60)
    assert got == (sorted(A_IDS + ["after"]), B_IDS, want_twos)

