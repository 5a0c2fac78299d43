#!/usr/bin/env bash
# Times `servelab predict` on a 16-point sweep (3000:150 and 1000:1000 x concurrency 1..128,
# 500 requests per point) of an engine file, and prints wall time and peak memory (the peak
# resident set of the command, from getrusage, so no /usr/bin/time is needed). The whole
# command is timed: engine file, workload lengths, the engine model, metrics, every file a
# sweep writes (tables, CSV, JSON, point files, SVG charts). Exits 1 above the issue's 10 s.
#   scripts/predict-speed.sh [examples/engines/qwen3-32b-h20-tp4.yaml]
# Builds servelab in release mode first (several minutes the first time); SERVELAB_BIN=PATH
# times that binary instead, without building.
set -euo pipefail
cd "$(dirname "$0")/.."
engine="${1:-examples/engines/qwen3-32b-h20-tp4.yaml}"
limit_s=10
if [ -n "${SERVELAB_BIN:-}" ]; then
  bin="$SERVELAB_BIN"
else
  cargo build --release -q -p servelab
  bin="${CARGO_TARGET_DIR:-target}/release/servelab"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
args=(predict --engine "$engine" --concurrency 1,2,4,8,16,32,64,128
      --scenario 3000:150 --scenario 1000:1000 --min-prompts 500 --max-prompts 500
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
