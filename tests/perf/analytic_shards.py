"""The analytic query (`map(field0.split('.').count()).sum()`) at several shard counts:
docs/s and server CPU per document, from /proc of a scratch server (a measurement, not a
timed test).

    PONDER_BIN=target/release/ponder python tests/perf/analytic_shards.py \
        --records 100000 --shards 1,2,4

Loads ponder-bench's YCSB usertable with `ponder-bench run --workloads analytic`, then for
each shard count reconfigures the table and runs the query `--runs` times.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import ROOT, Server  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from query_cpu import cpu_seconds  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--shards", default="1,2,4")
    p.add_argument("--runs", type=int, default=0, help="queries per shard count (default: 3M / records + 2)")
    a = p.parse_args()
    runs = a.runs or 3_000_000 // a.records + 2
    bench = os.path.join(ROOT, "target", "release", "ponder-bench")
    with tempfile.TemporaryDirectory() as d:
        server = Server(d).start()
        subprocess.run([bench, "run", "--ponder-port", str(server.port), "--systems", "ponder",
                        "--workloads", "analytic", "--records", str(a.records),
                        "--analytic-reps", "1", "--no-progress", "--out", os.path.join(d, "load")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conn = server.connect()
        table = r.db("bench").table("usertable")
        query = table.map(lambda doc: doc["field0"].split(".").count()).sum()
        for shards in [int(s) for s in a.shards.split(",")]:
            table.reconfigure(shards=shards, replicas=1).run(conn)
            query.run(conn)
            c0, t0 = cpu_seconds(server.proc.pid), time.time()
            for _ in range(runs):
                query.run(conn)
            wall, cpu = time.time() - t0, cpu_seconds(server.proc.pid) - c0
            docs = a.records * runs
            print("records %d shards %d: %.0f docs/s, %.2f cores, server CPU %.3f us per document"
                  % (a.records, shards, docs / wall, cpu / wall, cpu / docs * 1e6), flush=True)
        conn.close()
        server.stop()


if __name__ == "__main__":
    main()
