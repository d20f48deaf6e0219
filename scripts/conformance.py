"""Starts a scratch Ponder server and runs RethinkDB's ReQL conformance suite against it.

Usage: conformance.py SUITE_DIR MIN_PASS [extra runner args...]
Exits non-zero when fewer than MIN_PASS tests pass or the server dies.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from with_server import scratch_server  # noqa: E402


def main():
    suite, floor = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    binary = os.environ.get("PONDER_BIN", "target/release/ponder")
    with scratch_server(binary) as (port, server):
        cmd = [sys.executable, os.path.join(suite, "run.py"), "--port", str(port),
               "--min-pass", floor, "--max-failures", "0", "--total-timeout", "1500"] + extra
        rc = subprocess.call(cmd)
        if server.poll() is not None:
            print("the server died during the suite", file=sys.stderr)
            return 1
        return rc


if __name__ == "__main__":
    sys.exit(main())
