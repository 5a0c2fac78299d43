#!/usr/bin/env bash
# Time the preparation of the new workload sources in a release build, with peak memory.
#
# 1. A synthetic multi-turn workload of 10,000 sessions (2-8 turns of 128-384 tokens, a shared
#    1,024-token system prompt), with cl100k_base and with the SmolLM2 tokenizer.
# 2. A 100,000-line Mooncake trace (generated: 2,000 documents of up to 16 shared 512-token
#    blocks, each request ending with its own partial block), the same two tokenizers.
#
# "prepare" is the library call alone (parse + exact-length prompts), then the example assembles
# every trace prompt once, one at a time; peak memory is that example process's maximum resident
# set (/usr/bin/time -v), tokenizer included. It sends nothing: the memory of `servelab bench`
# replaying the same trace (bodies written a bounded window ahead of the sends) is measured with
# the command in docs/datasets.md, "Trace replay".
#
# Usage: scripts/workload-speed.sh [SESSIONS] [TRACE_LINES]   (defaults: 10000 100000)
set -euo pipefail
cd "$(dirname "$0")/.."

SESSIONS="${1:-10000}"
LINES="${2:-100000}"
SMOLLM2="testdata/smollm2-tokenizer.json"

cargo build --release -q -p servelab-workload --example workload_speed
BIN="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/examples/workload_speed"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
trace="$work/mooncake.jsonl"
"$BIN" gen-mooncake "$trace" "$LINES"
echo "trace file: $(du -h "$trace" | cut -f1) ($LINES lines); $(nproc) cores"

measure() {
    /usr/bin/time -v "$BIN" "$@" 2>"$work/time.txt"
    echo "          peak memory $(awk -F': ' '/Maximum resident/ {printf "%.0f MB", $2/1024}' "$work/time.txt"), wall $(awk -F': ' '/Elapsed/ {print $2}' "$work/time.txt") for the whole process"
}

measure sessions cl100k_base "$SESSIONS"
measure sessions "$SMOLLM2" "$SESSIONS"
measure trace mooncake "$trace" cl100k_base
measure trace mooncake "$trace" "$SMOLLM2"
