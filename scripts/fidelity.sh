#!/usr/bin/env bash
# Fidelity benchmark: how close servelab's TTFT and ITL are to the truth, at high concurrency.
#
# Starts `servelab sim serve` in its own process (TTFT 50 ms, ITL 10 ms, 100 output tokens per
# request, truth log on), benchmarks it with `servelab bench` at each concurrency level
# (closed loop, 3 requests per stream), then joins servelab's per-request records with the
# simulator's truth log by request id. Prints per level:
#   ttft_err_ms   mean of client TTFT − the sim's actual send offset of the first chunk
#   sent_err_ms   ttft_err without the client's own send lateness: (first chunk − actual send)
#                 − the sim's offset; what is left is the request's and the response's transit,
#                 including how late each side's reads were (the sim's clock starts when it has
#                 read the request)
#   err_vs_plan   mean of client TTFT − the TTFT the sim was told to produce (adds sim lateness)
#   steady_err_ms ttft_err over requests after the first wave (which is all due at t = 0 and
#                 so waits for the client to write N requests at once)
#   send_lag_ms   mean of sent − intended send (part of ttft_err: the client's own lateness);
#                 steady_lag: the same after the first wave
#   itl_p99_ms    p99 of the client's per-token ITL; truth_p99: p99 of the sim's actual gaps
#   cpu_s, peak_mb: the client's CPU time (user + sys) and peak RSS
#
#   scripts/fidelity.sh [LEVELS...]      default: 100 1000 2000
# Env: ITL_MS (10), TOKENS (100), SHARDS (1; above 1: the streams are driven by that many
# local shard processes, `servelab scale local`, and their records joined: docs/scale.md), BIN (a servelab binary to measure instead of building this
# tree's, e.g. an older build for a before/after comparison). On 2 shared cores the sim and the client together carry
# about 100k SSE events/s; streams x 1000 / ITL_MS above that saturates the machine and both
# fall behind (truth_p99 above ITL_MS shows it); e.g. ITL_MS=50 keeps 1,000 streams below it.
set -euo pipefail
cd "$(dirname "$0")/.."
LEVELS=("$@"); [ ${#LEVELS[@]} -gt 0 ] || LEVELS=(100 1000 2000)
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p servelab
  BIN=target/release/servelab
fi
OUT=$(mktemp -d); trap 'kill $SIM 2>/dev/null || true; rm -rf "$OUT"' EXIT
PORT=${PORT:-$(python3 -c "import socket;s=socket.socket();s.bind((\"127.0.0.1\",0));print(s.getsockname()[1])")}
printf '%-8s %-9s %-12s %-13s %-12s %-12s %-12s %-11s %-10s %-10s %-7s %-7s\n' streams requests ttft_err_ms steady_err_ms sent_err_ms err_vs_plan send_lag_ms steady_lag itl_p99_ms truth_p99 cpu_s peak_mb
for N in "${LEVELS[@]}"; do
  $BIN sim serve --port "$PORT" --ttft-ms 50 --itl-ms "${ITL_MS:-10}" --truth-log "$OUT/truth-$N.jsonl" 2>"$OUT/sim.log" &
  SIM=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
  REQ=$((N * 3))
  ARGS=(--base-url "http://127.0.0.1:$PORT" --random-input-len 128 --random-output-len "${TOKENS:-100}"
    --ignore-eos --tokenizer cl100k_base --num-prompts "$REQ" --max-concurrency "$N")
  if [ "${SHARDS:-1}" -gt 1 ]; then
    # N streams over SHARDS local processes (each N/SHARDS), one time zero, records merged.
    # CPU time counts every shard (the parent waits for them); peak_mb is the largest one's.
    /usr/bin/time -f "%U %S %M" -o "$OUT/time-$N" \
      $BIN scale local --shards "$SHARDS" --start-in 5 --results "$OUT/shards-$N" \
        --db "$OUT/store.db" -- "${ARGS[@]}" >"$OUT/report-$N.txt"
    cat "$OUT/shards-$N"/run-shard-*.records.jsonl >"$OUT/run-$N.records.jsonl"
  else
    /usr/bin/time -f "%U %S %M" -o "$OUT/time-$N" \
      $BIN bench "${ARGS[@]}" --no-progress --no-store \
        --save-detailed --result-dir "$OUT" --result-filename "run-$N.json" >"$OUT/report-$N.txt"
  fi
  kill -INT $SIM; wait $SIM 2>/dev/null || true
  python3 - "$OUT/run-$N.records.jsonl" "$OUT/truth-$N.jsonl" "$OUT/time-$N" "$N" "$REQ" <<'PY'
import json, sys
recs, truth, timef, n, req = sys.argv[1:]
truth_by_id = {}
for line in open(truth):
    t = json.loads(line)
    if t.get("request_id"): truth_by_id[t["request_id"]] = t
def pct(xs, p):
    xs = sorted(xs); k = (len(xs) - 1) * p / 100; f = int(k); c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)
err_actual, err_intended, itl, gaps, lag, steady_err, steady_lag = [], [], [], [], [], [], []
err_sent = []
for line in open(recs):
    r = json.loads(line)
    if r["warmup"] or r["outcome"]["result"] != "success": continue
    t = truth_by_id.get("servelab-%d" % r["index"])
    chunks = [c for c in r["chunks"] if c["text"]]
    if not t or not chunks or not t["chunks"]: continue
    ttft = (chunks[0]["t_ns"] - r["intended_ns"]) / 1e6
    err_actual.append(ttft - t["chunks"][0]["actual_ns"] / 1e6)
    err_sent.append((chunks[0]["t_ns"] - r["sent_ns"]) / 1e6 - t["chunks"][0]["actual_ns"] / 1e6)
    err_intended.append(ttft - t["chunks"][0]["intended_ns"] / 1e6)
    lag.append((r["sent_ns"] - r["intended_ns"]) / 1e6)
    # After the first wave (all due at t=0), each request is due when a slot frees.
    if r["index"] >= int(n):
        steady_err.append(err_actual[-1]); steady_lag.append(lag[-1])
    for a, b in zip(chunks, chunks[1:]):
        g = (b["t_ns"] - a["t_ns"]) / 1e6 / max(b.get("tokens") or 1, 1)
        itl.extend([g] * max(b.get("tokens") or 1, 1))
    tc = t["chunks"]
    for a, b in zip(tc, tc[1:]):
        gaps.append((b["actual_ns"] - a["actual_ns"]) / 1e6 / max(b["tokens"], 1))
u, s, m = open(timef).read().split()
mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
print("%-8s %-9s %-12.2f %-13.2f %-12.2f %-12.2f %-12.2f %-11.2f %-10.2f %-10.2f %-7.2f %-7.0f" % (
    n, req, mean(err_actual), mean(steady_err), mean(err_sent), mean(err_intended), mean(lag), mean(steady_lag),
    pct(itl, 99), pct(gaps, 99), float(u) + float(s), int(m) / 1024))
PY
done
