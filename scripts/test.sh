#!/usr/bin/env bash
# Runs every test: Rust unit tests, the end-to-end tests through the official Python
# driver and the Node drivers (tests/js, needs node and npm), and RethinkDB's ReQL
# conformance suite (when ../shared/reql-conformance exists), failing if the suite's
# pass count drops below the floor in .ci/conformance-floor.
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

echo "== end-to-end tests (Node drivers: rethinkdb, rethinkdbdash, rethinkdb-ts, thinky)"
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found; the Node driver tests need Node.js 20+ and npm" >&2; exit 1; }
done
# Installed from the lock file, again only when the lock file changed since.
if ! cmp -s tests/js/package-lock.json tests/js/node_modules/.installed-lock.json; then
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error >/dev/null
  cp tests/js/package-lock.json tests/js/node_modules/.installed-lock.json
fi
PONDER_BIN="$PWD/target/release/ponder" node --test tests/js/

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
