"""Changefeed load: delivery latency, write throughput with/without feeds, memory per
idle feed. Bounded: a few seconds per phase.

    python tests/perf/changefeed_load.py --port 28700 --pid PID [--feeds 1000]
        [--kind point|filter|table] [--rate 2000]

`filter` feeds are `filter(row('id') == i)`, found by the hub's equality index; `table`
feeds are whole-table feeds (every write reaches every feed: use a low `--rate`, as the
Python reader decodes every delivery).

Feeds are opened on one raw connection (one token each); a reader thread answers every
SUCCESS_PARTIAL with CONTINUE at once. A writer connection pipelines `update`s (soft
durability) of documents carrying their send time; latency = receive time - send time
(an upper bound of commit-to-client, as it includes the write itself)."""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from rethinkdb import r  # noqa: E402

from reqlwire import SUCCESS_PARTIAL, RawConn, rss_kib, term  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000 if xs else float("nan")


def writer(port, table, ndocs, rate, seconds, pipeline=64):
    """Pipelined updates at `rate`/s (0 = as fast as possible); returns writes/s."""
    c = RawConn(port)
    tok, sent, done = 1000, 0, 0
    began = time.time()
    end = began + seconds
    while time.time() < end:
        if rate:
            due = int((time.time() - began) * rate)
            if sent >= due:
                time.sleep(0.0005)
                continue
        n = pipeline if not rate else min(pipeline, max(1, due - sent))
        for _ in range(n):
            q = r.table(table).get(sent % ndocs).update({"t": time.time()}, durability="soft")
            c.start(tok, term(q))
            tok += 1
            sent += 1
        for _ in range(n):
            c.recv()
            done += 1
    took = time.time() - began
    c.close()
    return done / took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--feeds", type=int, default=1000)
    ap.add_argument("--kind", default="point", choices=["point", "filter", "filter-unindexed", "table"])
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--idle", type=int, default=10000)
    a = ap.parse_args()
    conn = r.connect(port=a.port)
    table = "cfload"
    if table in r.table_list().run(conn):
        r.table_drop(table).run(conn)
    r.table_create(table).run(conn)
    ndocs = a.feeds
    r.table(table).insert([{"id": i, "t": 0} for i in range(ndocs)]).run(conn)

    base_tput = writer(a.port, table, ndocs, 0, a.seconds)

    feeds = RawConn(a.port, timeout=600)
    lat, stop = [], threading.Event()
    for i in range(a.feeds):
        q = {"point": r.table(table).get(i).changes(),
             "filter": r.table(table).filter(r.row["id"].eq(i)).changes(),
             # The same filter in a form the equality index does not recognise.
             "filter-unindexed": r.table(table).filter(r.row["id"].eq(i).and_(True)).changes(),
             "table": r.table(table).changes()}[a.kind]
        resp = feeds.query(i + 1, term(q))
        assert resp["t"] == SUCCESS_PARTIAL, resp
        feeds.cont(i + 1)

    def read():
        while not stop.is_set():
            try:
                tok, resp = feeds.recv()
            except OSError:
                return
            now = time.time()
            for ch in resp.get("r", []):
                nv = ch.get("new_val") or {}
                if nv.get("t"):
                    lat.append(now - nv["t"])
            if resp["t"] == SUCCESS_PARTIAL:
                feeds.cont(tok)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    time.sleep(0.5)
    lat.clear()
    steady = writer(a.port, table, ndocs, a.rate, a.seconds)
    time.sleep(0.5)
    n_steady, p50, p99 = len(lat), pct(lat, 0.5), pct(lat, 0.99)
    lat.clear()
    feed_tput = writer(a.port, table, ndocs, 0, a.seconds)
    time.sleep(0.5)
    stop.set()
    feeds.close()

    # Memory per idle feed: point (or filtered) feeds on documents nobody writes.
    idle_kind = a.kind if a.kind.startswith("filter") else "point"
    time.sleep(1)
    idle = RawConn(a.port, timeout=600)
    before = rss_kib(a.pid)
    for i in range(a.idle):
        key = "idle-%d" % i
        q = {"point": r.table(table).get(key).changes(),
             "filter": r.table(table).filter(r.row["id"].eq(key)).changes(),
             "filter-unindexed":
                 r.table(table).filter(r.row["id"].eq(key).and_(True)).changes()}[idle_kind]
        resp = idle.query(i + 1, term(q))
        assert resp["t"] == SUCCESS_PARTIAL, resp
        idle.cont(i + 1)
    time.sleep(1)
    after = rss_kib(a.pid)
    idle_tput = writer(a.port, table, ndocs, 0, a.seconds)
    idle.close()
    print("kind=%s feeds=%d" % (a.kind, a.feeds))
    print("write throughput, no feeds:            %8.0f writes/s" % base_tput)
    print("write throughput, %5d %s feeds:   %8.0f writes/s (every write delivered)"
          % (a.feeds, a.kind, feed_tput))
    print("steady %d writes/s (achieved %.0f): %d deliveries, latency p50 %.2f ms, p99 %.2f ms"
          % (a.rate, steady, n_steady, p50, p99))
    print("%d idle %s feeds: RSS +%d KiB = %.2f KiB per feed; write throughput %0.f writes/s"
          % (a.idle, idle_kind, after - before, (after - before) / a.idle, idle_tput))


if __name__ == "__main__":
    main()
