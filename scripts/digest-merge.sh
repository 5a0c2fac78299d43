#!/usr/bin/env bash
# One sharded run merged two ways from the same folder: exactly from the shards' records
# (`runs merge`, what `scale local` does) and from their digests (`runs merge-digests`).
# Prints the headline figures side by side with the relative difference, and the bytes each
# shard wrote (records vs digest). Runs against the built-in simulator (TTFT 50 ms, ITL 10 ms)
# on this machine.
#
# Usage: scripts/digest-merge.sh [SHARDS] [PROMPTS] [RATE]     (default 4 4000 200)
# Env: BIN (default target/release/servelab, built if missing), PORT (18140).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDS="${1:-4}"
PROMPTS="${2:-4000}"
RATE="${3:-200}"
PORT="${PORT:-18140}"
BIN="${BIN:-target/release/servelab}"
[ -x "$BIN" ] || cargo build --release -q -p servelab

work="$(mktemp -d)"
trap 'kill "$sim" 2>/dev/null || true; rm -rf "$work"' EXIT
"$BIN" sim serve --port "$PORT" --ttft-ms 50 --itl-ms 10 >"$work/sim.log" 2>&1 &
sim=$!
sleep 1

"$BIN" scale local --shards "$SHARDS" --name digest --results "$work/r" --db "$work/s.db" -- \
  --base-url "http://127.0.0.1:$PORT" --num-prompts "$PROMPTS" --request-rate "$RATE" \
  --seed 5 --random-input-len 64 --random-output-len 64 --ignore-eos \
  --tokenizer cl100k_base >"$work/exact.txt" 2>"$work/exact.err"
"$BIN" runs merge-digests "$work/r" --label digest-sketched --db "$work/s.db" \
  >"$work/digest.txt" 2>"$work/digest.err"

python3 - "$work" <<'EOF'
import os, re, sys
work = sys.argv[1]
def figures(path):
    out = {}
    for line in open(path):
        m = re.match(r"^([A-Z][^:]*):\s+([-0-9.]+)\s*$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out
exact, digest = figures(f"{work}/exact.txt"), figures(f"{work}/digest.txt")
print(f"{'figure':44} {'records':>12} {'digests':>12} {'difference':>11}")
for k, v in exact.items():
    if k not in digest:
        continue
    d = digest[k]
    rel = "exact" if d == v else (f"{(d - v) / v * 100:+.2f} %" if v else f"{d - v:+.3f}")
    print(f"{k:44} {v:12.2f} {d:12.2f} {rel:>11}")
for line in open(f"{work}/digest.txt"):
    if "peak concurrency" in line or "rounded down" in line:
        print(line.strip())
sizes = {}
for f in sorted(os.listdir(f"{work}/r")):
    for kind in (".records.jsonl", ".digest.json"):
        if f.endswith(kind):
            sizes.setdefault(kind, []).append(os.path.getsize(f"{work}/r/{f}"))
for kind, v in sizes.items():
    print(f"{kind:16} per shard: {min(v):,} to {max(v):,} bytes")
EOF
