"""Catch-up of a returning replica, measured on real processes (by hand; issue #13).

Three `ponder` servers on loopback (as `failover.py` starts them), `test.catchup` with
one shard of three replicas; one replica that is not the primary is stopped with
SIGKILL, `--docs` documents are inserted through the primary (batches of 500) while it
is down, then it is restarted and the time until its own copy holds every document
(`read_mode='outdated'` count through it) gives the catch-up rate.

    .venv/bin/python tests/perf/catchup.py --docs 100000 [--binary target/release/ponder]
"""
import os
import sys
import time

from rethinkdb import r

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover import arguments, replicated_table, three_servers  # noqa: E402


def main():
    args = arguments(docs=(int, 100000))
    with three_servers(args.binary, "catchup") as procs:
        replicated_table(procs, "catchup")
        a = procs[0]
        by_name = {p.name: p for p in procs}
        status = r.db("test").table("catchup").status().run(a.conn)
        primary = by_name[status["shards"][0]["primary_replicas"][0]]
        lagging = next(p for p in procs if p is not primary)
        lagging.kill()
        began = time.monotonic()
        doc = {"field%d" % i: "x" * 10 for i in range(10)}
        for start in range(0, args.docs, 500):
            batch = [dict(doc, id=i) for i in range(start, min(start + 500, args.docs))]
            r.db("test").table("catchup").insert(batch).run(primary.conn)
        wrote = time.monotonic() - began
        print("wrote %d documents (%d bytes of JSON each) in %.1f s with %s down"
              % (args.docs, len(str(doc)) + 10, wrote, lagging.name), flush=True)
        restarted = time.monotonic()
        lagging.start()
        last = -1
        while True:
            n = r.db("test").table("catchup", read_mode="outdated").count().run(lagging.conn)
            if n != last:
                last = n
            if n >= args.docs:
                break
            if time.monotonic() - restarted > 600:
                raise RuntimeError("not caught up within 600 s (%d documents)" % n)
            time.sleep(0.05)
        took = time.monotonic() - restarted
        print("%s caught up on %d documents %.2f s after its restart: %.0f documents/s"
              % (lagging.name, args.docs, took, args.docs / took))


if __name__ == "__main__":
    sys.exit(main())
