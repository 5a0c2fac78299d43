#!/usr/bin/env bash
# Times `servelab predict` on a sweep of an engine file and prints wall time and peak memory
# (the peak resident set of the command, from getrusage, so no /usr/bin/time is needed). The
# whole command is timed: engine file, workload lengths, the engine model, metrics, every file
# a sweep writes (tables, CSV, JSON, point files, SVG charts). Two sizes, issue 24's targets:
#   16 points (default): 3000:150 and 1000:1000 x concurrency 1..128 (8 levels), under 2 s;
#   128 points (POINTS=128): 8 ISL:OSL scenarios x 16 levels (1..256), under 20 s;
# 500 requests per point. Exits 1 above the target.
#   [POINTS=128] scripts/predict-speed.sh [examples/engines/qwen3-32b-h20-tp4.yaml]
# Builds servelab in release mode first (several minutes the first time); SERVELAB_BIN=PATH
# times that binary instead, without building.
set -euo pipefail
cd "$(dirname "$0")/.."
engine="${1:-examples/engines/qwen3-32b-h20-tp4.yaml}"
points="${POINTS:-16}"
case "$points" in
  16) limit_s=2
      sweep=(--concurrency 1,2,4,8,16,32,64,128 --scenario 3000:150 --scenario 1000:1000) ;;
  128) limit_s=20
      sweep=(--concurrency 1,2,3,4,6,8,12,16,24,32,48,64,96,128,192,256
             --scenario 128:128 --scenario 512:128 --scenario 1000:1000 --scenario 2000:500
             --scenario 3000:150 --scenario 4000:1000 --scenario 8000:200 --scenario 200:2000) ;;
  *) echo "POINTS is 16 or 128, not $points" >&2; exit 2 ;;
esac
if [ -n "${SERVELAB_BIN:-}" ]; then
  bin="$SERVELAB_BIN"
else
  cargo build --release -q -p servelab
  bin="${CARGO_TARGET_DIR:-target}/release/servelab"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
args=(predict --engine "$engine" "${sweep[@]}" --min-prompts 500 --max-prompts 500
      --no-store --output-dir "$out/sweep")
# Runs the command with its output in files; prints "WALL_S PEAK_RSS_MB EXIT_CODE".
read -r wall rss code < <(python3 - "$out" "$bin" "${args[@]}" <<'PY'
import resource, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
with open(f"{out}/stdout", "wb") as o, open(f"{out}/stderr", "wb") as e:
    code = subprocess.run(cmd, stdout=o, stderr=e).returncode
wall = time.monotonic() - t0
# Linux reports ru_maxrss in KiB: the largest child waited for, here the one command.
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{wall:.2f} {rss:.0f} {code}")
PY
)
if [ "$code" != 0 ]; then
  echo "servelab predict failed (exit $code):" >&2
  tail -20 "$out/stderr" >&2
  exit 2
fi
echo "wall: ${wall} s, peak RSS: ${rss} MB, points: $(find "$out/sweep/points" -name '*.json' | wc -l)"
if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= $limit_s else 1)" "$wall"; then
  echo "ok: under ${limit_s} s"
else
  echo "too slow: ${wall} s is above ${limit_s} s" >&2
  exit 1
fi
