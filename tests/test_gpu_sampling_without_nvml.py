"""GPU sampling in real executors on a machine without NVML: off, silently.

``SUBM_LOCAL_GPUS`` hands tasks device ids that NVML cannot find here; the executor
tries NVML (ctypes), finds no library, and the task runs as if nothing happened.
"""
from __future__ import annotations

import pytest

from conftest import GPUS_HERE, run_json, write_job
from submarine_py.gpus import nvml_gpus

JOB = """
    name: gpu-sampling
    roles:
      worker:
        instances: 1
        resources: {memory: 256 MiB, gpus: 1}
        command: python -c "import time; time.sleep(2); print('trained on', '$CUDA_VISIBLE_DEVICES')"
"""


@pytest.mark.local
def test_without_nvml_a_gpu_task_runs_unsampled_and_undisturbed(tmp_path, subm_home, no_leftovers):
    if nvml_gpus():
        pytest.skip(f"{GPUS_HERE}: this one has NVML and GPUs")
    job = write_job(tmp_path, JOB)
    rc, report, err = run_json("run", str(job), "--backend", "local",
                               env={"SUBM_LOCAL_GPUS": "1", "SUBM_GPU_SAMPLE_SECONDS": "0.5"})
    no_leftovers.append(report["app_id"])
    assert rc == 0, err
    assert report["tasks"][0]["gpu"] is None
    logs = subm_home / "local" / report["app_id"] / "logs"
    assert "trained on 0" in (logs / "worker-0.stdout").read_text()
    stderr = (logs / "worker-0.stderr").read_text()
    assert "nvml" not in stderr.lower() and "Traceback" not in stderr
