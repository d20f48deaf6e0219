"""Runs a command against a scratch Ponder server: starts the server on a free port with
a temporary data directory, substitutes `{port}` in the command, and stops the server.

Usage: with_server.py PONDER_BINARY -- COMMAND [ARGS...]

`scratch_server` is also imported by conformance.py. With `PONDER_TEST_CLUSTER=3` in the
environment the scratch server is a cluster of three processes joined with `--join`
(the command talks to the first), as tests/conftest.py's `server` fixture does.
"""
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cluster_size():
    return int(os.environ.get("PONDER_TEST_CLUSTER") or "1")


def wait_listening(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)


def wait_cluster(ports, timeout=60):
    """Until every server sees the others, has the founder's catalog and shows no issue
    (as tests/conftest.py's `Cluster.wait_ready`)."""
    from rethinkdb import r  # the driver: only a cluster needs it
    from rethinkdb.errors import ReqlError
    deadline = time.time() + timeout
    for port in ports:
        while True:
            try:
                with r.connect("127.0.0.1", port, timeout=5) as c:
                    count = r.db("rethinkdb").table("server_config").count().run(c)
                    if (count == len(ports) and "test" in r.db_list().run(c)
                            and r.db("rethinkdb").table("current_issues").is_empty().run(c)):
                        break
            except ReqlError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the cluster did not form (server on port %d)" % port)
            time.sleep(0.1)


@contextlib.contextmanager
def scratch_server(binary):
    """Yields (port, process) of a server listening on loopback (with
    PONDER_TEST_CLUSTER=n: the first of n joined servers, all watched by the process's
    `poll`); kills it afterwards."""
    size = cluster_size()
    with tempfile.TemporaryDirectory() as data:
        servers, ports, cluster_ports = [], [], []
        try:
            for i in range(size):
                port = free_port()
                argv = [binary, "serve", "--directory", os.path.join(data, "s%d" % i),
                        "--driver-port", str(port), "--http-port", str(free_port())]
                if size > 1:
                    cluster_ports.append(free_port())
                    argv += ["--server-name", "s%d" % i, "--cluster-port", str(cluster_ports[-1])]
                    if i > 0:
                        argv += ["--join", "127.0.0.1:%d" % cluster_ports[0]]
                servers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
                ports.append(port)
                wait_listening(port)
            if size > 1:
                wait_cluster(ports)
            yield ports[0], Watched(servers)
        finally:
            for server in servers:
                server.kill()
                server.wait()


class Watched:
    """The scratch servers as one process: `poll()` is not None once any has exited."""

    def __init__(self, procs):
        self.procs = procs

    def poll(self):
        for p in self.procs:
            if p.poll() is not None:
                return p.poll()
        return None


def main():
    binary = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    with scratch_server(binary) as (port, server):
        rc = subprocess.call([c.replace("{port}", str(port)) for c in cmd])
        if server.poll() is not None:
            print("the server died", file=sys.stderr)
            return 1
        return rc


if __name__ == "__main__":
    sys.exit(main())
