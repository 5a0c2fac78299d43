#!/usr/bin/env bash
# The four workflows servelab exists for, run end to end as a new user would, with simulated
# engines (`servelab sim serve --engine NAME`: the engine model of a deployment, in wall-clock
# time) and `servelab predict` standing in for GPUs. Each writes what a team posts under
# docs/examples/workflows/<workflow>/. Run from the repository root:
#
#   bash docs/examples/workflows/run.sh            # all four
#   bash docs/examples/workflows/run.sh models     # or one: models | suite | deployments | lab
#
# Every run goes to a throwaway store; nothing here needs a GPU or the network.
set -euo pipefail
# SERVELAB=/path/to/servelab uses that binary instead of building the debug one.
[ -n "${SERVELAB:-}" ] || cargo build -q -p servelab
bin=${SERVELAB:-$PWD/target/debug/servelab}
root=docs/examples/workflows
store=$(mktemp -d)
export SERVELAB_DB="$store/servelab.db"
pids=()
trap '[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; rm -rf "$store"' EXIT

# sim PORT ARGS...: a simulated engine in the background, ready when this returns.
sim() {
  local port=$1; shift
  "$bin" sim serve --port "$port" --tokenizer cl100k_base "$@" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return; sleep 0.2; done
  echo "simulator on $port did not start" >&2; exit 2
}

# (1) Per-model verdicts: five simulated models (one quantised two ways), each sent 1, 10 and
# 100 prompts all at once, then one report with a verdict per model.
models() {
  local out=$root/models
  rm -rf "$out"; mkdir -p "$out/blocks"
  # label port engine-args...   (tags: model= groups quantisation variants of one model)
  local specs=(
    "qwen3-8b-h100 18401 --engine qwen3-8b-h100-tp1"
    "qwen3-32b-h20-tp4 18402 --engine qwen3-32b-h20-tp4"
    "llama-3.3-70b-fp8 18403 --engine llama-3.3-70b-h200-tp4-fp8"
    "llama-3.3-70b-awq 18404 --engine llama-3.3-70b-h200-tp4-fp8 --weight-dtype int4"
    "gpt-oss-120b-b200 18405 --engine gpt-oss-120b-b200-tp2"
  )
  for s in "${specs[@]}"; do
    set -- $s
    local label=$1 port=$2; shift 2
    sim "$port" "$@" --served-model-name "$label"
  done
  for s in "${specs[@]}"; do
    set -- $s
    local tag=()
    case $1 in llama-3.3-70b-*) tag=(--tag model=llama-3.3-70b) ;; esac
    for n in 1 10 100; do
      "$bin" bench --base-url "http://127.0.0.1:$2" --backend vllm --label "$1" "${tag[@]}" \
        --num-prompts "$n" --request-rate inf --random-input-len 1024 --random-output-len 128 \
        --seed "$n" --ignore-eos --tokenizer cl100k_base --no-progress > "$out/blocks/$1-$n.txt"
    done
  done
  "$bin" report qwen3-8b-h100 qwen3-32b-h20-tp4 llama-3.3-70b-fp8 llama-3.3-70b-awq gpt-oss-120b-b200 \
    --title "Five simulated models, 1, 10 and 100 prompts at once (1024 in, 128 out)" \
    -o "$out/report.html"
}

# (2) A scripted per-model suite: the LMDeploy-style preset (its four cases, each all at once
# with its own prompt count), every case's block in SGLang's layout.
suite() {
  local out=$root/suite
  rm -rf "$out"; mkdir -p "$out"
  # Fixed timing, fast enough that 6,000-token answers take seconds: TTFT 50 ms, a decode step
  # every 2 ms sending 16 tokens (as a server with a stream interval of 16 does). The ShareGPT
  # case reads the repository's small ShareGPT sample (its 10,000 prompts cycle through it).
  sim 18411 --ttft-ms 50 --itl-ms 2 --tokens-per-chunk 16
  "$bin" sweep --base-url http://127.0.0.1:18411 --backend lmdeploy --label lmdeploy-suite \
    --suite lmdeploy --dataset-path testdata/sharegpt-multiturn.json --tokenizer cl100k_base \
    --format sglang --settle-secs 0 --no-progress --output-dir "$out" > "$out/stdout.txt"
  rm -rf "$out/points"   # each point's full result (13,000 requests); sweep.json has the summaries

}

# (3) Concurrency x ISL:OSL tables per deployment, compared per scenario: Qwen3-32B on 16 H20
# as 4 TP4 replicas and as 2P2D (2 prefill and 2 decode workers), each measured (simulated),
# and the TP4 one also predicted.
deployments() {
  local out=$root/deployments
  rm -rf "$out"; mkdir -p "$out"
  sim 18421 --engine qwen3-32b-h20-tp4
  sim 18422 --engine qwen3-32b-h20-pd-2p2d
  # Short points (a simulated engine runs in wall-clock time): 2 prompts per unit of
  # concurrency, at least 4.
  local grid=(--concurrency 1,2,4,8,16,32,64 --scenario 1000:100 --scenario 3000:50
    --prompts-per-concurrency 2 --min-prompts 4 --settle-secs 0 --tokenizer cl100k_base
    --no-progress)
  "$bin" sweep --base-url http://127.0.0.1:18421 --label h20-tp4x4 --tag layout=TP4x4 "${grid[@]}" \
    --output-dir "$out/h20-tp4x4" > "$out/h20-tp4x4.txt"
  "$bin" sweep --base-url http://127.0.0.1:18422 --label h20-2p2d --tag layout=2P2D "${grid[@]}" \
    --output-dir "$out/h20-2p2d" > "$out/h20-2p2d.txt"
  "$bin" predict --engine examples/engines/qwen3-32b-h20-tp4.yaml --label h20-tp4x4-predicted \
    "${grid[@]}" --output-dir "$out/h20-tp4x4-predicted" > "$out/h20-tp4x4-predicted.txt"
  rm -rf "$out"/*/points  # each point's full result; sweep.json has the summaries
  "$bin" compare h20-tp4x4 h20-2p2d > "$out/compare-measured.txt"
  "$bin" compare h20-tp4x4-predicted h20-tp4x4 > "$out/compare-predicted-vs-measured.txt"
  "$bin" report h20-tp4x4 h20-2p2d h20-tp4x4-predicted --per-deployment \
    --title "Qwen3-32B on 16 H20: TP4 x4 vs 2P2D (simulated), and TP4 x4 predicted" \
    -o "$out/report.html"
}

# (4) An engine-tuning lab: one simulated engine, options tried greedily (prefix caching, a
# larger batch, FP8 weights, speculative decoding), a report and the recommended command.
lab() {
  local out=$root/lab
  rm -rf "$out"
  "$bin" lab run "$root/lab.yaml" --output-dir "$out" > "$root/lab-stdout.txt"
  mv "$root/lab-stdout.txt" "$out/stdout.txt"
}

case ${1:-all} in
  models) models ;;
  suite) suite ;;
  deployments) deployments ;;
  lab) lab ;;
  all) models; suite; deployments; lab ;;
  *) echo "usage: $0 [models|suite|deployments|lab|all]" >&2; exit 2 ;;
esac
