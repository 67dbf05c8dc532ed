#!/usr/bin/env bash
# Install submarine-py (with PyTorch) into .venv and run the DDP example on this machine.
#
#   bash scripts/example.sh                     # 2 workers, 5 epochs, local backend
#   bash scripts/example.sh --set epochs=10     # extra arguments go to `subm run`
#   bash scripts/example.sh --set crash_once_at=2   # a worker fails once; the gang restarts and resumes
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Into the project's virtualenv (.venv; Debian's own python3 refuses `pip install`).
. scripts/venv.sh
subm_venv torch
subm=(subm)
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
rc=0
"${subm[@]}" run examples/pytorch-ddp/job.yaml --backend local "$@" || rc=$?

# Show what rank 0 printed: the loss per epoch (the newest local job, if this run made it).
job_dir=$(ls -td "${SUBM_HOME:-$HOME/.submarine}"/local/local_* 2>/dev/null | head -n1)
if [ -n "$job_dir" ] && [ "$job_dir" -nt "$stamp" ] && [ -f "$job_dir/logs/worker-0.stdout" ]; then
    echo "--- $job_dir/logs/worker-0.stdout"
    cat "$job_dir/logs/worker-0.stdout"
fi
exit "$rc"
