"""`start_ponder`: a `ponder` server inside one node of a `Net`, reachable from the test
process at the node's address. It knows nothing about clustering: flags such as
`--join` are passed through `extra`, so cluster tests decide how servers find each
other. Each node has its own address, so every server can use the same ports.

Invariant: the process is registered with the `Net`, so `Net.close()` kills it even when
the test fails before `stop()`.
"""
import os
import socket
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER_PORT = 28015
CLUSTER_PORT = 29015
HTTP_PORT = 8080


def ponder_binary():
    """PONDER_BIN, as in tests/conftest.py (default: target/release/ponder)."""
    return os.environ.get("PONDER_BIN", os.path.join(ROOT, "target", "release", "ponder"))


class NsServer:
    """A ponder process in node `i` of `net`: `host`, `port`, `cluster_port`, `proc`."""

    def __init__(self, net, i, directory, extra=(), name=None):
        self.net, self.i, self.directory = net, i, directory
        self.host = net.addr(i)
        self.port, self.cluster_port, self.http_port = DRIVER_PORT, CLUSTER_PORT, HTTP_PORT
        self.extra = list(extra)
        self.name = name or "node%d" % i
        self.proc = None
        self.log = os.path.join(directory, "ponder.log")

    def start(self, timeout=30):
        os.makedirs(self.directory, exist_ok=True)
        argv = [ponder_binary(), "serve", "--directory", os.path.join(self.directory, "data"),
                "--bind", self.host, "--driver-port", str(self.port),
                "--http-port", str(self.http_port), "--cluster-port", str(self.cluster_port),
                "--server-name", self.name] + self.extra
        with open(self.log, "ab") as log:
            self.proc = self.net.spawn(self.i, argv, stdout=log, stderr=log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ponder exited (%s): %s" % (self.proc.returncode, self.tail()))
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("ponder did not start listening: " + self.tail())

    def tail(self, n=2000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def connect(self, **kw):
        from rethinkdb import r  # here, so that the rest of the package needs no driver

        return r.connect(host=self.host, port=self.port, **kw)

    def kill9(self):
        self.net.kill9(self.proc)

    def pause(self):
        self.net.pause(self.proc)

    def resume(self):
        self.net.resume(self.proc)

    def stop(self, timeout=10):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except Exception:
                self.kill9()


def start_ponder(net, i, directory, extra=(), name=None):
    """Starts ponder in node i (data and log under `directory`) and waits until its
    driver port accepts connections from the test process."""
    return NsServer(net, i, directory, extra=extra, name=name).start()
