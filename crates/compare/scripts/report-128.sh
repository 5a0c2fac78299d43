#!/usr/bin/env bash
# Times `servelab report` over 128 predicted runs (issue 25 item 9): four engine files × two
# labels, each a predicted sweep of 8 concurrencies × 2 scenarios, in a throwaway store;
# then one report over the 8 labels. Prints the wall time, the peak memory and the report's
# shape (lines and level-2 sections). Run from the repository root:
#   bash crates/compare/scripts/report-128.sh [BINARY]
set -euo pipefail
bin=${1:-target/debug/servelab}
[ -x "$bin" ] || cargo build -q -p servelab
dir=$(mktemp -d)
export SERVELAB_DB="$dir/db.sqlite"
labels=()
for e in qwen3-32b-h20-tp4 qwen3-8b-h100-tp1 llama-3.3-70b-h200-tp4-fp8 gpt-oss-120b-b200-tp2; do
  for sfx in a b; do
    "$bin" predict --engine "examples/engines/$e.yaml" --label "$e-$sfx" \
      --concurrency 1,2,4,8,16,32,64,128 --scenario 3000:150 --scenario 1000:1000 \
      --output-dir "$dir/out-$e-$sfx" > /dev/null
    labels+=("$e-$sfx")
  done
done
echo "runs stored: $("$bin" runs list | tail -n +3 | wc -l)"
/usr/bin/time -f "report: %e s wall, %M kB peak" "$bin" report "${labels[@]}" -o "$dir/report.html" > /dev/null
echo "report.md: $(wc -l < "$dir/report.md") lines; sections: $(grep -c '^## ' "$dir/report.md") (## headings)"
grep '^## ' "$dir/report.md"
rm -rf "$dir"
