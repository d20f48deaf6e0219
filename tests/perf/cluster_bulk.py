"""Bulk inserts into replicated tables, measured on real processes (by hand; #13).

Three `ponder` servers on loopback (as `failover.py` starts them). Three tables of 3
replicas: one shard written through its primary, one shard written through a follower
(routed), and two shards. `--docs` documents of about 220 B go into each, in inserts of
`--batch`, one after another from one client:

    .venv/bin/python tests/perf/cluster_bulk.py --docs 6000 --batch 500 [--binary B]
"""
import os
import sys
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import arguments, three_servers  # noqa: E402


def main():
    args = arguments(docs=(int, 6000), batch=(int, 500))
    with three_servers(args.binary, "bulk") as procs:
        for name, shards, via in (("primary", 1, 0), ("routed", 1, 2), ("two_shards", 2, 0)):
            conn = procs[0].conn
            r.db("test").table_create(name, replicas=3, shards=shards).run(conn)
            r.db("test").table(name).wait(timeout=30).run(conn)
            through = procs[via]
            began = time.monotonic()
            for i in range(0, args.docs, args.batch):
                docs = [{"id": j, "pad": "x" * 200}
                        for j in range(i, min(args.docs, i + args.batch))]
                res = r.db("test").table(name).insert(docs).run(through.conn)
                assert res["inserted"] == len(docs), res
            took = time.monotonic() - began
            print("%-10s shards %d, through %-5s %8.0f docs/s" % (
                name, shards, through.name, args.docs / took), flush=True)


if __name__ == "__main__":
    sys.exit(main())
