"""Fixtures for end-to-end tests: a scratch Ponder server per test module, reached
through the official RethinkDB Python driver.

`PONDER_TEST_CLUSTER=3` makes the `server` fixture a cluster of three `ponder`
processes joined with `--join` (clients connect to the first; tables created with the
default one replica are placed across the three, so reads and writes are routed).
Modules about one process itself are marked `single_server(reason)` and skipped in that
mode; `make_server` always starts single servers (docs/clustering.md, "The test suites
against a cluster")."""
import os
import socket
import subprocess
import tempfile
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("PONDER_BIN", os.path.join(ROOT, "target", "release", "ponder"))
# How many servers the `server` fixture starts (1: a single server, as always).
CLUSTER_SIZE = int(os.environ.get("PONDER_TEST_CLUSTER") or "1")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "single_server(reason): the test is about one process itself; "
        "skipped when PONDER_TEST_CLUSTER starts a cluster")


def pytest_collection_modifyitems(config, items):
    if CLUSTER_SIZE <= 1:
        return
    for item in items:
        mark = item.get_closest_marker("single_server")
        names = getattr(item, "fixturenames", ())
        if mark is None and "make_server" in names and "server" not in names:
            reason = "starts its own single servers (make_server)"
        elif mark is not None:
            reason = mark.args[0] if mark.args else mark.kwargs.get("reason", "")
        else:
            continue
        item.add_marker(pytest.mark.skip(
            reason="single server only (PONDER_TEST_CLUSTER=%d): %s" % (CLUSTER_SIZE, reason)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A ponder process on a private port and data directory."""

    def __init__(self, directory, extra=(), log=None):
        self.directory = directory
        # Where stderr goes: a pipe read when the process exits early, or a file (a
        # cluster's servers log more than a pipe nobody reads can hold).
        self.log = log
        self.port = free_port()
        # Every server gets its own HTTP admin port (the default, 8080, may be taken).
        self.http_port = free_port()
        self.extra = list(extra)
        self.proc = None

    def start(self):
        log = subprocess.PIPE if self.log is None else open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(
                [BINARY, "serve", "--directory", self.directory, "--driver-port",
                 str(self.port), "--http-port", str(self.http_port)]
                + self.extra,
                stdout=subprocess.DEVNULL, stderr=log)
        finally:
            if self.log is not None:
                log.close()  # the child has its own copy
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ponder exited: " + self.stderr_text())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("ponder did not start listening")

    def stderr_text(self):
        if self.log is None:
            return self.proc.stderr.read().decode()
        with open(self.log, "rb") as f:
            return f.read()[-4000:].decode(errors="replace")

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


class Cluster:
    """`size` ponder processes on loopback, each with its own driver, cluster and HTTP
    ports, the others joining the first. It stands in for a `Server`: `port`,
    `http_port`, `proc`, `directory` and `connect` are the first server's (the one
    clients talk to); `servers` lists them all."""

    def __init__(self, directory, size):
        self.servers = []
        for i in range(size):
            d = os.path.join(directory, "s%d" % i)
            os.mkdir(d)
            cluster_port = free_port()
            args = ["--server-name", "s%d" % i, "--cluster-port", str(cluster_port)]
            if i > 0:
                args += ["--join", "127.0.0.1:%d" % self.servers[0].cluster_port]
            s = Server(d, extra=args, log=os.path.join(directory, "s%d.log" % i))
            s.cluster_port = cluster_port
            self.servers.append(s)
        first = self.servers[0]
        self.directory, self.port, self.http_port = first.directory, first.port, first.http_port

    @property
    def proc(self):
        return self.servers[0].proc

    def start(self):
        try:
            for s in self.servers:
                s.start()
            self.wait_ready()
        except BaseException:
            self.kill9()
            raise
        return self

    def wait_ready(self, timeout=60):
        """Until every server sees every other, has the founder's catalog (a joiner
        knows no users before the catalog's leader has sent it the catalog) and shows no
        issue (a `non_transitive_error` lasts until every server's view has spread)."""
        deadline = time.time() + timeout
        pending = list(self.servers)
        while pending:
            s = pending[0]
            try:
                with s.connect(timeout=5) as c:
                    names = r.db("rethinkdb").table("server_config").count().run(c)
                    if (names == len(self.servers) and "test" in r.db_list().run(c)
                            and r.db("rethinkdb").table("current_issues").is_empty().run(c)):
                        pending.pop(0)
                        continue
            except ReqlError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the cluster did not form; the last server's log ends:\n"
                                   + s.stderr_text())
            time.sleep(0.1)

    def kill9(self):
        for s in self.servers:
            if s.proc is not None:
                s.kill9()

    def stop(self):
        for s in self.servers:
            s.stop()

    def connect(self, **kw):
        return self.servers[0].connect(**kw)


def start_scratch(directory):
    """The `server` fixture's server: one process, or a cluster with PONDER_TEST_CLUSTER."""
    if CLUSTER_SIZE > 1:
        return Cluster(directory, CLUSTER_SIZE).start()
    return Server(directory).start()


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as d:
        s = start_scratch(d)
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
