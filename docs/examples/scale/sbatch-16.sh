#!/bin/bash
# servelab: 16 shards of one run, merged as 'llama-70b-rate-200' (docs/scale.md).
#   sbatch THIS_FILE
#SBATCH --job-name=llama-rate-200
#SBATCH --ntasks=16
#SBATCH --cpus-per-task=2
#SBATCH --nodes=4
#SBATCH --output=llama-rate-200-%j.out
set -euo pipefail
results="${SERVELAB_RESULTS:-$PWD/llama-rate-200-$SLURM_JOB_ID}"
mkdir -p "$results"
# One time zero for every task, read once here: 60 s for srun to place them.
start_at=$(( $(date +%s) + 60 ))
srun --ntasks=16 --cpus-per-task=2 servelab \
    bench \
    --base-url http://llm-d-gateway.llm.svc:80 \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --dataset-name random \
    --random-input-len 1024 \
    --random-output-len 256 \
    --num-prompts 60000 \
    --request-rate 200 \
    --max-concurrency 16000 \
    --seed 17 \
    --start-at "$start_at" \
    --save-result \
    --save-detailed \
    --no-store \
    --no-progress \
    --result-dir "$results" \
    --result-filename run.json
# Every task has ended; a shared filesystem may show another node's files late.
n=16
deadline=$(( $(date +%s) + 300 ))
while :; do
  names=$(ls "$results" 2>/dev/null || true)
  missing=""
  k=0
  while [ "$k" -lt "$n" ]; do
    grep -qE "^run-shard-0*$k-of-$n\.json\$" <<EOF || missing="$missing $k"
$names
EOF
    k=$((k + 1))
  done
  [ -z "$missing" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "no result in $results after 300 s from shards$missing (of $n): see their logs" >&2
    exit 2
  fi
  echo "waiting for shards$missing (of $n)"
  sleep 10
done
servelab runs merge "$results" --label llama-70b-rate-200 --db "$results/servelab.db"
