"""Connection load (issue: no client can take the server down), a measurement run by
hand, not a timed test: while N idle authenticated connections are held open, others
churn (connect, query, close), slow readers pipeline large results without reading,
slow writers trickle frames a byte at a time and others announce oversized frames, an
ordinary client's `get` latency is compared with its unloaded value, and the server's
memory is sampled.

    PONDER_BIN=target/release/ponder python tests/perf/connection_load.py \
        --idle 10000 --seconds 60

Prints the unloaded and loaded p50/p99 of the ordinary client, how many connections of
each kind the server held, peak server RSS and CPU. Every loop is bounded by
`--seconds`.
"""
import argparse
import asyncio
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from rethinkdb.handshake import HandshakeV1_0

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import Server  # noqa: E402
from reqlwire import RawConn, rss_kib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from query_cpu import cpu_seconds  # noqa: E402

START = 1


async def handshake(port):
    """An authenticated (admin, no password) V1_0 connection on asyncio streams."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    hs = HandshakeV1_0(json.JSONDecoder(), json.JSONEncoder(), "127.0.0.1", port, "admin", "")
    response = None
    while True:
        request = hs.next_message(response)
        if request is None:
            break
        if request != "":
            writer.write(request)
            await writer.drain()
        response = (await reader.readuntil(b"\0"))[:-1]
    return reader, writer


def frame(token, query):
    body = json.dumps(query).encode()
    return struct.pack("<QL", token, len(body)) + body


async def read_frame(reader):
    header = await reader.readexactly(12)
    token, n = struct.unpack("<QL", header)
    return token, json.loads(await reader.readexactly(n))


class Load:
    def __init__(self, port, deadline):
        self.port = port
        self.deadline = deadline
        self.counts = {"idle": 0, "idle_failed": 0, "churn": 0, "churn_failed": 0,
                       "slow_readers": 0, "slow_writers": 0, "oversized_refused": 0}
        self.held = []

    async def idle(self, n, parallel=200):
        sem = asyncio.Semaphore(parallel)

        async def one():
            async with sem:
                if time.time() > self.deadline:
                    return
                try:
                    self.held.append(await handshake(self.port))
                    self.counts["idle"] += 1
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    self.counts["idle_failed"] += 1
        await asyncio.gather(*(one() for _ in range(n)))

    async def churn(self):
        while time.time() < self.deadline:
            try:
                reader, writer = await handshake(self.port)
                writer.write(frame(1, [START, [24, [1, 2]]]))
                await writer.drain()
                await read_frame(reader)
                writer.close()
                self.counts["churn"] += 1
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.counts["churn_failed"] += 1
                await asyncio.sleep(0.05)

    async def slow_reader(self):
        """Pipelines big results and never reads them."""
        try:
            reader, writer = await handshake(self.port)
        except (OSError, asyncio.IncompleteReadError):
            return
        self.counts["slow_readers"] += 1
        big = [173, [100000]]  # r.range(100000): a long stream, first batch as large as allowed
        for token in range(1, 33):
            writer.write(frame(token, [START, big, {"max_batch_rows": 100000}]))
        try:
            await writer.drain()
        except OSError:
            return
        while time.time() < self.deadline:
            await asyncio.sleep(0.5)
        writer.close()

    async def slow_writer(self):
        """A frame trickled one byte every 200 ms."""
        try:
            reader, writer = await handshake(self.port)
        except (OSError, asyncio.IncompleteReadError):
            return
        self.counts["slow_writers"] += 1
        data = frame(1, [START, [24, [1, 2]]])
        for b in data:
            if time.time() > self.deadline:
                break
            try:
                writer.write(bytes([b]))
                await writer.drain()
            except OSError:
                return
            await asyncio.sleep(0.2)
        writer.close()

    async def oversized(self):
        while time.time() < self.deadline:
            try:
                reader, writer = await handshake(self.port)
                writer.write(struct.pack("<QL", 1, 0xFFFFFFF0))
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(65536), 5)
                except asyncio.TimeoutError:
                    pass
                writer.close()
                self.counts["oversized_refused"] += 1
            except (OSError, asyncio.IncompleteReadError):
                pass
            await asyncio.sleep(0.2)


def ordinary(port, seconds, out):
    """`get` round trips on one connection for `seconds`; latencies in ms into `out`."""
    c = RawConn(port)
    try:
        end = time.time() + seconds
        token = 0
        while time.time() < end:
            token += 1
            t = time.perf_counter()
            c.query(token, [16, [[15, [[14, ["bench"]], "t"]], 1]])
            out.append((time.perf_counter() - t) * 1000)
    finally:
        c.close()


def generate(a):
    """The load process: prints its counts as JSON when `--seconds` are over."""
    load = Load(a.load_port, time.time() + a.seconds)

    async def run():
        tasks = [asyncio.create_task(load.idle(a.idle))]
        tasks += [asyncio.create_task(load.churn()) for _ in range(4)]
        tasks += [asyncio.create_task(load.slow_reader()) for _ in range(a.slow)]
        tasks += [asyncio.create_task(load.slow_writer()) for _ in range(a.slow)]
        tasks += [asyncio.create_task(load.oversized()) for _ in range(2)]
        await asyncio.gather(*tasks)
    asyncio.run(run())
    print(json.dumps(load.counts))


def server_connections(pid):
    """Open TCP sockets of the server process (from /proc)."""
    fd = "/proc/%d/fd" % pid
    n = 0
    for f in os.listdir(fd):
        try:
            if os.readlink(os.path.join(fd, f)).startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--slow", type=int, default=50, help="slow readers and slow writers each")
    ap.add_argument("--load-port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.load_port:
        return generate(a)
    with tempfile.TemporaryDirectory() as d:
        server = Server(d, extra=["--max-connections", str(a.idle + 2 * a.slow + 500),
                                  "--no-http-admin"]).start()
        try:
            c = RawConn(server.port)
            c.query(1, [57, ["bench"]])
            c.query(2, [60, [[14, ["bench"]], "t"]])
            c.query(3, [56, [[15, [[14, ["bench"]], "t"]], {"id": 1, "v": "x"}]])
            c.close()
            base = []
            ordinary(server.port, 10, base)
            rss0 = rss_kib(server.proc.pid)
            cpu0 = cpu_seconds(server.proc.pid)
            loaded = []
            peak = [rss0]
            stop = threading.Event()

            def sample():
                while not stop.is_set():
                    peak[0] = max(peak[0], rss_kib(server.proc.pid))
                    time.sleep(0.5)
            sampler = threading.Thread(target=sample)
            sampler.start()
            deadline = time.time() + a.seconds
            # The load runs in a niced process of its own: on a small machine it shares
            # the cores with the server and this client, and what is measured is the
            # server's fairness, not the load generator's CPU.
            gen = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--load-port", str(server.port),
                 "--idle", str(a.idle), "--seconds", str(a.seconds), "--slow", str(a.slow)],
                stdout=subprocess.PIPE, preexec_fn=lambda: os.nice(19))
            # Measure once the idle connections are (mostly) open.
            time.sleep(min(a.seconds / 2, 30))
            held_at_measure = server_connections(server.proc.pid)
            ordinary(server.port, min(10, max(1, deadline - time.time() - 1)), loaded)
            counts = json.loads(gen.communicate(timeout=a.seconds + 120)[0] or b"{}")
            stop.set()
            sampler.join()
            cpu = cpu_seconds(server.proc.pid) - cpu0
            alive = server.proc.poll() is None
            print(json.dumps({
                "idle_target": a.idle,
                "server_sockets_when_measured": held_at_measure,
                "counts": counts,
                "unloaded_ms": {"n": len(base), "p50": round(statistics.median(base), 3),
                                "p99": round(pct(base, 0.99), 3)},
                "loaded_ms": {"n": len(loaded), "p50": round(statistics.median(loaded), 3),
                              "p99": round(pct(loaded, 0.99), 3)},
                "p99_ratio": round(pct(loaded, 0.99) / pct(base, 0.99), 2),
                "server_rss_mib": {"before": rss0 // 1024, "peak": peak[0] // 1024},
                "server_cpu_s": round(cpu, 1),
                "server_alive": alive,
            }, indent=2))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
