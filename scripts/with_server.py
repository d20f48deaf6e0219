"""Runs a command against a scratch Ponder server: starts the server on a free port with
a temporary data directory, substitutes `{port}` in the command, and stops the server.

Usage: with_server.py PONDER_BINARY -- COMMAND [ARGS...]
"""
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


def main():
    binary = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([binary, "serve", "--directory", data, "--driver-port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            rc = subprocess.call([c.replace("{port}", str(port)) for c in cmd])
            if server.poll() is not None:
                print("the server died", file=sys.stderr)
                return 1
            return rc
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
