"""An elastic PyTorch job on the local backend trains through changes of its world size.

``tests/programs/elastic_allreduce.py`` all-reduces over gloo each step and checkpoints in the
job's shared folder, so every world resumes where the last one stopped. ``SUBM_LOCAL_GPUS``
stands in for a machine with three GPUs; a job's "containers" are its tasks' GPUs there
(the machine's GPU ledger, ``backends/local/gpu_ledger.py``).
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import List

import pytest

from conftest import REPO, run_json, wait_for, write_job
from submarine_py.backends.local.gpu_ledger import GpuLedger, ledger_path

pytestmark = [pytest.mark.local, pytest.mark.torch]

GPUS = {"SUBM_LOCAL_GPUS": "0,1,2"}
PROGRAM = REPO / "tests" / "programs" / "elastic_allreduce.py"

JOB = """\
    name: {name}
    framework: pytorch
    restart: {{policy: gang, max_restarts: 0}}
    timeouts: {{settle_seconds: {settle}, lost_after_seconds: 2}}
    files:
      elastic_allreduce.py: {program}
    roles:
      worker:
        instances: {{min: 2, max: 3}}
        resources: {{memory: 512 MiB, gpus: 1}}
        env: {{ELASTIC_STEPS: "{steps}", ELASTIC_STEP_SECONDS: "0.4", ELASTIC_FREEZE: "{freeze}"}}
        command: EXECUTOR_PID=$PPID python3 elastic_allreduce.py
"""


def submit(tmp_path: Path, name: str, steps: int, freeze: str = "", settle: float = 2) -> str:
    job = write_job(tmp_path / name, JOB.format(name=name, program=PROGRAM, steps=steps, freeze=freeze,
                                                settle=settle))
    rc, started, err = run_json("run", str(job), "--backend", "local", "--detach", env=GPUS)
    assert rc == 0, err
    return started["app_id"]


def worlds(subm_home: Path, app_id: str) -> List[int]:
    """The world sizes rank 0 (worker:0) trained with, in order (from its log)."""
    log = subm_home / "local" / app_id / "logs" / "worker-0.stdout"
    text = log.read_text() if log.exists() else ""
    return [int(n) for n in re.findall(r"training world=(\d+)", text)]


def log_of(subm_home: Path, app_id: str) -> str:
    return (subm_home / "local" / app_id / "logs" / "worker-0.stdout").read_text()


def am_log(subm_home: Path, app_id: str) -> str:
    return (subm_home / "local" / app_id / "am.log").read_text()


def test_an_elastic_job_starts_with_min_while_a_gpu_is_taken_and_grows_when_it_is_free(
        tmp_path, subm_home, no_leftovers):
    # Another holder has one of the three GPUs: only min (2) of the job's tasks fit.
    blocker = GpuLedger(ledger_path(str(subm_home)), ["0", "1", "2"], "someone-else", pid=os.getpid())
    assert blocker.reserve({"other:0": 1}, time.time() - 60).granted
    app_id = submit(tmp_path, "grow", steps=30)
    no_leftovers.append(app_id)
    wait_for(lambda: worlds(subm_home, app_id) == [2] and "step=3 " in log_of(subm_home, app_id), 120,
             "the job to train with its min of 2 tasks", explain=lambda: am_log(subm_home, app_id))
    rc, status, _ = run_json("status", app_id, env=GPUS)
    assert status["world_sizes"] == [2], status
    assert "worker:2 would grow the world but waits: waiting for 1 GPU: 0 free on this machine" \
        in am_log(subm_home, app_id)
    blocker.release()  # the GPU comes back: the job grows
    rc, report, err = run_json("wait", app_id, env=GPUS, timeout=180)
    assert rc == 0 and report["state"] == "SUCCEEDED", (report, am_log(subm_home, app_id))
    assert report["world_sizes"] == [2, 3] and report["attempts"] == 2
    assert report["restarts_by_cause"]["resized"] == 1 and report["restarts_by_cause"]["failed"] == 0
    text = log_of(subm_home, app_id)
    resumed = int(re.search(r"training world=3 from step=(\d+)", text).group(1))
    assert resumed >= 3, text  # from its checkpoint, not from the beginning
    assert "step=30 world=3 rank=0 sum=3" in text
    log = am_log(subm_home, app_id)
    assert "worker:2 fits: asking for its container (growing toward 3 task(s))" in log
    assert "growing the world from 2 to 3 task(s)" in log


def test_an_elastic_job_that_loses_a_task_goes_on_with_fewer(tmp_path, subm_home, no_leftovers):
    # worker:2's executor freezes (as silent as a dead machine) and its program dies at step 4:
    # its peers' all-reduce fails at once, the AM finds the executor lost 2 s later. Its GPU is
    # free again at once, so the replacement grows the world back after settle_seconds: 8 s, for
    # the world of 2 to import torch and train on a loaded machine first (with 2 s it once did not).
    app_id = submit(tmp_path, "shrink", steps=24, freeze="2:4", settle=8)
    no_leftovers.append(app_id)
    rc, report, err = run_json("wait", app_id, env=GPUS, timeout=240)
    log = am_log(subm_home, app_id)
    assert rc == 0 and report["state"] == "SUCCEEDED", (report, log)
    assert report["world_sizes"][:2] == [3, 2], log
    counts = report["restarts_by_cause"]
    assert counts["failed"] == 0 and counts["node_lost"] == 0 and counts["resized"] >= 1, counts
    assert "worker:2 was lost with its node (attempt 1)" in log
    assert "came of that loss: no restart spent for it" in log
    assert "shrinking the world from 3 to 2 task(s) (at least 2 of worker remain)" in log
    text = log_of(subm_home, app_id)
    resumed = int(re.search(r"training world=2 from step=(\d+)", text).group(1))
    assert resumed >= 4, text
    assert "step=24 world=" in text
