#!/usr/bin/env bash
# A lab run whole and as SHARDS local shards (docs/scale.md, "Labs shard profile run by
# profile run"): the same experiment, the same simulated engines (TTFT 50 ms, ITL 10 ms, 256
# slots: the figures any truthful client should read), and what each way measured.
#
# Prints per trial and profile: the merged run's requests, TTFT p99 and TPOT mean against the
# 50 / 10 ms the engine was told to produce, total tokens/s, and the engine's own count of
# generated tokens (its /metrics: both shards' requests in one figure); then each lab's wall
# time (a sharded lab adds, per launch, the arrival barrier and a 2 s lead, and per profile run
# the exchange of end files and a 2 s lead).
#
#   scripts/lab-shards.sh            STREAMS (200), PROMPTS (600), SHARDS (2), BIN (a servelab
#                                    binary; default: this tree's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p servelab
  BIN=target/release/servelab
fi
BIN=$(realpath "$BIN")
STREAMS=${STREAMS:-200}; PROMPTS=${PROMPTS:-600}; SHARDS=${SHARDS:-2}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
cat >"$OUT/exp.yaml" <<EOF
name: lab-shards
strategy: greedy
engines:
  - {name: sim, command: '{servelab} sim serve --port {port} --ttft-ms 50 --itl-ms 10 --max-num-seqs 256', ready_timeout_secs: 60, stop_grace_secs: 5}
profiles:
  - {name: chat, dataset_name: random, random_input_len: 128, random_output_len: 100, ignore_eos: true, num_prompts: $PROMPTS, max_concurrency: $STREAMS, seed: 1, tokenizer: cl100k_base}
options:
  fewer-slots: --max-num-seqs 32
EOF
report() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys, glob
how, d = sys.argv[1:]
for f in sorted(glob.glob(os.path.join(d, "*", "trial.json"))):
    t = json.load(open(f))
    for p in t["profiles"]:
        print(f"{how:<10} {t['spec']['id']:<16} {p['profile']:<6} {p['completed']:>5}/{p['failed']:<3} "
              f"{p['ttft_p99_ms']:>10.2f} {p['tpot_mean_ms']:>10.3f} {p['total_tokens_per_s']:>10.0f} "
              f"{p['engine'].get('generation_tokens') or 0:>10.0f}")
PY
}
printf '%-10s %-16s %-6s %9s %10s %10s %10s %10s\n' lab trial prof ok/fail ttft_p99 tpot_mean tok_per_s engine_gen
T0=$(date +%s.%N)
$BIN lab run "$OUT/exp.yaml" --output-dir "$OUT/whole" --no-store >/dev/null 2>"$OUT/whole.log"
T1=$(date +%s.%N)
report whole "$OUT/whole"
START=$(python3 -c "import time; print(f'{time.time() + 2:.3f}')")
PIDS=()
for k in $(seq 0 $((SHARDS - 1))); do
  $BIN lab run "$OUT/exp.yaml" --output-dir "$OUT/sharded" --shard "$k/$SHARDS" --start-at "$START" \
    >/dev/null 2>"$OUT/shard-$k.log" &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait "$p" || { cat "$OUT"/shard-*.log; exit 1; }; done
T2=$(date +%s.%N)
report "$SHARDS-shards" "$OUT/sharded"
python3 -c "print(f'wall: whole {$T1 - $T0:.1f} s, $SHARDS shards {$T2 - $T1:.1f} s (from 2 s before their start)')"
