"""Fixtures for end-to-end tests: a scratch Ponder server per test module, reached
through the official RethinkDB Python driver."""
import os
import socket
import subprocess
import tempfile
import time

import pytest
from rethinkdb import r

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("PONDER_BIN", os.path.join(ROOT, "target", "release", "ponder"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A ponder process on a private port and data directory."""

    def __init__(self, directory, extra=()):
        self.directory = directory
        self.port = free_port()
        # Every server gets its own HTTP admin port (the default, 8080, may be taken).
        self.http_port = free_port()
        self.extra = list(extra)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--directory", self.directory, "--driver-port", str(self.port),
             "--http-port", str(self.http_port)]
            + self.extra,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ponder exited: " + self.proc.stderr.read().decode())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("ponder did not start listening")

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def connect(self, **kw):
        return r.connect("127.0.0.1", self.port, **kw)


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as d:
        s = Server(d).start()
        yield s
        s.stop()


@pytest.fixture
def conn(server):
    c = server.connect()
    yield c
    c.close()


@pytest.fixture
def make_server():
    """A factory for private servers (each in its own temporary directory unless one
    is given), all stopped when the test ends. `make_server(directory=d, extra=[...])`."""
    started = []
    dirs = []

    def make(directory=None, extra=()):
        if directory is None:
            dirs.append(tempfile.TemporaryDirectory())
            directory = dirs[-1].name
        s = Server(directory, extra=extra).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
    for d in dirs:
        d.cleanup()


def self_signed_cert(directory):
    """A throw-away key and self-signed certificate for localhost/127.0.0.1 in
    `directory`: (key path, cert path)."""
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
         "-out", cert, "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True)
    return key, cert


def assert_serving(server, **kw):
    """Fails unless `server` is alive and answers a fresh connection correctly."""
    assert server.proc.poll() is None, "ponder exited with %r" % server.proc.returncode
    c = server.connect(timeout=10, **kw)
    try:
        assert r.expr(20).add(22).run(c) == 42
        assert r.db_list().contains("test").run(c) is True
    finally:
        c.close()
