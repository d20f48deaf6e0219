"""Cost per operation of replicated tables, measured on real processes (by hand; #13).

Three `ponder` servers on loopback (as `failover.py` starts them); tables `r1`, `r2`,
`r3` with one shard of 1, 2 and 3 replicas and 1,000 documents each. For each table and
operation kind — point reads in `read_mode` `single`, `majority` and `outdated`, and
updates with `durability` hard and soft — `--clients` clients (threads with a
connection each, default 1) send `--ops` operations in all, each client one after
another, through one server (`--via`: 0 alpha, 1 beta, 2 gamma), and the script
reports, per operation:

- the CPU time of all three server processes (user + system, from /proc), less what
  they spend idle (heartbeats, timers) over as long a pause right after;
- the bytes between servers, less the idle pause's: what the TCP connections among the three cluster ports
  received (`ss -ti`'s `bytes_received`, summed over both ends, so each byte counts once
  per receiving side).

    .venv/bin/python tests/perf/cluster_cost.py --ops 2000 [--clients 8] [--via 1]
        [--binary target/release/ponder]

Each table's primary is printed first: through a server that is not a shard's primary
(or holds no replica of it) the operation is routed, and the routing is in its cost.
"""
import os
import re
import subprocess
import sys
import threading
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import arguments, replicated_table, three_servers  # noqa: E402


def cpu_secs(procs):
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for p in procs:
        with open("/proc/%d/stat" % p.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cluster_bytes(procs):
    """Bytes received on every TCP connection whose local port is a cluster port of one
    of `procs` or that was dialed to one (the servers' connections to each other)."""
    ports = {p.cluster for p in procs}
    out = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True,
                         text=True).stdout.splitlines()
    total, keep = 0, False
    for line in out:
        if not line.startswith(" ") and not line.startswith("\t"):
            addrs = re.findall(r":(\d+)\s", line + " ")
            keep = any(int(a) in ports for a in addrs[-2:])
        elif keep:
            m = re.search(r"bytes_received:(\d+)", line)
            if m:
                total += int(m.group(1))
    return total


def run_clients(conns, query, ops):
    """`ops` operations of `query(i)`, shared among one thread per connection."""
    def client(k, conn):
        for i in range(k, ops, len(conns)):
            query(i).run(conn)
    threads = [threading.Thread(target=client, args=(k, c)) for k, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    args = arguments(ops=(int, 2000), clients=(int, 1), via=(int, 0))
    with three_servers(args.binary, "cost") as procs:
        a = procs[0]
        via = procs[args.via]
        conns = [r.connect("127.0.0.1", via.port, timeout=20) for _ in range(args.clients)]
        for n in (1, 2, 3):
            replicated_table(procs, "r%d" % n, replicas=n)
            r.db("test").table("r%d" % n).insert(
                [{"id": i, "v": 0, "pad": "x" * 100} for i in range(1000)]).run(a.conn)
            shard = r.db("test").table("r%d" % n).config().run(a.conn)["shards"][0]
            print("r%d: primary %s, replicas %s; operations through %s" % (
                n, shard["primary_replica"], ",".join(shard["replicas"]), via.name))
        print("%-4s %-16s %12s %14s %10s" % ("", "operation", "CPU µs/op", "bytes/op",
                                             "ops/s"))
        for n in (1, 2, 3):
            kinds = [
                ("read single", lambda i: r.db("test").table("r%d" % n).get(i % 1000)),
                ("read majority", lambda i: r.db("test").table(
                    "r%d" % n, read_mode="majority").get(i % 1000)),
                ("read outdated", lambda i: r.db("test").table(
                    "r%d" % n, read_mode="outdated").get(i % 1000)),
                ("update hard", lambda i: r.db("test").table("r%d" % n).get(i % 1000)
                 .update({"v": i}, durability="hard")),
                ("update soft", lambda i: r.db("test").table("r%d" % n).get(i % 1000)
                 .update({"v": i}, durability="soft")),
            ]
            for name, q in kinds:
                time.sleep(0.5)
                c0, b0, t0 = cpu_secs(procs), cluster_bytes(procs), time.monotonic()
                run_clients(conns, q, args.ops)
                c1, b1, t1 = cpu_secs(procs), cluster_bytes(procs), time.monotonic()
                # The same time idle: heartbeats and timers, subtracted.
                time.sleep(t1 - t0)
                c2, b2 = cpu_secs(procs), cluster_bytes(procs)
                cpu = (c1 - c0) - (c2 - c1)
                sent = (b1 - b0) - (b2 - b1)
                print("r=%d  %-16s %12.1f %14.0f %10.0f" % (
                    n, name, cpu * 1e6 / args.ops, sent / args.ops,
                    args.ops / (t1 - t0)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
