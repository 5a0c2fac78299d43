#!/usr/bin/env bash
# Regenerates this example: a simulated reasoning model that thinks 32 to 128 tokens (drawn per
# request) before answering, benchmarked twice: once sending its thinking in the reasoning
# field (vLLM or SGLang with a reasoning parser), once inside the content as <think>…</think>
# (a server without one); both runs recorded in a throwaway store, then exported and compared.
# Run from the repository root:
#   bash docs/examples/reasoning/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/reasoning
export SERVELAB_DB="$(mktemp -d)/servelab.db"
run() { # NAME PORT
  $bin sim serve --port "$2" --ttft-ms 40 --itl-ms 8 --jitter-ms 0.5 --seed 7 \
    --reasoning-tokens 32-128 --reasoning-format "$1" &
  local sim=$!
  sleep 1
  $bin bench --base-url "http://127.0.0.1:$2" --backend openai-chat --label "$1" --no-progress \
    --num-prompts 40 --random-input-len 256 --random-output-len 256 --ignore-eos \
    --max-concurrency 8 --seed 7 --continuous-usage on --goodput ttfa:1000 answer_tpot:10 \
    --save-result --result-dir "$out" --result-filename "$1.json" > "$out/$1.txt"
  $bin runs export "$1" --format requests-csv -o "$out/$1-requests.csv"
  kill "$sim"
  wait "$sim" 2>/dev/null || true
}
run field 18201
run think-tags 18202
$bin compare field think-tags > "$out/compare.txt"
