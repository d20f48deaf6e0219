"""Latency of filters the optimizer plans on a replicated table (by hand; #13).

Three `ponder` servers on loopback (the test suite's `conftest.Cluster`), a table of
two shards of three replicas with `--docs` documents `{id: i, v: i % 1000}` and an
index on `v`; each query runs `--runs` times (bounded by a minute each) through the
first server, and the script prints the median, least and most latency in ms with
the plan `profile` shows:

- `eq_v7`: `filter(v == 7)`, an index plan with or without statistics;
- `gt_v990`: `filter(v > 990)`, served only when the statistics say no document's
  value is an object (else a table scan);
- `ge_v0_count`: `filter(v >= 0).count()`, counted from index keys when served;
- `ge_v100_scan`: `filter(v >= 100)`, nine tenths of the table: a scan either way,
  after the planner counted the index up to half the table when it was served;
- `get_all_v7`: `get_all(7, index="v")`, no planning, for comparison.

    .venv/bin/python tests/perf/cluster_optimizer.py [--binary target/release/ponder]
        [--docs 20000] [--runs 50]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

QUERIES = ("eq_v7", "gt_v990", "ge_v0_count", "ge_v100_scan", "get_all_v7")


def query(r, t, name):
    return {
        "eq_v7": lambda: t.filter(r.row["v"] == 7),
        "gt_v990": lambda: t.filter(r.row["v"] > 990),
        "ge_v0_count": lambda: t.filter(r.row["v"] >= 0).count(),
        "ge_v100_scan": lambda: t.filter(r.row["v"] >= 100),
        "get_all_v7": lambda: t.get_all(7, index="v"),
    }[name]()


def plan_of(profile):
    text = json.dumps(profile)
    notes = [p for p in text.split('"') if p.startswith(("Optimizer", "Table scan"))]
    return notes[0] if notes else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "..", "target", "release", "ponder"))
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    os.environ["PONDER_BIN"] = os.path.abspath(args.binary)
    sys.path.insert(0, os.path.dirname(HERE))
    import conftest
    from rethinkdb import r

    with tempfile.TemporaryDirectory() as d:
        c = conftest.Cluster(d, 3).start()
        try:
            conn = c.connect()
            db = r.db("test")
            db.table_create("t", shards=2, replicas=3).run(conn)
            db.table("t").wait(timeout=60).run(conn)
            for i in range(0, args.docs, 1000):
                top = min(i + 1000, args.docs)
                docs = [{"id": j, "v": j % 1000} for j in range(i, top)]
                db.table("t").insert(docs).run(conn)
            db.table("t").index_create("v").run(conn)
            db.table("t").index_wait().run(conn)
            t = db.table("t")
            for name in QUERIES:
                q = query(r, t, name)
                times = []
                deadline = time.time() + 60
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    res = q.run(conn)
                    if not isinstance(res, int):
                        list(res)
                    times.append((time.perf_counter() - t0) * 1000)
                    if time.time() > deadline:
                        break
                plan = plan_of(q.run(conn, profile=True)["profile"])
                print("%-13s median %7.2f ms  least %6.2f  most %7.2f  %s" % (
                    name, statistics.median(times), min(times), max(times), plan[:70]))
        finally:
            c.stop()


if __name__ == "__main__":
    main()
