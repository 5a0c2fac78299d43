#!/usr/bin/env bash
# Measure servelab-sim's send precision and memory at 100, 1,000 and 5,000 concurrent streams.
#
# For each level: start the sim (release build) in its own process with a truth log, drive N
# concurrent streaming requests (TTFT 50 ms, ITL 10 ms, 100 tokens each) from a separate
# load-driver process, read the sim's peak RSS (VmHWM), stop it with SIGINT (which flushes the
# truth log), and print median / p99 / max of actual - intended over every chunk.
#
# Usage: scripts/sim-precision.sh [LEVELS...]      (default levels: 100 1000 5000)
# Env: TOKENS (100), TTFT_MS (50), ITL_MS (10), RAMP_MS (0 = all streams start at once, the
# worst case; e.g. 1000 spreads the starts over a second).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then LEVELS=("$@"); else LEVELS=(100 1000 5000); fi
TOKENS="${TOKENS:-100}"
TTFT_MS="${TTFT_MS:-50}"
ITL_MS="${ITL_MS:-10}"
RAMP_MS="${RAMP_MS:-0}"

cargo build --release -q -p servelab-sim --example sim_serve --example precision
TARGET="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
BIN="$TARGET/release/examples"

# Under the target dir, not /tmp: the truth logs are kept for inspection after the run.
work="$TARGET/sim-precision"
mkdir -p "$work"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

for n in "${LEVELS[@]}"; do
  truth="$work/truth-$n.jsonl"
  errlog="$work/sim-$n.err"
  "$BIN/sim_serve" --port 0 --ttft-ms "$TTFT_MS" --itl-ms "$ITL_MS" --truth-log "$truth" 2>"$errlog" &
  sim_pid=$!
  url=""
  for _ in $(seq 1 200); do
    url="$(sed -n 's/^servelab sim listening on \(http:[^ ]*\)$/\1/p' "$errlog")"
    [ -n "$url" ] && break
    sleep 0.05
  done
  if [ -z "$url" ]; then
    echo "sim did not start:"; cat "$errlog"; kill -INT "$sim_pid" 2>/dev/null || true; exit 1
  fi
  echo "== $n concurrent streams, $TOKENS tokens each, TTFT $TTFT_MS ms, ITL $ITL_MS ms, ramp $RAMP_MS ms ($url)"
  "$BIN/precision" drive --url "$url" --streams "$n" --tokens "$TOKENS" --ramp-ms "$RAMP_MS"
  hwm_kb="$(awk '/^VmHWM:/ {print $2}' "/proc/$sim_pid/status")"
  kill -INT "$sim_pid"
  wait "$sim_pid" || true
  "$BIN/precision" analyze --truth "$truth"
  echo "sim: peak RSS (VmHWM) $((hwm_kb / 1024)) MB"
done
