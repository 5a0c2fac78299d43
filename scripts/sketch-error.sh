#!/usr/bin/env bash
# The mergeable summary's error against the exact merge: 1,000,000 synthetic latencies (or
# $1) over 16 shards, sketched per shard with relative accuracy $2 (default 0.005), merged,
# and compared percentile by percentile with the exact union. Exits 1 if any error exceeds
# the stated bound. Usage: scripts/sketch-error.sh [COUNT] [ALPHA]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet -p servelab-metrics --example sketch_error -- "${1:-1000000}" "${2:-0.005}"
