"""Crash harness: a concurrent hard-durability write load, SIGKILL at random moments,
restart, and a check that every acknowledged write survived and nothing unacknowledged
is half-applied.

Each writer thread owns a disjoint key range and records, per key, the state its last
acknowledged write left (a document or "deleted") and the state of the write in flight
when the server died. After a restart each key must hold exactly the acknowledged state
or, if a write was in flight, that write's complete result. When the server supports
secondary indexes, an index on `v` is maintained by the same writes and must agree with
a full scan after every restart.

With `--shards N` the table starts with N shards, and `--reshard` adds a thread that
reconfigures it to random shard counts while the writers run, so kills also land in the
middle of reshards.

Run the long form with:  python tests/crash.py --kills 100 [--shards 4 --reshard]
"""
import argparse
import os
import random
import sys
import tempfile
import threading
import time

from rethinkdb import r
from rethinkdb.errors import ReqlError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Server  # noqa: E402

DELETED = object()
UNKNOWN = object()


class Writer(threading.Thread):
    """Writes to keys [base, base+span) until the connection breaks or time runs out."""

    def __init__(self, port, base, span, rng, state, deadline):
        super().__init__(daemon=True)
        self.port, self.base, self.span, self.rng = port, base, span, rng
        self.state = state          # key -> acknowledged state (dict or DELETED)
        self.inflight = {}          # key -> state the unacknowledged write would leave
        self.deadline = deadline
        self.acked = 0

    def run(self):
        try:
            conn = r.connect("127.0.0.1", self.port)
        except Exception:
            return
        while time.time() < self.deadline:
            key = self.base + self.rng.randrange(self.span)
            cur = self.state.get(key, DELETED)
            op = self.rng.random()
            if cur is DELETED:
                new = {"id": key, "v": self.rng.randrange(1000), "n": 0}
                query = r.table("crash").insert(new)
            elif op < 0.7:
                new = dict(cur, n=cur["n"] + 1, v=self.rng.randrange(1000))
                query = r.table("crash").get(key).update({"n": new["n"], "v": new["v"]})
            else:
                new = DELETED
                query = r.table("crash").get(key).delete()
            self.inflight = {key: new}
            try:
                res = query.run(conn, durability="hard")
            except (ReqlError, OSError, Exception):
                return  # the server died: the write stays "in flight"
            if res.get("errors"):
                raise AssertionError("write failed: %r" % res)
            self.state[key] = new
            self.inflight = {}
            self.acked += 1


def check(conn, states, inflights, with_index):
    docs = {d["id"]: d for d in r.table("crash").run(conn)}
    keys = set(docs) | set(states) | set(inflights)
    for key in keys:
        actual = docs.get(key, DELETED)
        acked = states.get(key, DELETED)
        ok = actual == acked or (key in inflights and actual == inflights[key])
        if not ok:
            raise AssertionError("key %r: found %r, acknowledged %r, in flight %r"
                                 % (key, actual, acked, inflights.get(key, "-")))
    if with_index:
        by_index = sorted(d["id"] for d in r.table("crash").between(
            r.minval, r.maxval, index="v").run(conn))
        if by_index != sorted(docs):
            raise AssertionError("index v disagrees with the table: %d vs %d entries"
                                 % (len(by_index), len(docs)))
    return len(docs)


class Resharder(threading.Thread):
    """Reconfigures the table to random shard counts until the server dies."""

    def __init__(self, port, rng, deadline):
        super().__init__(daemon=True)
        self.port, self.rng, self.deadline = port, rng, deadline
        self.done = 0

    def run(self):
        try:
            conn = r.connect("127.0.0.1", self.port)
            while time.time() < self.deadline:
                n = self.rng.choice([1, 2, 3, 4, 6])
                r.table("crash").reconfigure(shards=n, replicas=1).run(conn)
                self.done += 1
        except Exception:  # noqa: BLE001 - the server is killed under it
            return


def run(kills, seed=None, threads=4, verbose=True, shards=1, reshard=False):
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    states = [dict() for _ in range(threads)]
    with tempfile.TemporaryDirectory() as d:
        server = Server(d).start()
        conn = server.connect()
        r.db("test").table_create("crash", shards=shards).run(conn)
        with_index = True
        try:
            r.table("crash").index_create("v").run(conn)
            r.table("crash").index_wait("v").run(conn)
        except ReqlError:
            with_index = False
        conn.close()
        total_acked = 0
        for k in range(kills):
            deadline = time.time() + 5
            writers = [Writer(server.port, 1_000_000 * (i + 1), 200, random.Random(rng.random()),
                              states[i], deadline) for i in range(threads)]
            for w in writers:
                w.start()
            resharder = Resharder(server.port, random.Random(rng.random()), deadline)
            if reshard:
                resharder.start()
            time.sleep(rng.uniform(0.1, 0.8))
            server.kill9()
            for w in writers:
                w.join(10)
            if reshard:
                resharder.join(10)
            inflight = {}
            for w in writers:
                inflight.update(w.inflight)
                total_acked += w.acked
            server.start()
            conn = server.connect()
            merged = {}
            for s in states:
                merged.update(s)
            n = check(conn, merged, inflight, with_index)
            # The in-flight writes are now resolved: adopt what the server holds.
            docs = {dd["id"]: dd for dd in r.table("crash").get_all(*inflight.keys()).run(conn)} \
                if inflight else {}
            for key in inflight:
                owner = states[(key // 1_000_000) - 1]
                owner[key] = docs.get(key, DELETED)
            conn.close()
            if verbose:
                print("kill %d/%d: %d documents verified, %d acknowledged writes so far"
                      % (k + 1, kills, n, total_acked), flush=True)
        server.stop()
    return total_acked, with_index, seed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--seed", type=int)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--reshard", action="store_true")
    a = p.parse_args()
    started = time.time()
    acked, with_index, seed = run(a.kills, a.seed, a.threads, shards=a.shards,
                                  reshard=a.reshard)
    print("%d kills, %d acknowledged writes verified, index checked: %s, seed %d, %.0f s"
          % (a.kills, acked, with_index, seed, time.time() - started))


if __name__ == "__main__":
    main()
