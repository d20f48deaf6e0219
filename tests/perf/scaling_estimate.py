"""Expected throughput of 1–16 servers, derived from measured costs per operation (#13).

Input: two outputs of `cluster_cost.py` from the same build, one with the operations
sent through the tables' primary (`--via 0`) and one through a server that is not
(`--via 2`: gamma holds no replica of the 1- and 2-replica tables and a non-primary
replica of the 3-replica one). Both should use the same `--clients`.

    .venv/bin/python tests/perf/cluster_cost.py --ops 4000 --clients 8 > direct.txt
    .venv/bin/python tests/perf/cluster_cost.py --ops 4000 --clients 8 --via 2 > routed.txt
    .venv/bin/python tests/perf/scaling_estimate.py direct.txt routed.txt [--cores 2]

Model (docs/scaling.md explains it and its limits): a cluster of N servers with
`--cores` cores each, one table sharded over all of them with R replicas per shard
(R = min(replicas, N)), keys uniform, clients spread evenly over the servers, every
server's CPU the bottleneck. An operation entering at a server costs the direct cost
(at R replicas) when that server is the shard's primary (or, for `outdated` reads, any
replica of it), plus the measured routing cost otherwise, with the probabilities 1/N,
(R-1)/N and (N-R)/N. Then
throughput(N) = N * cores / (expected CPU seconds per operation).
"""
import argparse
import re
import sys

OPS = ("read single", "read majority", "read outdated", "update hard")
SIZES = (1, 2, 4, 8, 16)


def parse(path):
    """{(replicas, operation): CPU µs per operation} from a cluster_cost.py output."""
    costs = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"r=(\d)\s+(\w+ \w+)\s+([\d.]+)\s", line)
            if m:
                costs[(int(m.group(1)), m.group(2))] = float(m.group(3))
    missing = [(r, op) for r in (1, 2, 3) for op in OPS if (r, op) not in costs]
    if missing:
        sys.exit("%s lacks %s" % (path, missing))
    return costs


def cost(direct, routed, op, n, replicas):
    """Expected cluster CPU µs of one `op` on `n` servers with `replicas` per shard: the
    direct cost at that replica count plus, when the entry server is not the primary,
    the routing measured for that case (through gamma: the 1- and 2-replica tables are
    entered at a server with no replica, the 3-replica one at a non-primary replica)."""
    r = min(replicas, n)
    other_replica, none = (r - 1) / n, (n - r) / n
    hop_none = sum(routed[(k, op)] - direct[(k, op)] for k in (1, 2)) / 2
    hop_replica = routed[(3, op)] - direct[(3, op)]
    if op == "read outdated":
        hop_replica = 0  # any replica answers from its own copy
    return direct[(r, op)] + other_replica * hop_replica + none * hop_none


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("direct")
    ap.add_argument("routed")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--replicas", default="2,3")
    args = ap.parse_args()
    direct, routed = parse(args.direct), parse(args.routed)
    print("%-10s %-14s" % ("replicas", "workload") + "".join("%10s" % ("N=%d" % n)
                                                             for n in SIZES))
    for replicas in (int(x) for x in args.replicas.split(",")):
        rows = [(op, lambda n, op=op: cost(direct, routed, op, n, replicas)) for op in OPS[:3]]
        # YCSB A: half reads (`single`, RethinkDB's default), half updates.
        rows.append(("YCSB A", lambda n: (cost(direct, routed, "read single", n, replicas)
                                          + cost(direct, routed, "update hard", n,
                                                 replicas)) / 2))
        for name, f in rows:
            print("%-10d %-14s" % (replicas, name) + "".join(
                "%10.0f" % (n * args.cores * 1e6 / f(n)) for n in SIZES))


if __name__ == "__main__":
    sys.exit(main())
