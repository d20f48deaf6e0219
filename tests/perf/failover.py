"""Failover time of a replicated table, measured on real processes (by hand; issue #13).

Starts three `ponder` servers on loopback (the first alone, the others `--join` it),
creates `test.failover` with one shard of three replicas, and then, `--trials` times:
waits until the shard's configured primary leads (`table_status`), kills it with SIGKILL while a client writes
through another server in a loop, and records the time from the kill to the first
acknowledged write; then restarts the killed server and waits until every replica is
ready again. Prints each trial and the median and maximum.

    .venv/bin/python tests/perf/failover.py --trials 20 [--binary target/release/ponder]
"""
import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from rethinkdb import r
from rethinkdb.errors import ReqlError, ReqlDriverError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, binary, base, name, join=None):
        self.binary, self.name = binary, name
        self.dir = os.path.join(base, name)
        self.port, self.http, self.cluster = free_port(), free_port(), free_port()
        self.join = join

    def start(self):
        args = [self.binary, "serve", "-d", self.dir, "-n", self.name, "--bind", "127.0.0.1",
                "--driver-port", str(self.port), "--http-port", str(self.http),
                "--cluster-port", str(self.cluster)]
        if self.join:
            args += ["--join", "127.0.0.1:%d" % self.join.cluster]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                self.conn = r.connect("127.0.0.1", self.port, timeout=20)
                return self
            except (ReqlDriverError, OSError):
                time.sleep(0.1)
        raise RuntimeError("%s did not start" % self.name)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def primary(procs):
    """The shard's primary as every running server sees it (None while they differ)."""
    seen = set()
    for p in procs:
        if p.proc.poll() is None:
            try:
                st = r.db("test").table("failover").status().run(p.conn)
            except ReqlError:
                return None
            seen.add(tuple(st["shards"][0]["primary_replicas"]))
    return seen.pop()[0] if len(seen) == 1 and len(next(iter(seen))) == 1 else None


def settled_primary(procs, timeout=60):
    """The configured primary, once every server sees it lead (after a trial, the lead
    is handed back to it when it has come back)."""
    conn = next(p.conn for p in procs if p.proc.poll() is None)
    configured = r.db("test").table("failover").config().run(conn)["shards"][0]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if primary(procs) == configured["primary_replica"]:
            return configured["primary_replica"]
        time.sleep(0.2)
    raise RuntimeError("the configured primary did not lead again")


def arguments(**options):
    """The command line: `--binary` and `options` (name → (type, default))."""
    ap = argparse.ArgumentParser()
    for name, (kind, default) in options.items():
        ap.add_argument("--" + name, type=kind, default=default)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ponder"))
    return ap.parse_args()


@contextlib.contextmanager
def three_servers(binary, prefix):
    """alpha, then beta and gamma joining it, in a scratch directory; stopped after."""
    base = tempfile.mkdtemp(prefix=prefix)
    a = Proc(binary, base, "alpha").start()
    procs = [a, Proc(binary, base, "beta", a).start(), Proc(binary, base, "gamma", a).start()]
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(base, ignore_errors=True)


def replicated_table(procs, table, replicas=3):
    """`test.<table>` with `replicas` replicas, created through the first server once
    enough servers have met, and ready."""
    conn = procs[0].conn
    deadline = time.time() + 30
    while True:
        try:
            r.db("test").table_create(table, replicas=replicas).run(conn)
            break
        except ReqlError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)
    r.db("test").table(table).wait(timeout=30).run(conn)


def main():
    args = arguments(trials=(int, 20))
    with three_servers(args.binary, "failover") as procs:
        replicated_table(procs, "failover")
        by_name = {p.name: p for p in procs}
        times = []
        for trial in range(args.trials):
            victim = by_name[settled_primary(procs)]
            writer = next(p for p in procs if p is not victim)
            killed = time.monotonic()
            victim.kill()
            n = 0
            while True:
                began = time.monotonic()
                try:
                    r.db("test").table("failover").insert(
                        {"id": "k", "n": n}, conflict="replace").run(writer.conn)
                    break
                except ReqlError as e:
                    n += 1
                    if time.monotonic() - began > 1:
                        print("  a write failed after %.2f s: %s"
                              % (time.monotonic() - began, str(e).splitlines()[0]))
                    time.sleep(0.01)
                if time.monotonic() - killed > 60:
                    raise RuntimeError("no write within 60 s")
            took = time.monotonic() - killed
            times.append(took)
            print("trial %2d: killed %s, first write through %s after %.2f s"
                  % (trial + 1, victim.name, writer.name, took), flush=True)
            victim.start()
            r.db("test").table("failover").wait(timeout=60).run(writer.conn)
            for p in procs:
                p.conn = r.connect("127.0.0.1", p.port)
        print("failover over %d trials: median %.2f s, min %.2f s, max %.2f s"
              % (len(times), statistics.median(times), min(times), max(times)))


if __name__ == "__main__":
    sys.exit(main())
