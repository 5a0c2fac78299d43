#!/usr/bin/env bash
# What fitting on each request's own lengths buys, end to end: a measured sweep of the built-in
# simulator (the engine model of Qwen3-8B on one H100, vLLM V1, default calibration: the truth)
# whose lengths are drawn as SGLang's client draws them ([0.1 L, L]), then `predict calibrate`
# from a deliberately wrong engine file twice: on the stored runs (`--runs`: every point
# replays its requests' lengths), on the sweep's sweep.json (no lengths kept, but each point's
# label, prompt count and seed draw them again) and on its summary.md (a Markdown table: every
# point at its scenario's lengths, as a published table is fitted). Prints both fits' parameters (truth: eta_gemm 0.70, layer_overhead_us 10,
# per_seq_overhead_us 20, frontend_us 1,000 plus whatever the wall-clock simulator and client
# add), their errors after the fit and their leave-one-scenario-out errors. About two minutes.
#   scripts/calibrate-drawn.sh            (builds servelab in release mode first)
#   SERVELAB_BIN=target/debug/servelab scripts/calibrate-drawn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${SERVELAB_BIN:-}" ]; then
  bin="$(realpath "$SERVELAB_BIN")"
else
  cargo build --release -q -p servelab
  bin="$(realpath "${CARGO_TARGET_DIR:-target}/release/servelab")"
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$bin" sweep --db ./s.db --sim-engine qwen3-8b-h100-tp1 \
  --scenario 3000:150 --scenario 1000:300 --random-range-ratio 0.1 --random-range-style sglang \
  --concurrency 1,4,16,32 --prompts-per-concurrency 8 --min-prompts 16 --max-prompts 256 \
  --ignore-eos --no-progress --settle-secs 0 --label drawn --output-dir out > sweep.log 2>&1
cat > wrong.yaml <<'YAML'
engine: vllm-v1
model: qwen3-8b
gpu: h100
tp: 1
replicas: 1
scheduler: {max_num_seqs: 256, max_num_batched_tokens: 8192, chunked_prefill: true, prefix_caching: true}
calibration: {eta_gemm: 0.4, layer_overhead_us: 40, per_seq_overhead_us: 60, frontend_us: 5000}
YAML
for how in runs sweep.json summary.md; do
  if [ "$how" = runs ]; then src=(--runs drawn); else src=("out/$how"); fi
  "$bin" predict calibrate --db ./s.db --engine wrong.yaml "${src[@]}" --leave-one-out \
    --output fit.yaml > fit.md 2> fit.err
  echo "== fitted on the ${how}: $(grep '^Fitting' fit.err)"
  sed -n '/^| parameter | before/,/^$/p' fit.md
  grep -E 'bound \(' fit.md || true
  sed -n '/^| cells | median/,/^$/p' fit.md | grep '^| all'
  sed -n '/^| scenario | cells/,$p' fit.md
done
