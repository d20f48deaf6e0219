#!/usr/bin/env bash
# Stock YCSB (site.ycsb:core) through the RethinkDB Java driver binding against a
# scratch Ponder, then ponder-bench's YCSB A and C against the same server with the
# same records, connections and duration, printed side by side.
#
#   bench/ycsb/run.sh                       # workloads C and A, 100,000 records, 16 and 64 threads, 15 s
#   RECORDS=10000 DURATION=5 THREADS="16" WORKLOADS="c" bench/ycsb/run.sh
#
# Environment (defaults in brackets):
#   RECORDS [100000]        YCSB recordcount = ponder-bench --records
#   DURATION [15]           seconds per run phase (YCSB maxexecutiontime, ponder-bench --duration)
#   THREADS ["16 64"]       YCSB threadcount = ponder-bench --connections (one connection per thread)
#   WORKLOADS ["c a"]       YCSB workload letters (files in bench/ycsb/workloads/)
#   DURABILITY [hard]       rethinkdb.durability of YCSB's writes (ponder-bench writes hard)
#   READ_MODE [single]      rethinkdb.read_mode of YCSB's reads = ponder-bench --read-mode
#   LOAD_THREADS [64]       YCSB threads of the load phase
#   LOAD_DURABILITY [hard]  rethinkdb.durability of the load phase
#   SKIP_PONDER_BENCH [0]   1: YCSB only
#   RESULTS [bench/ycsb/target/results/<time>]  where the YCSB outputs and ponder-bench's JSON go
#   PONDER, PONDER_BENCH    binaries [target/release/ponder, target/release/ponder-bench]
#   JAVA_OPTS [-Djava.util.concurrent.ForkJoinPool.common.parallelism=2]
#       The driver parses every response in CompletableFuture.supplyAsync.  With 2 cores the
#       JDK sizes the common pool to 1, and CompletableFuture then starts a new thread per
#       async task, i.e. per query: YCSB C drops from ~20,000 to ~5,000 ops/s here.  A
#       parallelism of 2 or more gives the pool the JDK uses on any machine of 3+ cores.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-15}
THREADS=${THREADS:-"16 64"}
WORKLOADS=${WORKLOADS:-"c a"}
DURABILITY=${DURABILITY:-hard}
READ_MODE=${READ_MODE:-single}
LOAD_THREADS=${LOAD_THREADS:-64}
LOAD_DURABILITY=${LOAD_DURABILITY:-hard}
SKIP_PONDER_BENCH=${SKIP_PONDER_BENCH:-0}
RESULTS=${RESULTS:-$HERE/target/results/$(date +%Y%m%d-%H%M%S)}
PONDER=${PONDER:-$ROOT/target/release/ponder}
PONDER_BENCH=${PONDER_BENCH:-$ROOT/target/release/ponder-bench}
DB_CLASS=site.ycsb.db.rethinkdb.RethinkDBClient
JAVA_OPTS=${JAVA_OPTS:--Djava.util.concurrent.ForkJoinPool.common.parallelism=2}
WARMUP=5   # seconds left out of the "after warm-up" rate (each YCSB run is a fresh JVM)

say() { printf '\n== %s\n' "$*"; }

# --- build -------------------------------------------------------------------
say "building the YCSB binding (mvn -q package)"
(cd "$HERE" && mvn -q -B package)
CP="$HERE/target/ponder-ycsb.jar:$HERE/target/lib/*"

if [[ ! -x $PONDER ]]; then
  say "building ponder (cargo build --release -p server)"
  (cd "$ROOT" && cargo build --release -p server)
fi
if [[ $SKIP_PONDER_BENCH != 1 && ! -x $PONDER_BENCH ]]; then
  say "building ponder-bench (cargo build --release -p bench)"
  (cd "$ROOT" && cargo build --release -p bench)
fi

# --- a scratch server ----------------------------------------------------------
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
DATA=$(mktemp -d -t ponder-ycsb.XXXXXX)
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DRIVER_PORT=$(free_port)
HTTP_PORT=$(free_port)
mkdir -p "$RESULTS"
"$PONDER" serve --directory "$DATA/data" --driver-port "$DRIVER_PORT" --http-port "$HTTP_PORT" \
  >"$RESULTS/ponder.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$DRIVER_PORT") 2>/dev/null; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RESULTS/ponder.log" >&2; echo "ponder exited" >&2; exit 1; }
  sleep 0.1
done
say "ponder (pid $SERVER_PID) on 127.0.0.1:$DRIVER_PORT, data in $DATA/data; results in $RESULTS"
echo "machine: $(nproc) cores, $(uname -r); $("$PONDER" --version 2>/dev/null || true)"
echo "java: $(java -version 2>&1 | head -1); JAVA_OPTS: $JAVA_OPTS"

COMMON=(-db "$DB_CLASS" -p "rethinkdb.host=127.0.0.1" -p "rethinkdb.port=$DRIVER_PORT"
  -p "rethinkdb.db=ycsb" -p "recordcount=$RECORDS"
  -p "measurementtype=hdrhistogram" -p "hdrhistogram.percentiles=50,95,99,99.9")

summary() { # the lines of YCSB's summary worth reading
  grep -E '^\[(OVERALL|READ|UPDATE|INSERT|SCAN|READ-FAILED|UPDATE-FAILED|INSERT-FAILED)\], ' "$1" \
    | grep -vE 'MinLatency|95thPercentile|99\.9thPercentile' || true
}

# --- YCSB: load once, then each workload and thread count ------------------------
first=${WORKLOADS%% *}
say "YCSB load: $RECORDS records, $LOAD_THREADS threads, durability $LOAD_DURABILITY"
java $JAVA_OPTS -cp "$CP" site.ycsb.Client -load "${COMMON[@]}" -P "$HERE/workloads/workload$first" \
  -p "rethinkdb.durability=$LOAD_DURABILITY" -threads "$LOAD_THREADS" -s \
  >"$RESULTS/ycsb-load.txt" 2>"$RESULTS/ycsb-load.log"
summary "$RESULTS/ycsb-load.txt"

for w in $WORKLOADS; do
  for t in $THREADS; do
    out="$RESULTS/ycsb-$w-t$t.txt"
    say "YCSB workload $w: $t threads, ${DURATION} s, durability $DURABILITY, read_mode $READ_MODE"
    java $JAVA_OPTS -cp "$CP" site.ycsb.Client -t "${COMMON[@]}" -P "$HERE/workloads/workload$w" \
      -p "operationcount=2000000000" -p "maxexecutiontime=$DURATION" \
      -p "rethinkdb.durability=$DURABILITY" -p "rethinkdb.read_mode=$READ_MODE" \
      -p status.interval=1 -threads "$t" -s >"$out" 2>"${out%.txt}.log"
    summary "$out"
  done
done

# --- ponder-bench: the same workloads against the same server ---------------------
PB_JSON="$RESULTS/ponder-bench.json"
if [[ $SKIP_PONDER_BENCH != 1 ]]; then
  pb_workloads=$(for w in $WORKLOADS; do printf 'ycsb-%s,' "$w"; done)
  pb_workloads=${pb_workloads%,}
  pb_conns=$(echo "$THREADS" | tr -s ' ' ',')
  say "ponder-bench: $pb_workloads, $RECORDS records, connections $pb_conns, ${DURATION} s"
  (set -x; "$PONDER_BENCH" run --ponder-port "$DRIVER_PORT" --pid "ponder=$SERVER_PID" \
    --systems ponder --workloads "$pb_workloads" --records "$RECORDS" --connections "$pb_conns" \
    --duration "$DURATION" --read-mode "$READ_MODE" --no-progress --out "$PB_JSON")
fi

# --- side by side ----------------------------------------------------------------
say "side by side (ops/s over the whole phase; latencies in microseconds)"
python3 - "$RESULTS" "$PB_JSON" "$WORKLOADS" "$THREADS" "$DURABILITY" "$READ_MODE" "$WARMUP" <<'PY'
import json, os, re, sys

results, pb_json, workloads, threads, durability, read_mode, warmup = sys.argv[1:]
warmup = int(warmup)

def after_warmup(log, runtime_ms):
    """ops/s after the first `warmup` seconds, from YCSB's 1 s status lines."""
    if runtime_ms is None or runtime_ms / 1000 <= warmup + 1:
        return None
    at, last = None, None
    for line in open(log):
        m = re.search(r' (\d+) sec: (\d+) operations;', line)
        if m:
            sec, ops = int(m.group(1)), int(m.group(2))
            if at is None and sec >= warmup:
                at = (sec, ops)
            last = ops
    if at is None or last is None:
        return None
    return (last - at[1]) / (runtime_ms / 1000 - at[0])

def ycsb(path):
    out = {}
    for line in open(path):
        m = re.match(r'\[([A-Z-]+)\], ([^,]+), ([0-9.eE+-]+)\s*$', line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out

pb = {}
if os.path.exists(pb_json):
    for ph in json.load(open(pb_json))["phases"]:
        if ph["kind"] == "run":
            pb[(ph["workload"], ph["connections"])] = ph

def fmt(x, digits=0):
    return "—" if x is None else f"{x:,.{digits}f}"

print(f"YCSB writes: durability {durability}; reads: read_mode {read_mode}; ponder-bench writes hard.")
print()
print(f"| workload | connections | tool | ops/s | ops/s after {warmup} s | read mean | read p50 | read p99"
      " | update mean | update p50 | update p99 | errors |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for w in workloads.split():
    for t in threads.split():
        t = int(t)
        path = os.path.join(results, f"ycsb-{w}-t{t}.txt")
        if os.path.exists(path):
            y = ycsb(path)
            errors = sum(v for (k, n), v in y.items()
                         if n.startswith("Return=") and n != "Return=OK")
            row = [f"YCSB {w.upper()}", str(t), "YCSB 0.17.0 + Java driver 2.4.4",
                   fmt(y.get(("OVERALL", "Throughput(ops/sec)"))),
                   fmt(after_warmup(path[:-4] + ".log", y.get(("OVERALL", "RunTime(ms)"))))]
            for op in ("READ", "UPDATE"):
                row += [fmt(y.get((op, "AverageLatency(us)"))),
                        fmt(y.get((op, "50thPercentileLatency(us)"))),
                        fmt(y.get((op, "99thPercentileLatency(us)")))]
            row.append(fmt(errors))
            print("| " + " | ".join(row) + " |")
        ph = pb.get((f"ycsb-{w}", t))
        if ph:
            per_s = ph.get("per_second") or []
            steady = per_s[warmup:-1] if len(per_s) > warmup + 1 else []
            row = [f"YCSB {w.upper()}", str(t), "ponder-bench", fmt(ph["ops_per_sec"]),
                   fmt(sum(steady) / len(steady) if steady else None)]
            for op in ("read", "update"):
                lat = ph["latency_us"].get(op)
                row += [fmt(lat and lat["mean"]), fmt(lat and lat["p50"]), fmt(lat and lat["p99"])]
            row.append(fmt(ph["errors"]))
            print("| " + " | ".join(row) + " |")
PY

say "done; YCSB outputs and ponder-bench JSON kept in $RESULTS (server data removed)"
