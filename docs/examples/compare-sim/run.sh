#!/usr/bin/env bash
# Regenerates this example: two simulated engines, each benchmarked at concurrency 1, 4 and 8,
# recorded in a throwaway store, then `servelab report`. Run from the repository root:
#   bash docs/examples/compare-sim/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/compare-sim
export SERVELAB_DB="$(mktemp -d)/servelab.db"
# engine-a: fast first token, few decode slots (queues at higher load).
$bin sim serve --port 18101 --ttft-ms 40 --itl-ms 8 --max-num-seqs 4 --jitter-ms 1 --seed 1 &
a=$!
# engine-b: slower first token, more decode slots.
$bin sim serve --port 18102 --ttft-ms 60 --itl-ms 10 --max-num-seqs 16 --jitter-ms 1 --seed 2 &
b=$!
trap 'kill $a $b' EXIT
for c in 1 4 8; do
  for e in a:18101 b:18102; do
    $bin bench --base-url "http://127.0.0.1:${e#*:}" --label "engine-${e%%:*}" --tag example=compare-sim \
      --num-prompts 40 --random-input-len 128 --random-output-len 32 --ignore-eos \
      --max-concurrency "$c" --no-progress > /dev/null
  done
done
$bin runs list
$bin compare engine-a engine-b   # one comparison per concurrency (point by point)
$bin report engine-a engine-b --title "Simulated engines A and B" -o "$out/report.html"
