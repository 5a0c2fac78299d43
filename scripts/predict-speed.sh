#!/usr/bin/env bash
# Times the engine model on a 16-point sweep (3000:150 and 1000:1000 x concurrency 1..128,
# 500 requests per point) of an engine file, and prints wall time and peak memory.
#   scripts/predict-speed.sh [examples/engines/qwen3-32b-h20-tp4.yaml]
# Builds servelab-engine's example in release mode first (about a minute the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
engine="${1:-examples/engines/qwen3-32b-h20-tp4.yaml}"
cargo build --release -q -p servelab-engine --example predict_speed
bin="${CARGO_TARGET_DIR:-target}/release/examples/predict_speed"
if [ -x /usr/bin/time ]; then
  log="$(mktemp)"
  /usr/bin/time -v "$bin" "$engine" 2>"$log"
  grep -E "Elapsed \(wall clock\)|Maximum resident set size" "$log"
  rm -f "$log"
else
  time "$bin" "$engine"
fi
