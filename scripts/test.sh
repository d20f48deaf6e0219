#!/usr/bin/env bash
# Runs every test: Rust unit tests, the end-to-end tests through the official Python
# driver, the Node drivers (tests/js, needs node and npm) and the official Java driver
# (tests/java, needs a JDK 17+ and Maven), the web console's checks and its tests in
# Chromium (tests/console; chromium is installed with apt-get when missing), and
# RethinkDB's ReQL conformance suite (when ../shared/reql-conformance exists), failing
# if the suite's pass count drops below the floor in .ci/conformance-floor; then a short
# form of both against a 3-server cluster (floor: .ci/conformance-cluster-floor).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q -r tests/requirements.txt

echo "== cargo test ($(date +%T))"
cargo test --release --workspace --quiet 2>&1 | tail -n 40

echo "== building the server (release) ($(date +%T))"
cargo build --release --quiet -p server
# test helper for tests/test_durability.py (writes a newer format version)
cargo build --release --quiet -p storage --example put_key
# the linearizability checker for tests/test_cluster_lincheck.py
cargo build --release --quiet -p lincheck --bin ponder-lincheck

echo "== end-to-end tests (official Python driver) ($(date +%T))"
PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python -m pytest -q --durations=15 tests

echo "== end-to-end tests (Node drivers: rethinkdb, rethinkdbdash, rethinkdb-ts, thinky) ($(date +%T))"
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found; the Node driver tests need Node.js 20+ and npm" >&2; exit 1; }
done
# `npm ci` in $1 from its lock file, again only when the lock file changed since.
npm_ci() {
  if ! cmp -s "$1/package-lock.json" "$1/node_modules/.installed-lock.json"; then
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error >/dev/null \
      || { echo "error: npm ci in $1 failed" >&2; exit 1; }
    cp "$1/package-lock.json" "$1/node_modules/.installed-lock.json"
  fi
}
npm_ci tests/js
PONDER_BIN="$PWD/target/release/ponder" node --test tests/js/

echo "== end-to-end tests (official Java driver) ($(date +%T))"
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found; the Java driver tests need a JDK 17+ and Maven" >&2; exit 1; }
done
# Maven fetches the driver and JUnit into its local repository on the first run.
PONDER_BIN="$PWD/target/release/ponder" mvn -q -B -Dstyle.color=never -f tests/java/pom.xml test

echo "== web console: type check, and the committed build (web/dist) matches the sources ($(date +%T))"
npm_ci web
web/node_modules/.bin/tsc --noEmit -p web
FRESH=$(mktemp -d)
node web/build.mjs --outdir "$FRESH"
if ! diff -r web/dist "$FRESH" >/dev/null; then
  rm -rf "$FRESH"
  echo "error: web/dist is out of date with web/src: run 'npm run build --prefix web' and commit web/dist" >&2
  exit 1
fi
rm -rf "$FRESH"

echo "== web console in a real browser (playwright-core driving Chromium) ($(date +%T))"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "installing Debian's chromium for the console tests"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver; } >/dev/null \
    || { echo "error: could not install chromium (apt-get install chromium chromium-driver); set CHROMIUM to a Chromium binary" >&2; exit 1; }
  [ -x "$CHROMIUM" ] || { echo "error: $CHROMIUM not found after installing chromium" >&2; exit 1; }
fi
npm_ci tests/console
CHROMIUM="$CHROMIUM" PONDER_BIN="$PWD/target/release/ponder" node --test tests/console/

echo "== ponder-bench smoke run against a scratch server ($(date +%T))"
cargo build --release --quiet -p bench
.venv/bin/python scripts/with_server.py "$PWD/target/release/ponder" -- \
  "$PWD/target/release/ponder-bench" smoke --no-progress --port '{port}'

SUITE=../shared/reql-conformance
if [ -f "$SUITE/run.py" ]; then
  echo "== ReQL conformance suite ($(date +%T))"
  FLOOR=$(cat .ci/conformance-floor)
  PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python scripts/conformance.py "$SUITE" "$FLOOR"
else
  echo "== ReQL conformance suite skipped: $SUITE not found"
fi

# The short form of the suites against three joined servers (docs/clustering.md, "The
# test suites against a cluster"): tables land on servers the client does not talk to.
echo "== end-to-end tests against a 3-server cluster (short form) ($(date +%T))"
PONDER_TEST_CLUSTER=3 PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python -m pytest -q \
  tests/test_smoke.py tests/test_write_ops.py tests/test_cursors.py tests/test_indexes.py \
  tests/test_insert_many.py tests/test_point_reads.py
if [ -f "$SUITE/run.py" ]; then
  echo "== ReQL conformance files against a 3-server cluster (short form) ($(date +%T))"
  PONDER_TEST_CLUSTER=3 PONDER_BIN="$PWD/target/release/ponder" .venv/bin/python \
    scripts/conformance.py "$SUITE" "$(cat .ci/conformance-cluster-floor)" \
    --only 'sindex/api.yaml' 'regression/1023.yaml' 'mutation/*' 'selection.yaml'
fi
