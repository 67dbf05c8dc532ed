"""GPUs on the local backend: refused when the machine has too few, one device set per task.

This machine has no GPU: ``SUBM_LOCAL_GPUS`` stands in for NVML's answer, as it does
for a user trying a GPU job's plan on a laptop. NVML itself degrades to "no GPU" here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import GPUS_HERE, run_json, subm, write_job
from submarine_py.gpus import local_gpu_ids, nvml_gpus

JOB = """
    name: gpus
    roles:
      worker:
        instances: 2
        resources: {{memory: 256 MiB, gpus: {gpus}}}
        command: echo "devices=[$CUDA_VISIBLE_DEVICES]"
      evaluator:
        resources: {{memory: 256 MiB}}
        command: echo "devices=[$CUDA_VISIBLE_DEVICES]"
"""


@pytest.mark.unit
def test_without_nvml_this_machine_has_no_gpu(monkeypatch):
    monkeypatch.delenv("SUBM_LOCAL_GPUS", raising=False)
    if nvml_gpus():
        pytest.skip(f"{GPUS_HERE}: this one has GPUs")
    assert local_gpu_ids() == []


@pytest.mark.local
def test_each_task_gets_its_own_devices_and_gpu_less_tasks_see_none(tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", JOB.format(gpus=1))
    rc, report, err = run_json("run", str(job), "--backend", "local", env={"SUBM_LOCAL_GPUS": "0,1"})
    no_leftovers.append(report["app_id"])
    assert rc == 0, err
    seen = {(t["role"], t["index"]): Path(t["log"]).read_text().splitlines()[-1] for t in report["tasks"]}
    assert sorted([seen[("worker", 0)], seen[("worker", 1)]]) == ["devices=[0]", "devices=[1]"]
    assert seen[("evaluator", 0)] == "devices=[]"  # hidden, as YARN's isolation hides them


@pytest.mark.local
def test_asking_for_more_gpus_than_the_machine_has_is_refused_before_anything_starts(tmp_path, subm_home):
    job = write_job(tmp_path / "job", JOB.format(gpus=2))
    rc, out, err = subm("run", str(job), "--backend", "local", env={"SUBM_LOCAL_GPUS": "2"})
    assert rc == 2
    assert "roles: the job needs 4 GPUs at once, this machine has 2" in err
    assert not list((subm_home / "local").glob("local_*"))
    rc, out, err = subm("run", str(job), "--backend", "local", env={"SUBM_LOCAL_GPUS": "0"})
    assert rc == 2 and "roles.worker.resources.gpus: 2 asked per task, this machine has 0" in err
