#!/usr/bin/env bash
# Regenerates this example (seed-002 shape): two simulated deployments of one model, each a
# concurrency sweep of two scenarios (500:100 and 3000:150), recorded in a throwaway store,
# then `servelab report` on the two sweep labels. Run from the repository root:
#   bash docs/examples/report-deployments/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/report-deployments
export SERVELAB_DB="$(mktemp -d)/servelab.db"
work="$(mktemp -d)"
# TTFT = 20 ms + 50 us per prompt token (per-token timing), so 3000:150 has a longer first
# token than 500:100. "tp4": 8 sequence slots, ITL 4 ms; "3p1d": 16 slots, ITL 3 ms.
$bin sim serve --port 18301 --timing per-token --prefill-us-per-token 50 --itl-ms 4 --max-num-seqs 8 --seed 1 2>/dev/null &
a=$!
$bin sim serve --port 18302 --timing per-token --prefill-us-per-token 50 --itl-ms 3 --max-num-seqs 16 --seed 2 2>/dev/null &
b=$!
trap 'kill $a $b' EXIT
sleep 1
for d in tp4:18301:TP4 3p1d:18302:3P1D; do
  IFS=: read -r name port layout <<< "$d"
  $bin sweep --base-url "http://127.0.0.1:$port" --label "qwen-$name" --tag gpu=sim --tag "layout=$layout" \
    --scenario 500:100 --scenario 3000:150 --concurrency 1,2,4,8,16,32 --settle-secs 0 \
    --tokenizer cl100k_base --no-progress --output-dir "$work/$name" > /dev/null
done
$bin report qwen-tp4 qwen-3p1d --title "Qwen (simulated): TP4 vs 3P1D" -o "$out/report.html"
# The same report from the sweep files instead of the store:
#   $bin report "$work/tp4/sweep.json" "$work/3p1d/sweep.json" -o report.html
