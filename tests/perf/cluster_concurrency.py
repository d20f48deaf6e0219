"""Concurrent writes and reads on a replicated table, measured on real processes (by
hand; issue #13).

Three `ponder` servers on loopback (as `failover.py` starts them) and `test.c` with
`--shards` shards (default 1) of three replicas and 1,000 documents. For each `--clients` count (threads with
a connection each, all through the first server), the clients send `--ops` operations
in all, each one after another: updates with hard durability, then `majority` reads.
Prints operations per second and the latency median and 99th percentile. Each of these
operations holds an evaluation thread of the server while it waits for the shard's
leader and a quorum (`server::exec`), so this shows whether the number of evaluation
threads caps what a server has in flight.

    .venv/bin/python tests/perf/cluster_concurrency.py --ops 4000 [--clients 1,8,32,64]
        [--shards 4]
        [--binary target/release/ponder]
"""
import os
import statistics
import sys
import threading
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import arguments, three_servers  # noqa: E402


def run(conns, query, ops):
    """`ops` operations split over `conns`; (seconds, sorted latencies in ms)."""
    lat, lock = [], threading.Lock()

    def client(k, conn):
        mine = []
        for i in range(k, ops, len(conns)):
            t = time.monotonic()
            query(i).run(conn)
            mine.append((time.monotonic() - t) * 1e3)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=client, args=(k, c)) for k, c in enumerate(conns)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0, sorted(lat)


def main():
    args = arguments(ops=(int, 4000), clients=(str, "1,8,32,64"), shards=(int, 1))
    with three_servers(args.binary, "concurrency") as procs:
        a = procs[0]
        deadline = time.time() + 30
        while True:
            try:
                r.db("test").table_create("c", shards=args.shards, replicas=3).run(a.conn)
                break
            except r.ReqlError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        r.db("test").table("c").wait(timeout=30).run(a.conn)
        r.db("test").table("c").insert(
            [{"id": i, "v": 0, "pad": "x" * 100} for i in range(1000)]).run(a.conn)
        kinds = [
            ("update hard", lambda i: r.db("test").table("c").get(i % 1000)
             .update({"v": i}, durability="hard")),
            ("read majority", lambda i: r.db("test").table(
                "c", read_mode="majority").get(i % 1000)),
        ]
        print("%-8s %-14s %10s %10s %10s" % ("clients", "operation", "ops/s", "p50 ms",
                                             "p99 ms"))
        for n in [int(c) for c in args.clients.split(",")]:
            conns = [r.connect("127.0.0.1", a.port, timeout=20) for _ in range(n)]
            for name, q in kinds:
                secs, lat = run(conns, q, args.ops)
                print("%-8d %-14s %10.0f %10.2f %10.2f" % (
                    n, name, args.ops / secs, statistics.median(lat),
                    lat[int(len(lat) * 0.99) - 1]), flush=True)
            for c in conns:
                c.close()


if __name__ == "__main__":
    sys.exit(main())
