#!/usr/bin/env bash
# Runs every test: Rust unit tests, the Python end-to-end tests through the official
# driver, and RethinkDB's ReQL conformance suite (when ../shared/reql-conformance exists),
# failing if the suite's pass count drops below the floor in .ci/conformance-floor.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q -r tests/requirements.txt

echo "== cargo test"
cargo test --release --workspace --quiet 2>&1 | tail -n 40

echo "== building the server (release)"
cargo build --release --quiet -p server
# test helper for tests/test_durability.py (writes a newer format version)
cargo build --release --quiet -p storage --example put_key

echo "== end-to-end tests (official Python driver)"
PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python -m pytest -q tests

echo "== ponder-bench smoke run against a scratch server"
cargo build --release --quiet -p bench
.venv/bin/python scripts/with_server.py "$PWD/target/release/ponder" -- \
  "$PWD/target/release/ponder-bench" smoke --no-progress --port '{port}'

SUITE=../shared/reql-conformance
if [ -f "$SUITE/run.py" ]; then
  echo "== ReQL conformance suite"
  FLOOR=$(cat .ci/conformance-floor)
  PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python scripts/conformance.py "$SUITE" "$FLOOR"
else
  echo "== ReQL conformance suite skipped: $SUITE not found"
fi
