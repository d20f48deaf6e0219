#!/usr/bin/env bash
# Validates ponder-iobench against fio on the same file in one run.
#
# Four workloads, each run by both tools back to back for RUNTIME seconds:
#   1. random 4 KiB reads, O_DIRECT, pread, one in flight
#   2. sequential 1 MiB reads through the page cache (cache dropped first)
#   3. random 4 KiB writes with fdatasync after each write
#   4. random 4 KiB 70% reads / 30% writes, O_DIRECT, io_uring, 16 in flight
# The tools alternate (ABBA order over ROUNDS rounds); each round's pair ran
# back to back under the same conditions, so the verdict uses the median of the
# per-round ratios (the table also shows each tool's median rate), because a
# shared machine's disk drifts from second to second.
# Prints ops/s and MB/s (10^6 bytes) of both tools and their ratio, flagging
# differences over 10%. Exits 1 if any is flagged.
#
# Environment: IOBENCH_DIR (default /tmp; must be a disk file system, not
# tmpfs, for O_DIRECT), SIZE (default 1g), RUNTIME (seconds per run,
# default 3), ROUNDS (alternating runs per tool and workload, median taken;
# default 9). On a shared virtual disk, fdatasync rates swing 5x from one
# second to the next: many short alternating runs compare the tools under the
# same conditions far better than one long run each.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
SIZE="${SIZE:-1g}"
RUNTIME="${RUNTIME:-3}"
ROUNDS="${ROUNDS:-9}"
DIR="${IOBENCH_DIR:-/tmp}"

if ! command -v fio >/dev/null 2>&1; then
    echo "fio is missing: installing it" >&2
    apt-get update >/dev/null && apt-get install -y fio >/dev/null
fi
command -v python3 >/dev/null 2>&1 || { echo "python3 is needed to read the JSON reports" >&2; exit 2; }

if [ "$(stat -f -c %T "$DIR")" = "tmpfs" ]; then
    DIR="$ROOT/target"
    echo "IOBENCH_DIR is a tmpfs; using $DIR instead (O_DIRECT needs a disk)" >&2
fi

(cd "$ROOT" && cargo build --release -p iobench >&2)
BIN="$ROOT/target/release/ponder-iobench"
WORK="$(mktemp -d "$DIR/iobench-compare.XXXXXX")"
FILE="$WORK/data"
trap 'rm -rf "$WORK"' EXIT

"$BIN" --size "$SIZE" --prepare-only "$FILE"
sync
sleep "${SETTLE:-5}" # let the disk finish writing the fill back before measuring
SIZE_BYTES="$(stat -c %s "$FILE")"
echo "fio $(fio --version | sed 's/^fio-//'), file $FILE ($SIZE_BYTES bytes), ${RUNTIME}s per run, $ROUNDS round(s)" >&2

# name | ponder-iobench workload | fio options
TESTS=(
    "randread-4k-direct|bs=4k direct=1 engine=pread|--rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1"
    "seqread-1m|pattern=seq bs=1m engine=pread|--rw=read --bs=1m --direct=0 --ioengine=psync --iodepth=1"
    "randwrite-4k-fdatasync|op=write bs=4k sync=fdatasync:1 engine=pwrite|--rw=randwrite --bs=4k --direct=0 --fdatasync=1 --ioengine=psync --iodepth=1"
    "randrw-70-30-uring-qd16|op=mix:70 bs=4k direct=1 engine=uring qd=16|--rw=randrw --rwmixread=70 --bs=4k --direct=1 --ioengine=io_uring --iodepth=16"
)

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
for t in "${TESTS[@]}"; do
    IFS='|' read -r name ours theirs <<<"$t"
    for round in $(seq 1 "$ROUNDS"); do
        run_ours() { "$BIN" --json --destructive "$FILE" "name=$name $ours duration=${RUNTIME}s" >"$WORK/ours.json"; }
        # shellcheck disable=SC2086 # the fio options are meant to split
        run_fio() {
            fio --name="$name" --filename="$FILE" --size="$SIZE_BYTES" $theirs \
                --time_based --runtime="$RUNTIME" --output-format=json >"$WORK/fio.json"
        }
        if [ $((round % 2)) -eq 1 ]; then run_ours; run_fio; else run_fio; run_ours; fi
        python3 - "$WORK/ours.json" "$WORK/fio.json" "$name" >>"$RESULTS" <<'EOF'
import json, sys
ours = json.load(open(sys.argv[1]))["workloads"][0]["total"]
job = json.load(open(sys.argv[2]))["jobs"][0]
fio_ops = job["read"]["iops"] + job["write"]["iops"]
fio_mb = (job["read"]["bw_bytes"] + job["write"]["bw_bytes"]) / 1e6
print(f'{sys.argv[3]}\t{ours["ops_per_sec"]}\t{ours["mb_per_sec"]}\t{fio_ops}\t{fio_mb}')
EOF
    done
done

python3 - "$RESULTS" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, *vals = line.split("\t")
    rows.setdefault(name, []).append([float(v) for v in vals])
flagged = 0
def quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]
print(f'{"workload":<26}{"iobench ops/s":>14}{"fio ops/s":>12}{"ratio":>7}{"iobench MB/s":>14}{"fio MB/s":>10}{"ratio":>7}{"ratio IQR":>13}  verdict')
for name, runs in rows.items():
    o_ops, o_mb, f_ops, f_mb = (statistics.median(r[i] for r in runs) for i in range(4))
    ratios = [r[0] / r[2] if r[2] else float("inf") for r in runs]
    r_ops = statistics.median(ratios)
    r_mb = statistics.median(r[1] / r[3] if r[3] else float("inf") for r in runs)
    lo, hi = quartiles(ratios)
    bad = abs(r_ops - 1) > 0.10 or abs(r_mb - 1) > 0.10
    flagged += bad
    print(f'{name:<26}{o_ops:>14.1f}{f_ops:>12.1f}{r_ops:>7.3f}{o_mb:>14.2f}{f_mb:>10.2f}{r_mb:>7.3f}{f"{lo:.2f}-{hi:.2f}":>13}  {"DIFFERS >10%" if bad else "ok"}')
print("\nratio = median over rounds of iobench/fio, each round's two runs back to back;")
print("ratio IQR = its interquartile range: wide means the disk itself drifted during the run")
print("fio's own round-to-round spread (max/min ops/s): " + ", ".join(
    f'{name} {max(r[2] for r in runs) / max(min(r[2] for r in runs), 1e-9):.1f}x' for name, runs in rows.items()))
print("ops/s of each round, iobench/fio (the tools alternate, ABBA):")
for name, runs in rows.items():
    print(f'  {name:<24}' + "  ".join(f'{r[0]:.0f}/{r[2]:.0f}' for r in runs))
sys.exit(1 if flagged else 0)
EOF
