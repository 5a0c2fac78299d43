#!/bin/bash
# servelab: 4 shards of a lab (docs/scale.md): shard 0 launches the engines,
# writes the lab's report to $results and stores its runs in $results/servelab.db.
#   sbatch THIS_FILE
#SBATCH --job-name=vllm-lab
#SBATCH --ntasks=4
#SBATCH --cpus-per-task=4
#SBATCH --nodes=4
#SBATCH --output=vllm-lab-%j.out
set -euo pipefail
results="${SERVELAB_RESULTS:-$PWD/vllm-lab-$SLURM_JOB_ID}"
mkdir -p "$results"
# One time zero for every task, read once here: 60 s for srun to place them.
start_at=$(( $(date +%s) + 60 ))
rc=0
srun --ntasks=4 --cpus-per-task=4 servelab \
    lab run experiments/vllm-h100.yaml \
    --start-at "$start_at" \
    --output-dir "$results" \
    --db "$results/servelab.db" || rc=$?
echo "lab report: $results/report.md (runs stored in $results/servelab.db)"
exit "$rc"
