#!/usr/bin/env bash
# A sweep run whole and as SHARDS local shards (`servelab scale local --run sweep`, docs/scale.md
# "Sweeps and labs") against one simulated engine (TTFT 50 ms, ITL 10 ms, 512 slots: the
# figures any truthful client should read), and what each way measured.
#
# Prints per concurrency level: the merged point's requests, TTFT p99 and TPOT mean against the
# 50 / 10 ms the engine was told to produce, and output tokens/s; then the runs each store
# holds (a sharded sweep's shard 0 stores each merged point once, tagged shards=N) and each
# sweep's wall time (a sharded sweep adds, per point, the exchange of end files and a 2 s lead).
#
#   scripts/scale-sweep.sh           LEVELS (64,128,256), SHARDS (2), BIN (a servelab binary;
#                                    default: this tree's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p servelab
  BIN=target/release/servelab
fi
BIN=$(realpath "$BIN")
LEVELS=${LEVELS:-64,128,256}; SHARDS=${SHARDS:-2}
OUT=$(mktemp -d)
PORT=$(python3 -c "import socket;s=socket.socket();s.bind((\"127.0.0.1\",0));print(s.getsockname()[1])")
$BIN sim serve --port "$PORT" --ttft-ms 50 --itl-ms 10 --max-num-seqs 512 2>"$OUT/sim.log" &
SIM=$!
trap 'kill $SIM 2>/dev/null; rm -rf "$OUT"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break; sleep 0.1; done
ARGS=(--base-url "http://127.0.0.1:$PORT" --scenario 128:100 --concurrency "$LEVELS"
      --prompts-per-concurrency 3 --max-prompts 2000 --settle-secs 1 --tokenizer cl100k_base)
report() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sqlite3, sys
how, sweep, db = sys.argv[1:]
for p in json.load(open(sweep))["scenarios"][0]["points"]:
    s = p["summary"]
    p99 = dict(s["ttft_ms"]["percentiles"]).get(99.0)
    print(f"{how:<10} {p['load']['value']:>6} {s['completed']:>5}/{s['failed']:<3} "
          f"{p99:>10.2f} {s['tpot_ms']['mean']:>10.3f} {s['output_throughput']:>10.0f}")
con = sqlite3.connect(db)
n = con.execute("select count(*) from runs").fetchone()[0]
print(f"{how:<10} store: {n} runs")
PY
}
printf '%-10s %6s %9s %10s %10s %10s\n' sweep conc ok/fail ttft_p99 tpot_mean out_tok_s
T0=$(date +%s.%N)
$BIN sweep "${ARGS[@]}" --output-dir "$OUT/whole" --db "$OUT/whole.db" --no-progress \
  >/dev/null 2>"$OUT/whole.log"
T1=$(date +%s.%N)
report whole "$OUT/whole/sweep.json" "$OUT/whole.db"
$BIN scale local --run sweep --shards "$SHARDS" --name scaled --start-in 2 --results "$OUT/sharded" \
  --db "$OUT/sharded.db" -- "${ARGS[@]}" >/dev/null 2>"$OUT/sharded.log" \
  || { cat "$OUT/sharded.log" "$OUT"/sharded/shard-*.log; exit 1; }
T2=$(date +%s.%N)
report "$SHARDS-shards" "$OUT/sharded/sweep/sweep.json" "$OUT/sharded.db"
python3 -c "print(f'wall: whole {$T1 - $T0:.1f} s, $SHARDS shards {$T2 - $T1:.1f} s (with a 2 s start)')"
