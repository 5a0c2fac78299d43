#!/usr/bin/env bash
# Time servelab's dataset loading in a release build.
#
# Generates a synthetic ShareGPT file (default 12,000 conversations: prompts with a median of
# ~60 words and a long tail, answers ~200 words, Zipf-like words, 1 in 20 single-turn), then
# times `load()` for 10,000 ShareGPT prompts with the real SmolLM2 tokenizer (and cl100k_base),
# and for 1,000 random prompts of 1,024 tokens with cl100k_base and SmolLM2. Prints one line
# per measurement.
#
# Usage: scripts/dataset-load.sh [CONVERSATIONS] [PROMPTS]   (defaults: 12000 10000)
set -euo pipefail
cd "$(dirname "$0")/.."

CONVERSATIONS="${1:-12000}"
PROMPTS="${2:-10000}"
TOKENIZER="testdata/smollm2-tokenizer.json"

cargo build --release -q -p servelab-workload --example dataset_load
BIN="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/examples/dataset_load"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
data="$work/sharegpt.json"

"$BIN" gen-sharegpt "$data" "$CONVERSATIONS"
echo "file: $(du -h "$data" | cut -f1) ($CONVERSATIONS conversations), $(nproc) cores"
"$BIN" time "sharegpt:$data" "$TOKENIZER" "$PROMPTS"
"$BIN" time "sharegpt:$data" cl100k_base "$PROMPTS"
"$BIN" time random:1024 cl100k_base 1000
"$BIN" time random:1024 "$TOKENIZER" 1000
"$BIN" time prefix:10 "$TOKENIZER" 1000
