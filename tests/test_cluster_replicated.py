"""Replicated tables on real `ponder` processes: a server started alone converts its
catalog to the cluster's (Raft group 0) when servers `--join` it; a table created with
three replicas is replicated by each shard's group, so writes through any server are
read through every other, with each `read_mode`; after kill -9 of a server the others
go on writing, and the server catches up when it comes back. Secondary indexes of a
replicated table are created, waited for, read (get_all, between, order_by) through
every server in each `read_mode`, renamed and dropped, with RethinkDB's errors. (A
founder that already has tables: test_cluster_founder.py.)"""
import re
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlAuthError, ReqlError

from test_cluster_join import start, wait_for, names, dirs, procs  # noqa: F401 (fixtures)

pytestmark = pytest.mark.single_server('starts its own clusters')


def retrying(f, timeout=20.0):
    """Runs `f` until it does not raise a ReQL error (a leader being elected)."""
    deadline = time.time() + timeout
    while True:
        try:
            return f()
        except ReqlError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def ids(conn, **opts):
    return sorted(d["id"] for d in r.db("d").table("t", **opts).run(conn))


def restart(s):
    s.kill9()
    return s.start()


def connect_or_none(server):
    """A connection to `server`, or None while it does not know the user yet."""
    try:
        return server.connect()
    except ReqlAuthError:
        time.sleep(0.2)
        return None


def three_servers(dirs, procs):
    """alpha alone, beta and gamma joining it; once every server sees the others and
    has the founder's catalog (its `test` database): the servers and a connection to
    each."""
    a = start(dirs(), "alpha")
    procs.append(a)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    c = start(dirs(), "gamma", joins=[a])
    procs.append(c)
    # A joiner knows no users until the catalog's leader has sent it the catalog.
    conns = {s: wait_for(lambda: connect_or_none(s), lambda conn: conn is not None,
                         timeout=20) for s in (a, b, c)}
    for conn in conns.values():
        wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta", "gamma"])
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "test" in dbs, timeout=20)
    return (a, b, c), conns


def test_three_servers_replicate_a_table_and_survive_a_kill(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    # A database created through a joiner is seen everywhere — once the others have
    # applied the catalog's entry (as in RethinkDB, metadata spreads asynchronously).
    retrying(lambda: r.db_create("d").run(conns[b]))
    for conn in conns.values():
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "d" in dbs)
    res = r.db("d").table_create("t", shards=2, replicas=3).run(conns[c])
    shards = res["config_changes"][0]["new_val"]["shards"]
    assert [sorted(s["replicas"]) for s in shards] == [["alpha", "beta", "gamma"]] * 2
    for conn in conns.values():
        wait_for(lambda: r.db("d").table_list().run(conn), lambda t: t == ["t"])

    # Writes through every server, to keys of both shards; every server reads them all.
    written = []
    for n, s in enumerate((a, b, c)):
        for key in ("a%d" % n, "z%d" % n):
            res = retrying(lambda: r.db("d").table("t").insert({"id": key, "n": n}).run(conns[s]))
            assert res["inserted"] == 1, res
            written.append(key)
    for conn in conns.values():
        assert ids(conn) == sorted(written)
        assert ids(conn, read_mode="majority") == sorted(written)
        assert r.db("d").table("t").count().run(conn) == len(written)
        # A replica's own copy catches up on its own.
        wait_for(lambda: ids(conn, read_mode="outdated"), lambda got: got == sorted(written))
    # A conflicting insert is refused with RethinkDB's error, wherever it comes from.
    res = r.db("d").table("t").insert({"id": "a0"}).run(conns[c])
    assert res["errors"] == 1 and "Duplicate primary key" in res["first_error"], res
    # Many documents in one insert, through a server that is not every shard's
    # primary: written a chunk at a time (proposed together), answered as one by one,
    # a repeated key and an existing one refused as duplicates.
    docs = [{"id": "m%04d" % i, "n": i} for i in range(1500)]
    docs[700] = {"id": "m0100"}
    docs.append({"id": "a0"})
    res = r.db("d").table("t").insert(docs, return_changes=True).run(conns[b])
    assert (res["inserted"], res["errors"]) == (1499, 2), res
    assert res["first_error"].startswith("Duplicate primary key `id`"), res
    assert [c["new_val"]["id"] for c in res["changes"] if "error" not in c] == \
        ["m%04d" % i for i in range(1500) if i != 700]
    written += ["m%04d" % i for i in range(1500) if i != 700]
    for conn in conns.values():
        assert r.db("d").table("t").count().run(conn) == len(written)
        wait_for(lambda: ids(conn, read_mode="outdated"), lambda got: got == sorted(written))
    assert r.db("d").table("t").get("m0100")["n"].run(conns[a]) == 100
    # An update through one server, read back through another.
    res = r.db("d").table("t").get("z1").update({"n": r.row["n"] + 10}).run(conns[a])
    assert res["replaced"] == 1, res
    assert r.db("d").table("t").get("z1")["n"].run(conns[c]) == 11

    # Kill -9 of the founder (a voter of every group): the others go on.
    a.kill9()
    for conn in (conns[b], conns[c]):
        for key in ("a9", "z9") if conn is conns[b] else ("a8", "z8"):
            res = retrying(lambda: r.db("d").table("t").insert({"id": key}).run(conn))
            assert res["inserted"] == 1, res
            written.append(key)
    retrying(lambda: r.db_create("e").run(conns[c]))
    for conn in (conns[b], conns[c]):
        assert ids(conn) == sorted(written)
    # The lost replica is reported: the table stays writable, so not critical.
    issues = wait_for(
        lambda: [i for i in r.db("rethinkdb").table("current_issues").run(conns[b])
                 if i["type"] == "table_availability"],
        lambda found: len(found) == 1)
    assert issues[0]["critical"] is False, issues
    assert issues[0]["description"].startswith(
        "Table `d.t` is available for all operations, but some replicas are not ready."
        "\nThe servers that are not ready are:\n alpha ("), issues
    assert issues[0]["info"]["table"] == "t" and issues[0]["info"]["db"] == "d", issues
    assert r.db("d").table("t").status().run(conns[b])["status"]["ready_for_writes"]

    # It comes back from its directory as a member, and catches up.
    a.start()
    conn_a = a.connect()
    wait_for(lambda: r.db_list().run(conn_a), lambda dbs: "e" in dbs, timeout=20)
    wait_for(lambda: ids(conn_a, read_mode="outdated"), lambda got: got == sorted(written),
             timeout=20)
    assert retrying(lambda: ids(conn_a)) == sorted(written)
    r.db("d").table("t").wait(wait_for="all_replicas_ready", timeout=30).run(conn_a)
    wait_for(lambda: list(r.db("rethinkdb").table("current_issues").run(conns[c])),
             lambda found: found == [], timeout=20)

    # Dropping the table drops it everywhere.
    retrying(lambda: r.db("d").table_drop("t").run(conns[b]))
    for conn in (conn_a, conns[c]):
        wait_for(lambda: r.db("d").table_list().run(conn), lambda t: t == [])


def test_impossible_or_unsupported_changes_get_clear_errors(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    conn = conns[b]
    db = r.db("test")
    for create, message in (
            (db.table_create("x", replicas=5),
             "Can't put 5 replicas on servers with the tag `default` because there are "
             "only 3 servers with the tag `default`."),
            (db.table_create("x", replicas={"ssd": 1}, primary_replica_tag="ssd"),
             "Can't put 1 replicas on servers with the tag `ssd` because there are only 0 "
             "servers with the tag `ssd`."),
            (db.table_create("x", replicas=0), "You must set `replicas` to at least one.")):
        with pytest.raises(ReqlError, match=re.escape(message.rstrip("."))):
            create.run(conn)
    retrying(lambda: db.table_create("t", shards=2, replicas=2).run(conn))
    db.table("t").wait(timeout=30).run(conn)
    # Resharding a replicated table is built (test_cluster_reshard.py): two shards of
    # two replicas become one of three.
    res = db.table("t").reconfigure(shards=1, replicas=3).run(conn)
    assert res["reconfigured"] == 1, res
    assert len(res["config_changes"][0]["new_val"]["shards"]) == 1, res
    # table_config names any connected server; naming one that does not exist is
    # RethinkDB's error, and a rename keeps the replicas.
    cfg = db.table("t").config()
    res = cfg.update({"shards": [{"primary_replica": "nobody", "replicas": ["nobody"]}]}).run(conn)
    assert res["first_error"] == (
        "In `shards`: Server `nobody` does not exist or is not connected."), res
    before = cfg["shards"].run(conn)
    assert cfg.update({"name": "t2"}).run(conn)["replaced"] == 1
    assert db.table("t2").config()["shards"].run(conn) == before
    assert db.table("t2").insert({"id": 1}).run(conn)["inserted"] == 1
    for s in (a, c):
        other = conns[s]
        wait_for(lambda: db.table("t2", read_mode="outdated").get(1).run(other),
                 lambda doc: doc == {"id": 1})


def test_secondary_indexes_of_a_replicated_table(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    db = r.db("test")
    retrying(lambda: db.table_create("t", shards=2, replicas=3).run(conns[a]))
    for conn in conns.values():
        wait_for(lambda: db.table_list().run(conn), lambda t: "t" in t)
    db.table("t").wait(timeout=30).run(conns[a])
    # Ids over both shards; half written before the indexes, half while they are made.
    docs = [{"id": "%02x" % (i * 6), "v": i % 4, "tags": ["t%d" % (i % 3), "all"]}
            for i in range(40)]
    assert db.table("t").insert(docs[:20]).run(conns[a])["inserted"] == 20
    writer_conn = c.connect()

    def write_rest():
        for d in docs[20:]:
            retrying(lambda: db.table("t").insert(d).run(writer_conn))

    writer = threading.Thread(target=write_rest)
    writer.start()
    assert db.table("t").index_create("v").run(conns[b]) == {"created": 1}
    assert db.table("t").index_create("tags", multi=True).run(conns[b]) == {"created": 1}
    writer.join()

    by_v = sorted((d["v"], d["id"]) for d in docs)
    for conn in conns.values():
        # The catalog's entry reaches each server on its own: wait until it has it.
        status = retrying(lambda: db.table("t").index_wait().run(conn))
        assert sorted(s["index"] for s in status) == ["tags", "v"], status
        assert all(s["ready"] for s in status), status
        assert db.table("t").index_list().run(conn) == ["tags", "v"]
        for mode in ("single", "majority", "outdated"):
            t = db.table("t", read_mode=mode)
            got = sorted(d["id"] for d in t.get_all(1, index="v").run(conn))
            assert got == sorted(d["id"] for d in docs if d["v"] == 1), mode
            got = sorted(d["id"] for d in t.between(1, 3, index="v").run(conn))
            assert got == sorted(d["id"] for d in docs if 1 <= d["v"] < 3), mode
            ordered = [(d["v"], d["id"]) for d in t.order_by(index="v").run(conn)]
            assert ordered == by_v, mode
            ordered = [(d["v"], d["id"]) for d in t.order_by(index=r.desc("v")).run(conn)]
            assert ordered == by_v[::-1], mode
            assert t.get_all("t1", index="tags").count().run(conn) == 13, mode
            assert t.get_all("all", index="tags").count().run(conn) == 40, mode
            assert list(t.distinct(index="v").run(conn)) == [0, 1, 2, 3], mode

    # RethinkDB's errors, through a server that did not create the index.
    conn = conns[c]
    for query, message in (
            (db.table("nope").index_create("v"), "Table `test.nope` does not exist."),
            (db.table("t").index_create("v"), "Index `v` already exists on table `test.t`."),
            (db.table("t").index_create("r", lambda d: r.random()),
             "Could not prove function deterministic.  Index functions must be deterministic."),
            (db.table("t").get_all(1, index="nope"),
             "Index `nope` was not found on table `test.t`."),
            (db.table("t").index_drop("nope"), "Index `nope` does not exist on table `test.t`.")):
        with pytest.raises(ReqlError, match=re.escape(message.rstrip("."))):
            query.run(conn)

    # Renamed through gamma, dropped through alpha: every server follows.
    assert db.table("t").index_rename("v", "w").run(conns[c]) == {"renamed": 1}
    for conn in conns.values():
        wait_for(lambda: db.table("t").index_list().run(conn), lambda n: n == ["tags", "w"])
        retrying(lambda: db.table("t").index_wait("w").run(conn))
        got = db.table("t", read_mode="outdated").get_all(2, index="w").count().run(conn)
        assert got == 10
    assert db.table("t").index_drop("w").run(conns[a]) == {"dropped": 1}
    for conn in conns.values():
        wait_for(lambda: db.table("t").index_list().run(conn), lambda n: n == ["tags"])

    # Killed, written meanwhile, restarted: gamma reopens its copies of the index and
    # its replicas catch up, entries included.
    c.kill9()
    more = [{"id": "f%d" % i, "v": 9, "tags": ["late"]} for i in range(5)]
    assert retrying(lambda: db.table("t").insert(more).run(conns[a]))["inserted"] == 5
    c.start()
    conn_c = c.connect()
    retrying(lambda: db.table("t").index_wait().run(conn_c))
    wait_for(lambda: db.table("t", read_mode="outdated").get_all("late", index="tags")
             .count().run(conn_c), lambda n: n == 5, timeout=20)
    got = retrying(lambda: db.table("t").get_all("t1", index="tags").count().run(conn_c))
    assert got == 13


def test_single_server_behaviour_holds_through_a_server_without_the_table(dirs, procs):  # noqa: F811
    """Differences the single-server suites found when run against a cluster
    (PONDER_TEST_CLUSTER=3), each checked through a server holding no replica."""
    (a, b, c), conns = three_servers(dirs, procs)
    conn = conns[a]
    db = r.db("test")
    retrying(lambda: db.table_create("here", replicas=1).run(conn))
    # One replica on a server other than alpha (placement spreads tables over servers).
    for n in range(4):
        name = "away%d" % n
        res = db.table_create(name, replicas=1).run(conn)
        # As RethinkDB's table_create, it answers once the table is ready.
        status = db.table(name).status().run(conn)["status"]
        assert status["ready_for_writes"] and status["all_replicas_ready"], status
        if res["config_changes"][0]["new_val"]["shards"][0]["primary_replica"] != "alpha":
            break
    else:
        pytest.fail("no table was placed off alpha")
    t = db.table(name)
    t.index_create("k").run(conn)
    t.index_create("ab", [r.row["a"], r.row["b"]]).run(conn)
    t.index_wait().run(conn)
    t.insert([{"id": i, "k": "k%d" % (i % 3), "a": i % 2, "b": i} for i in range(9)]).run(conn)
    db.table("here").insert([{"id": "k1"}, {"id": "k5"}]).run(conn)
    # Index reads bounded by r.minval / r.maxval (eq_join checks its index with them).
    joined = db.table("here").eq_join("id", t, index="k").run(conn)
    assert sorted(j["right"]["id"] for j in joined) == [1, 4, 7]
    assert t.get_all(r.minval, index="k").count().run(conn) == 0
    got = t.between([1, r.minval], [1, r.maxval], index="ab").order_by(index="ab")["id"]
    assert list(got.run(conn)) == [1, 3, 5, 7]
    # Documents read through the groups count in this server's stats, as local ones do.
    tid = t.config()["id"].run(conn)
    me = conn.server()["id"]
    stats = r.db("rethinkdb").table("stats").get(["table_server", tid, me])
    before = stats["query_engine"]["read_docs_total"].run(conn)
    assert len(list(t.run(conn))) == 9
    assert len(list(t.get_all("k1", index="k").run(conn))) == 3
    assert stats["query_engine"]["read_docs_total"].run(conn) >= before + 12


def test_queries_on_a_table_that_lost_its_quorum_do_not_hold_up_the_others(dirs, procs):  # noqa: F811
    """Writes to a table whose shard lost its quorum wait (for a leader, until the
    route's deadline) on the server's evaluation threads; more of them than the pool
    has threads must not keep that server's queries on a healthy table waiting
    behind them (`server::exec`: a waiting worker lets another run)."""
    (a, b, c), conns = three_servers(dirs, procs)
    conn = conns[a]
    db = r.db("test")
    retrying(lambda: db.table_create("lost", replicas=3).run(conn))
    db.table("lost").wait(timeout=30).run(conn)
    for n in range(8):
        name = "here%d" % n
        res = db.table_create(name, replicas=1).run(conn)
        if res["config_changes"][0]["new_val"]["shards"][0]["primary_replica"] == "alpha":
            break
    else:
        pytest.fail("no table was placed on alpha")
    here = db.table(name)
    here.insert({"id": 0}).run(conn)
    b.kill9()
    c.kill9()
    # More stuck writers than alpha has evaluation threads (four per core).
    writers, done, lock = [], [], threading.Lock()

    def write(k, wconn):
        try:
            db.table("lost").insert({"id": k}).run(wconn)
        except ReqlError:
            pass
        with lock:
            done.append(k)

    for k in range(24):
        w = threading.Thread(target=write, args=(k, a.connect()), daemon=True)
        w.start()
        writers.append(w)
    time.sleep(1)  # let them reach the evaluation threads (not a timing assertion)
    with lock:
        assert done == [], "the writes to the table without a quorum did not wait"
    # The healthy table's queries are answered while every stuck write still waits.
    assert here.insert({"id": 1}).run(conn)["inserted"] == 1
    assert here.count().run(conn) == 2
    with lock:
        assert done == [], "answered only after stuck writes gave up"
    for w in writers:
        w.join(timeout=120)
    assert len(done) == 24
