"""Resharding a replicated table, measured on real processes (by hand; #13).

Three `ponder` servers on loopback (as `failover.py` starts them). A table of 3
replicas and one shard gets `--docs` documents of about 220 B; it is then resharded
1 -> 2 -> 4 -> 1 (`reconfigure(shards=N)`), each timed from the request to every
replica ready, and the documents are counted through every server afterwards:

    .venv/bin/python tests/perf/cluster_reshard.py --docs 20000 [--binary B]
"""
import os
import sys
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import arguments, three_servers  # noqa: E402


def main():
    args = arguments(docs=(int, 20000))
    with three_servers(args.binary, "reshard") as procs:
        conn = procs[0].conn
        t = r.db("test").table("t")
        r.db("test").table_create("t", replicas=3, shards=1).run(conn)
        t.wait(timeout=30).run(conn)
        for i in range(0, args.docs, 1000):
            docs = [{"id": j, "pad": "x" * 200} for j in range(i, min(args.docs, i + 1000))]
            res = t.insert(docs).run(conn)
            assert res["inserted"] == len(docs), res
        for shards in (2, 4, 1):
            began = time.monotonic()
            res = t.reconfigure(shards=shards, replicas=3).run(conn)
            assert res["reconfigured"] == 1, res
            t.wait(wait_for="all_replicas_ready", timeout=300).run(conn)
            took = time.monotonic() - began
            print("1 table, %d documents, resharded to %d shards in %.2f s (%.0f docs/s)" % (
                args.docs, shards, took, args.docs / took), flush=True)
        for p in procs:
            n = r.db("test").table("t", read_mode="majority").count().run(p.conn)
            assert n == args.docs, (p.name, n)


if __name__ == "__main__":
    sys.exit(main())
