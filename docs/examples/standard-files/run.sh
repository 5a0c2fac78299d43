#!/usr/bin/env bash
# Regenerates this example: a simulated run exported as llm-d's Benchmark Report v0.2 and as
# AIPerf's two files, those files imported back, and an inference-perf report and an AIPerf
# summary (the hand-written files of testdata/standard-files) compared beside the native run.
# Run from the repository root:
#   bash docs/examples/standard-files/run.sh
set -euo pipefail
cargo build -q -p servelab
bin=target/debug/servelab
out=docs/examples/standard-files
export SERVELAB_DB="$(mktemp -d)/servelab.db"
# The simulator's fixed timing (TTFT 50 ms, ITL 10 ms), 40 prompts, at most 4 at once.
$bin bench --label sim-c4 --num-prompts 40 --random-input-len 128 --random-output-len 32 \
  --ignore-eos --max-concurrency 4 --seed 1 --no-progress > /dev/null
# Export: one file per format.
$bin runs export sim-c4 --format llmd-report -o "$out/benchmark_report.json"
$bin runs export sim-c4 --format aiperf -o "$out/profile_export_aiperf.json"
$bin runs export sim-c4 --format aiperf-jsonl -o "$out/profile_export.jsonl"
# Import: the exports back, and other tools' files.
$bin runs import "$out/benchmark_report.json" --label back-from-llmd
$bin runs import "$out/profile_export_aiperf.json" --label back-from-aiperf
$bin runs import "$out/profile_export.jsonl" --label back-from-aiperf-records
$bin runs import testdata/standard-files/inference-perf-br-v0.2.yaml --label inference-perf
$bin runs import testdata/standard-files/aiperf-profile_export_aiperf.json --label aiperf
{
  echo '$ servelab runs list'
  $bin runs list
  echo
  echo '$ servelab compare sim-c4 back-from-llmd back-from-aiperf back-from-aiperf-records'
  $bin compare sim-c4 back-from-llmd back-from-aiperf back-from-aiperf-records
  echo
  echo '$ servelab compare inference-perf aiperf'
  $bin compare inference-perf aiperf
} > "$out/session.txt" 2>&1
