#!/usr/bin/env bash
# Times `servelab predict` on a 16-point sweep (3000:150 and 1000:1000 x concurrency 1..128,
# 500 requests per point) of an engine file, and prints wall time and peak memory. The whole
# command is timed: engine file, workload lengths, the engine model, metrics, every file a
# sweep writes (tables, CSV, JSON, point files, SVG charts).
#   scripts/predict-speed.sh [examples/engines/qwen3-32b-h20-tp4.yaml]
# Builds servelab in release mode first (several minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
engine="${1:-examples/engines/qwen3-32b-h20-tp4.yaml}"
cargo build --release -q -p servelab
bin="${CARGO_TARGET_DIR:-target}/release/servelab"
out="$(mktemp -d)"
args=(predict --engine "$engine" --concurrency 1,2,4,8,16,32,64,128
      --scenario 3000:150 --scenario 1000:1000 --min-prompts 500 --max-prompts 500
      --no-store --output-dir "$out/sweep")
if [ -x /usr/bin/time ]; then
  /usr/bin/time -v "$bin" "${args[@]}" >"$out/stdout" 2>"$out/stderr"
  grep -E "Elapsed \(wall clock\)|Maximum resident set size" "$out/stderr"
else
  time "$bin" "${args[@]}" >"$out/stdout" 2>"$out/stderr"
fi
echo "points: $(find "$out/sweep/points" -name '*.json' | wc -l)"
rm -rf "$out"
