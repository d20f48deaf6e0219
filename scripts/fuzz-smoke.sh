#!/usr/bin/env bash
# Builds the cargo-fuzz targets (fuzz/, nightly, libFuzzer) and runs each for a while,
# failing on the first crash, panic or timeout. Installs cargo-fuzz (pinned) when it is
# missing. Usage: scripts/fuzz-smoke.sh [seconds per target (20)] [targets...]
# The long run by hand is the same with more seconds; docs/fuzzing.md has the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_EACH=${1:-20}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(frame query json keys eval)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if ! cargo +nightly fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo +nightly install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# No sanitizer: the code under test is safe Rust, and without ASan the build is
# shorter and each execution faster. Release with debug assertions and overflow
# checks, into the workspace's target directory.
FLAGS=(-O -a -s none --target-dir "$PWD/target/fuzz")
cargo +nightly fuzz build "${FLAGS[@]}"

for t in "${TARGETS[@]}"; do
  echo "== fuzz $t for ${SECONDS_EACH}s"
  # A scratch corpus seeded from the committed one, so a run never rewrites it
  # (`cargo fuzz cmin` updates fuzz/corpus by hand).
  scratch=$(mktemp -d)
  cp fuzz/corpus/"$t"/* "$scratch"/
  log="$scratch.log"
  status=0
  cargo +nightly fuzz run "${FLAGS[@]}" "$t" "$scratch" -- \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
  fi
  rm -f "$log"
  rm -rf "$scratch"
  if [ "$status" -ne 0 ]; then
    echo "error: fuzz target $t failed (see fuzz/artifacts/$t/)" >&2
    exit 1
  fi
done
