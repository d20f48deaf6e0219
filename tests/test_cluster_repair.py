"""Emergency repair of replicated tables (`reconfigure(emergency_repair=...)`) on five
real `ponder` processes (five, so the catalog keeps its quorum when two die: a repair
is a catalog change). A 3-replica table on alpha, delta and epsilon loses its quorum
when delta and epsilon are killed with SIGKILL: writes and `majority` reads fail with
RethinkDB's errors; `unsafe_rollback` through alpha brings it back on alpha alone with
every document alpha had, writable; the killed servers come back without reviving or
disturbing their old copies, and the table grows back to three replicas with all its
data on each. A table that keeps its quorum "doesn't need to be repaired"; a table
whose only replica died is refused by `unsafe_rollback` and erased (empty, writable)
by `unsafe_rollback_or_erase`."""
import os
import signal
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlAvailabilityError, ReqlError, ReqlOpFailedError

from conftest import Server
from test_cluster_join import free_port, wait_for, names, dirs, procs  # noqa: F401
from test_cluster_replicated import connect_or_none, retrying

pytestmark = pytest.mark.single_server('starts its own clusters')

T = r.db("test").table("t")
ONE = r.db("test").table("one")
OK = r.db("test").table("ok")
EVERYONE = ["alpha", "beta", "delta", "epsilon", "gamma"]
# alpha, delta and epsilon hold `t` (tag doomed); delta alone holds `one` (tag lost);
# alpha, beta and gamma hold `ok` (tag safe).
TAGS = {"alpha": ["doomed", "safe"], "beta": ["safe"], "gamma": ["safe"],
        "delta": ["doomed", "lost"], "epsilon": ["doomed"]}


def start(directory, name, joins=()):
    port = free_port()
    args = ["--server-name", name, "--cluster-port", str(port), "-t", "default"]
    for t in TAGS[name]:
        args += ["-t", t]
    for j in joins:
        args += ["--join", "127.0.0.1:%d" % j.cluster_port]
    s = Server(directory, extra=args, log=os.path.join(directory, "..", name + ".log"))
    s.cluster_port = port
    return s.start()


def five_servers(dirs, procs):  # noqa: F811
    base = dirs()
    servers = {}
    for name in ("alpha", "beta", "gamma", "delta", "epsilon"):
        d = os.path.join(base, name)
        os.mkdir(d)
        servers[name] = start(d, name, [servers["alpha"]] if servers else [])
        procs.append(servers[name])
    conns = {n: wait_for(lambda: connect_or_none(s), lambda c: c is not None, timeout=20)
             for n, s in servers.items()}
    for conn in conns.values():
        wait_for(lambda: names(conn), lambda n: n == EVERYONE, timeout=20)
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "test" in dbs, timeout=20)
    return servers, conns


def replicas(table, conn):
    return [sorted(s["replicas"]) for s in table.config()["shards"].run(conn)]


def ids(table, conn, **opts):
    return sorted(d["id"] for d in r.db("test").table(table, **opts).run(conn))


def repair(table, conn, mode, **opts):
    return table.reconfigure(emergency_repair=mode, **opts).run(conn)


def test_emergency_repair_rolls_back_and_erases(dirs, procs):  # noqa: F811
    servers, conns = five_servers(dirs, procs)
    conn = conns["alpha"]
    retrying(lambda: r.db("test").table_create(
        "t", replicas={"doomed": 3}, primary_replica_tag="doomed").run(conn))
    retrying(lambda: r.db("test").table_create(
        "one", replicas={"lost": 1}, primary_replica_tag="lost").run(conn))
    retrying(lambda: r.db("test").table_create(
        "ok", replicas={"safe": 3}, primary_replica_tag="safe").run(conn))
    for t in (T, ONE, OK):
        retrying(lambda: t.wait(wait_for="all_replicas_ready", timeout=30).run(conn))
    assert replicas(T, conn) == [["alpha", "delta", "epsilon"]]
    assert replicas(ONE, conn) == [["delta"]]
    docs = [{"id": "k%03d" % i} for i in range(200)]
    res = retrying(lambda: T.insert(docs, durability="hard").run(conns["beta"]))
    assert res["inserted"] == 200, res
    acked = [d["id"] for d in docs]
    assert retrying(lambda: ONE.insert([{"id": i} for i in range(10)]).run(conn))["inserted"] == 10
    assert retrying(lambda: OK.insert({"id": "fine"}).run(conn))["inserted"] == 1
    # alpha's own copy holds every acknowledged write before the others die.
    wait_for(lambda: ids("t", conn, read_mode="outdated"), lambda got: got == acked,
             timeout=20)

    servers["delta"].kill9()
    servers["epsilon"].kill9()
    # No quorum: writes and majority reads fail with RethinkDB's errors.
    with pytest.raises(ReqlAvailabilityError):
        T.insert({"id": "lost"}).run(conn)
    with pytest.raises(ReqlOpFailedError):
        r.db("test").table("t", read_mode="majority").count().run(conn)

    # A table that keeps its quorum needs no repair.
    with pytest.raises(ReqlOpFailedError, match="This table doesn't need to be repaired."):
        repair(OK, conn, "unsafe_rollback")
    # A table whose only replica is lost is refused by a rollback.
    with pytest.raises(ReqlOpFailedError, match="One or more shards of this table have no "
                       "available replicas. Since there are no available copies"):
        repair(ONE, conn, "unsafe_rollback")

    # A dry run says what would change, and changes nothing.
    res = retrying(lambda: repair(T, conn, "unsafe_rollback", dry_run=True), timeout=30)
    assert res["reconfigured"] == 0 and "status_changes" not in res, res
    new = res["config_changes"][0]["new_val"]["shards"]
    assert new == [{"primary_replica": "alpha", "replicas": ["alpha"],
                    "nonvoting_replicas": []}], new
    assert replicas(T, conn) == [["alpha", "delta", "epsilon"]]

    res = retrying(lambda: repair(T, conn, "unsafe_rollback"), timeout=30)
    assert res["reconfigured"] == 1 and len(res["status_changes"]) == 1, res
    for c in (conns["alpha"], conns["beta"], conns["gamma"]):
        wait_for(lambda: replicas(T, c), lambda got: got == [["alpha"]], timeout=20)
    retrying(lambda: T.wait(wait_for="ready_for_writes", timeout=30).run(conn), timeout=40)
    # Every document alpha had is there, in every read mode, through every server.
    for c in (conns["alpha"], conns["beta"], conns["gamma"]):
        assert retrying(lambda: ids("t", c)) == acked
        assert retrying(lambda: ids("t", c, read_mode="majority")) == acked
    assert retrying(lambda: T.insert({"id": "after"}).run(conns["gamma"]))["inserted"] == 1
    acked = sorted(acked + ["after"])
    status = T.status().run(conn)
    assert [sorted(x["server"] for x in s["replicas"]) for s in status["shards"]] == [["alpha"]]
    assert status["status"]["all_replicas_ready"], status
    # Nothing left to repair.
    with pytest.raises(ReqlOpFailedError, match="This table doesn't need to be repaired."):
        repair(T, conn, "unsafe_rollback")

    # The lost table is erased: empty and writable on an available server.
    res = retrying(lambda: repair(ONE, conn, "unsafe_rollback_or_erase"), timeout=30)
    assert res["reconfigured"] == 1, res
    [[holder]] = replicas(ONE, conn)
    assert holder in ("alpha", "beta", "gamma"), holder
    retrying(lambda: ONE.wait(wait_for="ready_for_writes", timeout=30).run(conn), timeout=40)
    assert retrying(lambda: ONE.count().run(conn)) == 0
    assert retrying(lambda: ONE.insert({"id": "new"}).run(conn))["inserted"] == 1

    # The killed servers come back one after the other: their old copies are dropped,
    # they never bring back the old data nor disturb the new groups.
    for name in ("delta", "epsilon"):
        servers[name].start()
        conns[name] = wait_for(lambda: connect_or_none(servers[name]),
                               lambda c: c is not None, timeout=20)
        wait_for(lambda: replicas(T, conns[name]), lambda got: got == [["alpha"]],
                 timeout=20)
    wait_for(lambda: names(conn), lambda n: n == EVERYONE, timeout=20)
    for c in conns.values():
        assert retrying(lambda: ids("t", c)) == acked
        assert retrying(lambda: ids("one", c)) == ["new"]
    assert T.status()["shards"][0]["primary_replicas"].run(conn) == ["alpha"]

    # Grown back to three replicas: every document on every one of them.
    res = retrying(lambda: T.reconfigure(
        shards=1, replicas={"doomed": 3}, primary_replica_tag="doomed").run(conn))
    assert res["reconfigured"] == 1, res
    assert replicas(T, conn) == [["alpha", "delta", "epsilon"]]
    retrying(lambda: T.wait(wait_for="all_replicas_ready", timeout=30).run(conn), timeout=40)
    assert retrying(lambda: T.insert({"id": "grown"}).run(conns["delta"]))["inserted"] == 1
    acked = sorted(acked + ["grown"])
    for name in ("alpha", "delta", "epsilon"):
        wait_for(lambda: ids("t", conns[name], read_mode="outdated"),
                 lambda got: got == sorted(acked), timeout=30)
    for c in conns.values():
        assert retrying(lambda: ids("t", c, read_mode="majority")) == sorted(acked)


def test_the_replica_that_applied_the_most_is_kept(dirs, procs):  # noqa: F811
    """Of the replicas left, the repair keeps the data of the one that applied the most
    of the old group's log, whatever its place in the configuration."""
    servers, conns = five_servers(dirs, procs)
    conn = conns["epsilon"]
    m = r.db("test").table("m")
    retrying(lambda: r.db("test").table_create("m", replicas=1).run(conn))
    # Four voters (a quorum is three): alpha (primary), beta, delta, gamma.
    retrying(lambda: m.config().update({"shards": [{
        "primary_replica": "alpha", "replicas": ["alpha", "beta", "delta", "gamma"],
        "nonvoting_replicas": []}]}).run(conn))
    retrying(lambda: m.wait(wait_for="all_replicas_ready", timeout=30).run(conn), timeout=40)
    assert replicas(m, conn) == [["alpha", "beta", "delta", "gamma"]]
    early = ["e%02d" % i for i in range(50)]
    assert retrying(lambda: m.insert([{"id": k} for k in early]).run(conn))["inserted"] == 50
    wait_for(lambda: ids("m", conns["beta"], read_mode="outdated"), lambda g: g == early,
             timeout=20)
    # beta misses the later writes (paused, briefly enough to stay connected).
    os.kill(servers["beta"].proc.pid, signal.SIGSTOP)
    try:
        # One insert each, so one log entry each: the leader sends a paused follower
        # one append at a time, so beta misses most of them even if the first one
        # reaches its socket (one chunk's entry could reach it whole, with its commit,
        # and be applied once beta resumes).
        late = ["l%02d" % i for i in range(50)]
        for k in late:
            res = retrying(lambda: m.insert({"id": k}).run(conn))
            assert res["inserted"] == 1, res
        wait_for(lambda: ids("m", conns["delta"], read_mode="outdated"),
                 lambda g: g == sorted(early + late), timeout=20)
        servers["alpha"].kill9()
        servers["gamma"].kill9()
    finally:
        os.kill(servers["beta"].proc.pid, signal.SIGCONT)
    # beta and delta are left: two of four voters, no quorum. beta comes first in the
    # configuration, but delta applied more: delta's copy is kept.
    wait_for(lambda: names(conn), lambda n: n == ["beta", "delta", "epsilon"], timeout=20)
    res = retrying(lambda: repair(m, conn, "unsafe_rollback"), timeout=30)
    assert res["reconfigured"] == 1, res
    new = res["config_changes"][0]["new_val"]["shards"]
    assert new == [{"primary_replica": "delta", "replicas": ["beta", "delta"],
                    "nonvoting_replicas": []}], new
    retrying(lambda: m.wait(wait_for="all_replicas_ready", timeout=30).run(conn), timeout=40)
    for c in (conn, conns["beta"], conns["delta"]):
        assert retrying(lambda: ids("m", c)) == sorted(early + late)
    wait_for(lambda: ids("m", conns["beta"], read_mode="outdated"),
             lambda g: g == sorted(early + late), timeout=20)


def test_an_emergency_repair_abandons_a_stuck_resharding(dirs, procs):  # noqa: F811
    """A resharding of `t` whose new shard is on delta, paused (SIGSTOP) once it was
    given it, cannot finish: the old shard is frozen. Then epsilon dies and the old
    shard loses its quorum too. An emergency repair no longer waits on the resharding:
    it abandons it (docs/clustering.md, "Abandoning a resharding"), repairs the old
    shard on alpha, which is then unfrozen: writable, with every document."""
    servers, conns = five_servers(dirs, procs)
    conn = conns["alpha"]
    heartbeat = r.db("rethinkdb").table("cluster_config").get("heartbeat")
    # Long enough for delta to stay "connected" while paused, and given the new shard.
    heartbeat.update({"heartbeat_timeout_secs": 60}).run(conn)
    for c in conns.values():
        wait_for(lambda: heartbeat.run(c), lambda row: row["heartbeat_timeout_secs"] == 60)
    retrying(lambda: r.db("test").table_create(
        "t", replicas={"doomed": 3}, primary_replica_tag="doomed").run(conn))
    retrying(lambda: T.wait(wait_for="all_replicas_ready", timeout=30).run(conn))
    docs = [{"id": "k%03d" % i} for i in range(200)]
    assert retrying(lambda: T.insert(docs).run(conn))["inserted"] == 200
    acked = [d["id"] for d in docs]
    wait_for(lambda: ids("t", conn, read_mode="outdated"), lambda got: got == acked,
             timeout=20)

    os.kill(servers["delta"].proc.pid, signal.SIGSTOP)
    try:
        deadline = time.time() + 45
        while T.status()["status"]["ready_for_writes"].run(conn):
            assert time.time() < deadline, "the resharding never began"
            try:
                T.reconfigure(shards=2, replicas={"lost": 1},
                              primary_replica_tag="lost").run(conn)
                pytest.fail("a resharding onto a paused server finished")
            except ReqlError:
                time.sleep(0.2)  # the copy cannot reach the new shard
        with pytest.raises(ReqlOpFailedError, match="Cannot perform"):
            T.insert({"id": "frozen"}).run(conns["beta"])
        servers["epsilon"].kill9()
        heartbeat.update({"heartbeat_timeout_secs": 2}).run(conn)
        wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta", "gamma"], timeout=20)
        res = retrying(lambda: repair(T, conn, "unsafe_rollback"), timeout=30)
        assert res["reconfigured"] == 1, res
        for c in (conns["alpha"], conns["beta"], conns["gamma"]):
            wait_for(lambda: replicas(T, c), lambda got: got == [["alpha"]], timeout=20)
        # Ready for writes once the repaired shard is unfrozen.
        retrying(lambda: T.wait(wait_for="ready_for_writes", timeout=60).run(conn), timeout=90)
        assert retrying(lambda: T.insert({"id": "after"}).run(conns["gamma"]))["inserted"] == 1
        acked = sorted(acked + ["after"])
        for c in (conns["alpha"], conns["beta"], conns["gamma"]):
            assert retrying(lambda: ids("t", c, read_mode="majority")) == acked
    finally:
        os.kill(servers["delta"].proc.pid, signal.SIGCONT)
