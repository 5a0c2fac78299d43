#!/usr/bin/env bash
# Regenerates this example: a simulated server benchmarked beside a stand-in DCGM exporter
# (fake-dcgm.py, serving recorded dcgm-exporter text for two H100s whose power and energy
# counter move on at each scrape), at two concurrencies and as a sweep, with a GPU price:
# joules per output token, watts per GPU and $ per million output tokens, then compared.
# Run from the repository root:
#   bash docs/examples/gpu-energy/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/gpu-energy
export SERVELAB_DB="$(mktemp -d)/servelab.db"
python3 "$out/fake-dcgm.py" 19400 &
dcgm=$!
$bin sim serve --port 18301 --ttft-ms 40 --itl-ms 8 --jitter-ms 0.5 --seed 7 &
sim=$!
trap 'kill $dcgm $sim 2>/dev/null || true' EXIT
sleep 1
gpu=(--gpu-metrics http://127.0.0.1:19400/metrics --gpu-metrics-interval 0.5 --gpus 2
  --gpu-hourly-cost 2.5)
for c in 4 16; do
  $bin bench --base-url http://127.0.0.1:18301 --label "c$c" --no-progress \
    --num-prompts 200 --random-input-len 256 --random-output-len 128 --ignore-eos \
    --max-concurrency "$c" --seed 7 "${gpu[@]}" \
    --save-result --result-dir "$out" --result-filename "c$c.json" > "$out/c$c.txt"
done
$bin compare c4 c16 > "$out/compare.txt"
$bin sweep --base-url http://127.0.0.1:18301 --label sweep --no-progress \
  --scenario 256:128 --concurrency 1,4,16 --min-prompts 64 --max-prompts 64 --ignore-eos \
  --seed 7 --settle-secs 0 "${gpu[@]}" \
  --columns load,output_throughput,tpot_mean,joules_per_output_token,gpu_mean_watts,usd_per_million_output_tokens \
  --output-dir "$(dirname "$SERVELAB_DB")/sweep" > /dev/null
cp "$(dirname "$SERVELAB_DB")/sweep/summary.md" "$out/sweep-summary.md"
