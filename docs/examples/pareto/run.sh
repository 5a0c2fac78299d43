#!/usr/bin/env bash
# Regenerates this example: the chart deployments are chosen by, output tokens/s per GPU
# against output tokens/s per user with the Pareto front, from four predicted deployments of
# Qwen3-32B on H20 (one replica at TP 1, 2, 4 and 8: 1 to 8 GPUs), their report and a
# comparison, and one measured sweep of the simulator with --gpus 1. Run from the repository
# root:
#   bash docs/examples/pareto/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/pareto
store="$(mktemp -d)"
work="$(mktemp -d)"
trap 'rm -rf "$store" "$work"' EXIT
export SERVELAB_DB="$store/servelab.db"
rm -rf "$out/predict-tp8" "$out/sweep-sim" "$out/report-charts"

# 1. predict: the shipped engine file (4 replicas x TP4) cut to one replica at each TP; predict
#    files each run with its deployment's GPU count (replicas x TP).
mkdir -p "$out/engines"
for tp in 1 2 4 8; do
  sed "s/^tp: 4/tp: $tp/; s/^replicas: 4/replicas: 1/" examples/engines/qwen3-32b-h20-tp4.yaml \
    > "$out/engines/tp$tp.yaml"
  $bin predict --engine "$out/engines/tp$tp.yaml" --label "qwen3-32b-h20-tp$tp" --scenario 1000:1000 \
    --concurrency 1,2,4,8,16,32,64,128,256 --output-dir "$work/tp$tp" > /dev/null 2>&1
done
mkdir -p "$out/predict-tp8/charts"
cp "$work/tp8/summary.md" "$out/predict-tp8/"
cp "$work/tp8"/charts/*.svg "$out/predict-tp8/charts/"

# 2. the four deployments in one report: the Pareto chart and table per scenario.
$bin report qwen3-32b-h20-tp1 qwen3-32b-h20-tp2 qwen3-32b-h20-tp4 qwen3-32b-h20-tp8 \
  --title "Qwen3-32B on H20 (predicted): TP1, TP2, TP4, TP8" -o "$out/report.html" 2> /dev/null

# 3. compare two of them at concurrency 32: the per-GPU and per-user rows.
run_id() {
  $bin runs list --label "$1" --tag "sweep.load=concurrency-$2" --format json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])'
}
$bin compare "$(run_id qwen3-32b-h20-tp2 32)" "$(run_id qwen3-32b-h20-tp8 32)" > "$out/compare.txt"

# 4. measured: a sweep of the in-process simulator (the engine model of Qwen3-8B on one H100)
#    on this machine's clock, stating its one GPU.
$bin sweep --sim-engine qwen3-8b-h100-tp1 --gpus 1 --label qwen3-8b-h100-sim \
  --scenario 500:100 --concurrency 1,4,16,32 --no-progress --output-dir "$work/measured" \
  > /dev/null 2>&1
mkdir -p "$out/sweep-sim/charts"
cp "$work/measured/summary.md" "$out/sweep-sim/"
cp "$work/measured"/charts/*.svg "$out/sweep-sim/charts/"
