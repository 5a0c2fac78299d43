#!/usr/bin/env bash
# Regenerates this example (seed-000 shape): four simulated "models" (a simulator each, set up
# differently), each benchmarked at rate inf with 1, 10 and 100 prompts, recorded in a
# throwaway store, then `servelab report`. Two of them are variants of one model, tagged
# model=big-70b. Run from the repository root:
#   bash docs/examples/report-models/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/report-models
export SERVELAB_DB="$(mktemp -d)/servelab.db"
pids=()
trap 'kill "${pids[@]}"' EXIT
# name port ttft-ms itl-ms max-num-seqs [model tag]
models=(
  "fast-8b 18201 20 10 128"
  "snappy-32b 18202 8 15 128"
  "big-70b-fp8 18203 60 25 4 big-70b"
  "big-70b-awq 18204 50 18 8 big-70b"
)
for m in "${models[@]}"; do
  set -- $m
  $bin sim serve --port "$2" --ttft-ms "$3" --itl-ms "$4" --max-num-seqs "$5" --seed 1 2>/dev/null &
  pids+=($!)
done
sleep 1
for m in "${models[@]}"; do
  set -- $m
  tag=()
  [ -n "${6:-}" ] && tag=(--tag "model=$6")
  for n in 1 10 100; do
    $bin bench --base-url "http://127.0.0.1:$2" --label "$1" "${tag[@]}" --tag example=report-models \
      --num-prompts "$n" --request-rate inf --random-input-len 512 --random-output-len 32 \
      --ignore-eos --tokenizer cl100k_base --no-progress > /dev/null
  done
done
$bin runs list
$bin report fast-8b snappy-32b big-70b-fp8 big-70b-awq \
  --title "Four simulated models at rate inf: 1, 10 and 100 prompts" -o "$out/report.html"
