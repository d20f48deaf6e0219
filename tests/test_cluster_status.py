"""`table_status` of a replicated table is the shard leader's view on every server
(issue #13): only the leader knows how far each replica's log is, so a follower and a
server holding no replica ask it. A replica that is connected but far behind (paused
with SIGSTOP while writes go on) is `backfilling` through every server, the table is not
`all_replicas_ready` and `wait(wait_for="all_replicas_ready")` waits, through any server,
until it has caught up."""
import os
import signal
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError

from test_cluster_join import wait_for, names, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import three_servers, retrying

pytestmark = pytest.mark.single_server('starts its own clusters')

T = r.db("test").table("st")


def states(conn):
    """{server name: state} of the table's one shard, and its primary, through `conn`."""
    shard = T.status().run(conn)["shards"][0]
    return {x["server"]: x["state"] for x in shard["replicas"]}, shard["primary_replicas"]


def test_a_lagging_replica_is_backfilling_through_every_server(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    servers = {"alpha": a, "beta": b, "gamma": c}
    # Two replicas on alpha and beta: gamma holds none of the shard.
    retrying(lambda: r.db("test").table_create("st", replicas=1).run(conns[a]))
    retrying(lambda: T.config().update({"shards": [
        {"primary_replica": "alpha", "replicas": ["alpha", "beta"], "nonvoting_replicas": []}
    ]}).run(conns[a]))
    for conn in conns.values():
        T.wait(wait_for="all_replicas_ready", timeout=30).run(conn)
    for conn in conns.values():
        got, primary = wait_for(lambda: states(conn),
                                lambda s: s[0] == {"alpha": "ready", "beta": "ready"})
        assert len(primary) == 1
    leader = primary[0]
    follower = "beta" if leader == "alpha" else "alpha"
    # The follower is paused (still connected: the heartbeat timeout is 10 s) while
    # the leader commits... nothing: two voters need both. So it is made a non-voter
    # first, and the leader writes on alone.
    retrying(lambda: T.config().update({"shards": [
        {"primary_replica": leader, "replicas": [leader, follower],
         "nonvoting_replicas": [follower]}
    ]}).run(conns[servers[leader]]))
    wait_for(lambda: T.config()["shards"][0]["nonvoting_replicas"].run(conns[a]),
             lambda n: n == [follower])
    for conn in conns.values():
        T.wait(wait_for="all_replicas_ready", timeout=30).run(conn)
    os.kill(servers[follower].proc.pid, signal.SIGSTOP)
    try:
        wconn = conns[servers[leader]]
        # One insert each: a lag is counted in log entries, and the documents of one
        # insert's chunk share an entry.
        for i in range(400):
            res = T.insert({"id": str(i)}).run(wconn)
            assert res["inserted"] == 1, res
        # Through the leader, and through gamma (no replica): the paused replica is
        # behind. (The paused server itself cannot answer.)
        for conn in (wconn, conns[c]):
            got, primary = states(conn)
            assert got == {leader: "ready", follower: "backfilling"}, got
            assert primary == [leader]
            st = T.status().run(conn)["status"]
            assert st["ready_for_writes"] and not st["all_replicas_ready"], st
            # Not ready within a short timeout: RethinkDB's wait times out.
            with pytest.raises(ReqlOpFailedError, match="Timed out while waiting for tables"):
                T.wait(wait_for="all_replicas_ready", timeout=1).run(conn)
    finally:
        os.kill(servers[follower].proc.pid, signal.SIGCONT)
    # Caught up: ready through every server, and wait returns.
    began = time.time()
    for conn in conns.values():
        T.wait(wait_for="all_replicas_ready", timeout=30).run(conn)
        got, _ = wait_for(lambda: states(conn), lambda s: set(s[0].values()) == {"ready"})
    assert time.time() - began < 30
