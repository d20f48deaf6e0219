"""Starts a scratch Ponder server and runs RethinkDB's ReQL conformance suite against it.

Usage: conformance.py SUITE_DIR MIN_PASS [extra runner args...]
Exits non-zero when fewer than MIN_PASS tests pass or the server dies.
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
    suite, floor = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    binary = os.environ.get("PONDER_BIN", "target/release/ponder")
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            [binary, "serve", "--directory", data, "--driver-port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            venv_py = sys.executable
            cmd = [venv_py, os.path.join(suite, "run.py"), "--port", str(port),
                   "--min-pass", floor, "--max-failures", "0", "--total-timeout", "1500"] + extra
            rc = subprocess.call(cmd)
            if server.poll() is not None:
                print("the server died during the suite", file=sys.stderr)
                return 1
            return rc
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
