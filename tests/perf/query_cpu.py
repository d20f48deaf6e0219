"""Server CPU time per query for a few query shapes, and peak memory of a streaming
aggregation, measured from /proc of a scratch server (not a timed test: a measurement).

    PONDER_BIN=target/release/ponder python tests/perf/query_cpu.py [--docs 100000]

For each shape it runs N queries one after another on one connection and divides the
server process's user+system CPU time by N. The client's own time is not counted.
"""
import argparse
import os
import random
import sys
import tempfile
import threading
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import Server  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid, key="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def measure(pid, conn, name, make_query, n):
    before = cpu_seconds(pid)
    for i in range(n):
        make_query(i).run(conn)
    used = cpu_seconds(pid) - before
    print("%-44s %8d queries  %9.1f us CPU/query" % (name, n, used / n * 1e6), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=100_000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        server = Server(d).start()
        pid = server.proc.pid
        conn = server.connect()
        r.table_create("t").run(conn)
        pad = "x" * 900
        for start in range(0, a.docs, 1000):
            r.table("t").insert([{"id": i, "field": i % 100, "pad": pad}
                                 for i in range(start, start + 1000)]).run(conn)
        rnd = random.Random(1)
        measure(pid, conn, "table.get(k)", lambda i: r.table("t").get(rnd.randrange(a.docs)), 20_000)
        measure(pid, conn, "table.get(k).update({...})  (soft)",
                lambda i: r.table("t").get(rnd.randrange(a.docs)).update({"n": i},
                                                                          durability="soft"),
                5_000)
        measure(pid, conn, "table.filter({field: v}).count()  (100k docs)",
                lambda i: r.table("t").filter({"field": 7}).count(), 10)
        base = rss_kib(pid)
        samples = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                samples.append(rss_kib(pid))
                time.sleep(0.005)

        t = threading.Thread(target=sample)
        t.start()
        total = r.table("t").map(lambda d: d["field"]).sum().run(conn)
        done.set()
        t.join()
        print("table.map(...).sum() over %d docs (~%d MB of documents) = %d; server RSS "
              "%d KiB before, at most %d KiB during (%d samples)"
              % (a.docs, a.docs * 950 // 1_000_000, total, base, max(samples), len(samples)))
        conn.close()
        server.stop()


if __name__ == "__main__":
    main()
