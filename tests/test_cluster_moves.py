"""Moving the replicas of replicated tables (`reconfigure`, `table_config` writes) on
three real `ponder` processes, under writes: a table grows from one replica to three,
shrinks back, moves to another server, and comes back to servers that dropped their
copy (a new incarnation there, never the old copy's Raft node id); a non-voting
replica receives every write. After each change every acknowledged write is read
through every server in every `read_mode` (`outdated` once the replica caught up), and
`table_status` settles with every replica `ready`.

Linearizability across moves: `ponder-lincheck` records six clients' reads, writes and
compare-and-set on a 3-replica table (`majority` reads, hard durability) while its
replicas shrink to one, move, grow back to three (new incarnations on servers that
left) and a server is killed with SIGKILL and restarted in the middle of a move; the
history must be linearizable with no acknowledged write lost (20 s in CI; longer with
PONDER_MOVES_SECONDS)."""
import os
import random
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError

from test_cluster_join import wait_for, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import retrying, three_servers
from test_cluster_lincheck import check_history, start_lincheck

pytestmark = pytest.mark.single_server('starts its own clusters')

SECONDS = int(os.environ.get("PONDER_MOVES_SECONDS", "20"))

T = r.db("test").table("t")


class Writer:
    """Inserts documents through one server until stopped (bounded in count and time),
    keeping the keys whose insert was acknowledged."""

    def __init__(self, server, limit=20000, seconds=120):
        self.conn = server.connect()
        self.acked = []
        self.stop = threading.Event()
        self.limit, self.until = limit, time.time() + seconds
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = 0
        while not self.stop.is_set() and n < self.limit and time.time() < self.until:
            key = "w%06d" % n
            n += 1
            try:
                res = T.insert({"id": key}).run(self.conn)
            except ReqlError:
                # Unavailable or indeterminate while a leader moves: not acknowledged.
                time.sleep(0.05)
                continue
            if res.get("inserted") == 1:
                self.acked.append(key)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        self.conn.close()


def replicas(conn):
    return [sorted(s["replicas"]) for s in T.config()["shards"].run(conn)]


def settled(conn, want):
    """Waits until the table's status shows the replicas `want` (names), all ready."""
    def status():
        try:
            return T.status().run(conn)
        except ReqlError as e:
            return {"error": str(e)}

    def ok(st):
        shards = st.get("shards") or []
        return (len(shards) == 1
                and sorted(x["server"] for x in shards[0]["replicas"]) == sorted(want)
                and all(x["state"] == "ready" for x in shards[0]["replicas"])
                and st["status"]["all_replicas_ready"])
    return wait_for(status, ok, timeout=60)


def check_everywhere(conns, acked, holders):
    """Every acknowledged key is read through every server (single and majority), and
    from the local copy of every server in `holders` (outdated)."""
    want = set(acked)
    for s, conn in conns.items():
        for mode in ("single", "majority"):
            got = set(retrying(lambda: list(
                r.db("test").table("t", read_mode=mode)["id"].run(conn)), timeout=30))
            assert want <= got, (s.proc.pid, mode, sorted(want - got)[:5])
    for s in holders:
        wait_for(lambda: set(r.db("test").table("t", read_mode="outdated")["id"]
                             .run(conns[s])) >= want,
                 lambda ok: ok, timeout=60)


def test_replicas_grow_shrink_move_and_come_back_under_writes(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    names = {a: "alpha", b: "beta", c: "gamma"}
    conn = conns[b]
    retrying(lambda: r.db("test").table_create("t", replicas=1)
             .run(conn))
    retrying(lambda: T.wait(timeout=30).run(conn))
    first = replicas(conn)[0]
    assert len(first) == 1
    by_name = {v: k for k, v in names.items()}
    with Writer(b) as w:
        for cycle in range(3):
            # Grow to three replicas: the new ones are learners, then voters.
            res = retrying(lambda: T.reconfigure(shards=1, replicas=3).run(conn))
            assert res["reconfigured"] == 1, res
            settled(conn, ["alpha", "beta", "gamma"])
            check_everywhere(conns, list(w.acked), [a, b, c])
            # Shrink to one (the primary stays); the others drop their copies.
            res = retrying(lambda: T.reconfigure(shards=1, replicas=1).run(conn))
            assert res["reconfigured"] == 1, res
            kept = replicas(conn)[0]
            assert len(kept) == 1
            settled(conn, kept)
            check_everywhere(conns, list(w.acked), [by_name[kept[0]]])
        # Move the only replica to another server.
        target = next(n for n in ("alpha", "beta", "gamma") if n != kept[0])
        res = retrying(lambda: T.config().update(
            {"shards": [{"primary_replica": target, "replicas": [target]}]}).run(conn))
        assert res["errors"] == 0, res
        settled(conn, [target])
        check_everywhere(conns, list(w.acked), [by_name[target]])
        # A non-voting replica on the others: it receives every write.
        others = sorted(n for n in ("alpha", "beta", "gamma") if n != target)
        res = retrying(lambda: T.config().update({"shards": [{
            "primary_replica": target, "replicas": [target] + others,
            "nonvoting_replicas": [others[0]]}]}).run(conn))
        assert res["errors"] == 0, res
        settled(conn, [target] + others)
        shard = T.config()["shards"][0].run(conn)
        assert shard["nonvoting_replicas"] == [others[0]], shard
        time.sleep(1)
    acked = list(w.acked)
    assert len(acked) > 100, len(acked)
    check_everywhere(conns, acked, [a, b, c])
    # The primary is the configured one once settled.
    wait_for(lambda: T.status()["shards"][0]["primary_replicas"].run(conn),
             lambda p: p == [target], timeout=30)


def test_moves_under_linearizability_checking(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    servers = {"alpha": a, "beta": b, "gamma": c}
    names = list(servers)
    history = os.path.join(dirs(), "h.jsonl")
    run = start_lincheck((a, b, c), history, SECONDS)
    conn = conns[a]
    table = r.db("test").table("lincheck")
    wait_for(lambda: "lincheck" in r.db("test").table_list().run(conn), lambda x: x,
             timeout=30)
    table.wait(timeout=30).run(conn)
    rng = random.Random(int(os.environ.get("PONDER_MOVES_SEED", "1")))
    began = time.time()
    moves, kills = [], 0

    def place(primary, replicas):
        # A server just restarted may not be connected again yet: asked again.
        res = wait_for(lambda: retrying(lambda: table.config().update({"shards": [
            {"primary_replica": primary, "replicas": replicas}]}).run(conn), timeout=30),
            lambda res: res["errors"] == 0 or "is not connected" not in res["first_error"],
            timeout=30)
        assert res["errors"] == 0, res
        moves.append((primary, tuple(replicas)))

    while time.time() - began + 6 < SECONDS or kills == 0:
        # Down to one replica on a random server, then back to all three.
        one = rng.choice(names)
        place(one, [one])
        time.sleep(1.5)
        primary = rng.choice(names)
        place(primary, names)
        if kills == 0 or rng.random() < 0.3:
            # A server killed while the new copies catch up (never the one this test
            # talks to), back 2 s later.
            victim = servers[rng.choice([n for n in names if servers[n] is not a])]
            time.sleep(0.3)
            victim.kill9()
            kills += 1
            time.sleep(2)
            victim.start()
        time.sleep(2)
    line = check_history(run, history, SECONDS, at_least=300)
    print("%d placements, %d kills;" % (len(moves), kills), line)
