"""Runs a command against a scratch Ponder server: starts the server on a free port with
a temporary data directory, substitutes `{port}` in the command, and stops the server.

Usage: with_server.py PONDER_BINARY -- COMMAND [ARGS...]

`scratch_server` is also imported by conformance.py.
"""
import contextlib
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


@contextlib.contextmanager
def scratch_server(binary):
    """Yields (port, process) of a server listening on loopback; kills it afterwards."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([binary, "serve", "--directory", data, "--driver-port", str(port),
                                   "--http-port", str(free_port())],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            yield port, server
        finally:
            server.kill()
            server.wait()


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
