#!/usr/bin/env bash
# Fuzz every parser of server output and user files; print executions and crashes per target.
#
#   scripts/fuzz.sh [SCALE] [SECONDS]      (PROFILE=release for a faster run after a release build)
#
# Stable (always): the seeded property tests at SCALE x their CI counts (default 20), with a
# seed other than CI's. Nightly with cargo-fuzz (when present): also each libFuzzer target of
# crates/client/fuzz for SECONDS (default 60). A crash fails the script; replay it with the
# printed seed (property tests) or the crash file (cargo-fuzz), then add it as a test.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-20}
secs=${2:-60}
seed=${SERVELAB_PROPERTY_SEED:-$(date +%s)}
echo "== property tests (stable): scale x$scale, seed $seed"
out=$(SERVELAB_PROPERTY_SCALE=$scale SERVELAB_PROPERTY_SEED=$seed \
  cargo test --profile "${PROFILE:-dev}" -q -p servelab-client -p servelab-workload -p servelab-store -p servelab-lab \
  --test it -- --nocapture properties:: 2>&1) || { echo "$out" | tail -40; echo "FAILED (seed $seed)"; exit 1; }
echo "$out" | grep -oE '[a-z0-9-]+: [0-9]+ executions, [0-9]+ crashes( \([^)]*\))?' | sort
if command -v cargo-fuzz >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q nightly; then
  echo "== cargo-fuzz (nightly): ${secs}s per target"
  run() { # DIR TARGET CORPUS
    log=$(cd "$1" && cargo +nightly fuzz run "$2" "$3" -- -max_total_time="$secs" 2>&1) \
      || { echo "$log" | tail -30; echo "$2: CRASH"; exit 1; }
    runs=$(echo "$log" | grep -oE 'Done [0-9]+ runs' | tail -1 | grep -oE '[0-9]+')
    echo "$2 (libFuzzer): ${runs:-?} executions, 0 crashes"
  }
  for t in sse_framer openai_event prom_text; do run crates/client "$t" "fuzz/corpus/$t"; done
  mkdir -p fuzz/corpus/result_file fuzz/corpus/experiment fuzz/corpus/dataset_file
  cp crates/store/tests/fixtures/*.json* fuzz/corpus/result_file/
  cp examples/lab-*.yaml fuzz/corpus/experiment/
  for f in testdata/*.json testdata/*.jsonl testdata/*.csv; do
    for k in 0 1 2 3 4 5 6; do printf "\\x0$k" | cat - "$f" > "fuzz/corpus/dataset_file/$k-$(basename "$f")"; done
  done
  for t in result_file experiment dataset_file; do run fuzz "$t" "corpus/$t"; done
else
  echo "== cargo-fuzz: not installed (needs nightly + cargo install cargo-fuzz); skipped"
fi
