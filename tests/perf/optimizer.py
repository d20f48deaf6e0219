"""The query optimizer against the table scan on a large table (not a timed test: a
measurement for docs/performance.md).

    PONDER_BIN=target/release/ponder python tests/perf/optimizer.py [--docs 1000000]

Loads `--docs` documents `{id, age (0..9999), name}` into a scratch server with an
index on `age`, then reports the median wall time of each query shape with the
optimizer on and off (`optimizer=False`), and the plan the profile names.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import Server  # noqa: E402


def timed(q, conn, runs, **kw):
    ts = []
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = q.run(conn, **kw)
        if not isinstance(out, (int, float, dict)):
            out = list(out)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--scan-runs", type=int, default=3)
    p.add_argument("--runs", type=int, default=21)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        s = Server(d).start()
        c = s.connect()
        r.table_create("people").run(c)
        t = r.table("people")
        t.index_create("age").run(c)
        t.index_wait().run(c)
        t0 = time.perf_counter()
        batch = 5000
        for lo in range(0, a.docs, batch):
            t.insert(
                [{"id": i, "age": (i * 7919) % 10000, "name": "p%d" % i} for i in range(lo, min(lo + batch, a.docs))],
                durability="soft",
            ).run(c)
        print("loaded %d documents in %.1f s" % (a.docs, time.perf_counter() - t0), flush=True)
        shapes = [
            ("filter({'age': 30})", t.filter({"age": 30})),
            ("filter(row('age') == 30).count()", t.filter(r.row["age"] == 30).count()),
            ("filter(30 <= age < 32)", t.filter(lambda x: (x["age"] >= 30) & (x["age"] < 32))),
        ]
        for name, q in shapes:
            on, res_on = timed(q, c, a.runs)
            off, res_off = timed(q, c, a.scan_runs, optimizer=False)
            assert res_on == res_off, name
            prof = q.run(c, profile=True)["profile"][0]["sub_tasks"]
            print("%-36s on %9.2f ms  off %9.1f ms  x%.0f  [%s]"
                  % (name, on * 1e3, off * 1e3, off / on, "; ".join(p["description"] for p in prof)), flush=True)
        idx, res_idx = timed(t.order_by(index="age").limit(10), c, a.runs)
        fld, res_fld = timed(t.order_by("age").limit(10), c, a.runs)
        assert res_idx == res_fld
        print("order_by(index='age').limit(10) %.2f ms; order_by('age').limit(10) %.2f ms (x%.2f)"
              % (idx * 1e3, fld * 1e3, fld / idx), flush=True)
        try:
            t.order_by("age").limit(10).run(c, optimizer=False)
        except r.ReqlResourceLimitError as e:
            print("order_by('age').limit(10) with the optimizer off: %s" % e.message.split(".")[0])
        c.close()
        s.stop()


if __name__ == "__main__":
    main()
