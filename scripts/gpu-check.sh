#!/usr/bin/env bash
# The gpu tests (tests/test_jobs_use_a_real_gpu.py) and the local GPU tests beside them, on a
# machine with an NVIDIA GPU and a Python that has a CUDA build of PyTorch (and pytest, click,
# jinja2, pyyaml, requests, pyarrow, nvidia-ml-py; pytorch-lightning for the Lightning test).
# It installs nothing and needs no network: GPU machines often have such a Python already, and
# CI has no GPU (there the gpu tests skip).
#
#   bash scripts/gpu-check.sh                 # PYTHON=... to name another interpreter
#   bash scripts/gpu-check.sh -k lightning    # arguments go to pytest
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
say() { echo "gpu-check: $*" >&2; }

nvidia-smi -L || { say "no NVIDIA GPU here (nvidia-smi lists none)"; exit 1; }
"$PY" - <<'PY' || { say "$PY lacks what the tests need (above)"; exit 1; }
import click, jinja2, pyarrow, pynvml, pytest, requests, yaml
import torch
assert torch.cuda.is_available(), "torch %s sees no CUDA device" % torch.__version__
print("gpu-check: torch", torch.__version__, "on", torch.cuda.get_device_name(0))
PY
export PYTHONUNBUFFERED=1
"$PY" -m pytest -p no:cacheprovider -ra tests/test_jobs_use_a_real_gpu.py \
    tests/test_gpus_are_given_per_task.py tests/test_local_jobs_take_turns_on_the_machines_gpus.py \
    tests/test_gpu_sampling_without_nvml.py "$@"
