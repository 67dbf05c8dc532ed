"""Programs written for torchrun run unchanged as tasks: a PyTorch Lightning DDP program
(``Trainer(num_nodes=N, devices=P, strategy="ddp")``, examples/pytorch-lightning) and a Hugging
Face Accelerate program (tests/programs/accelerate_fit.py), on one task per node with one
process, and on tasks with several processes; Lightning resumes from its checkpoint after a
gang restart. Both libraries find their ranks only in the variables torchrun sets."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List

import pytest

from conftest import REPO, job_dirs, run_json, write_job

pytestmark = [pytest.mark.local, pytest.mark.torch]
pytest.importorskip("torch", reason="the programs train with PyTorch")

LIGHTNING_JOB = REPO / "examples" / "pytorch-lightning" / "job.yaml"
ACCELERATE_PROGRAM = REPO / "tests" / "programs" / "accelerate_fit.py"
#: One process's result line. A task's processes share its stdout, and with PYTHONUNBUFFERED (YARN
#: sets it) a print is two writes, so another process's line can land between a line and its "\n".
RESULT = re.compile(r"\{[^{}]*\}")
#: The Accelerate jobs' restart policy. torch 2.13's gloo sometimes aborts a process as its
#: interpreter exits, after every rank has printed its result and destroyed the process group
#: ("terminate called without an active exception", "Fatal Python error: Aborted" with no Python
#: frame): 4 of 70 runs of the 2x2 job on this 2-core machine with two busy loops beside it, against
#: 0 of 160 runs of the same four processes started by a plain script with the same variables (also
#: shaped like the executor's: sh -c, a shared stdout file, stderr pipes, staggered tasks), and 0 of
#: 15 under two torchruns. Why an AM and executors beside them make it likelier is not found yet
#: (docs/processes.md). torchrun reports such a worker as failed too
#: (exit -6); what a user sets against it is a restart, so the jobs do, and the tests read the
#: last attempt. A program that fails for real fails both attempts.
RESTART_ON_TEARDOWN_ABORT = "restart: {max_restarts: 1}"
#: An epoch line, read wherever it landed for the same reason.
EPOCH_LINE = re.compile(r"epoch (\d+) rank (\d+)/(\d+) node (\d+) local (\d+) loss ")


def lightning(*sets: str, timeout: float = 400):
    pytest.importorskip("pytorch_lightning", reason="the example is a Lightning program")
    args: List[str] = []
    for s in sets:
        args += ["--set", s]
    return run_json("run", str(LIGHTNING_JOB), "--backend", "local", "--quiet", *args, timeout=timeout)


def stdout_of(home: Path, task: str) -> str:
    (job_dir,) = job_dirs(home)
    return (job_dir / "logs" / f"{task}.stdout").read_text()


def last_attempt(text: str) -> str:
    """A task's stdout from its last attempt's ``[subm] job=...`` line on."""
    return text[text.rfind("[subm] job="):]


def epochs(text: str):
    """{(epoch, rank, world, node, local)} printed by the example's Report callback."""
    return {tuple(int(g) for g in m.groups()) for m in EPOCH_LINE.finditer(text)}


def test_lightning_num_nodes_2_runs_as_two_one_process_tasks_and_resumes_after_a_gang_restart(subm_home):
    rc, report, err = lightning("epochs=3", "fail_once_at=1")
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    out0, out1 = stdout_of(subm_home, "worker-0"), stdout_of(subm_home, "worker-1")
    (job_dir,) = job_dirs(subm_home)
    assert "injected failure at epoch 1 on rank 1" in (job_dir / "logs" / "worker-1.stderr").read_text()
    # Each task is one node of one process: Lightning sees ranks 0 and 1 on nodes 0 and 1.
    assert (2, 0, 2, 0, 0) in epochs(out0) and (2, 1, 2, 1, 0) in epochs(out1)
    # Attempt 2 resumed from the last checkpoint: epoch 0 was not trained again after the restart.
    attempt2 = out0[out0.rindex("[subm] job="):]
    assert "resuming from" in attempt2 and not any(e[0] == 0 for e in epochs(attempt2))


def test_lightning_devices_2_runs_as_one_task_of_two_processes(subm_home):
    rc, report, err = lightning("nodes=1", "processes=2", "epochs=2")
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert [(t["role"], t["index"], t["state"]) for t in report["tasks"]] == [("worker", 0, "SUCCEEDED")]
    assert {(1, 0, 2, 0, 0), (1, 1, 2, 0, 1)} <= epochs(stdout_of(subm_home, "worker-0"))


@pytest.mark.parametrize("instances,processes", [(2, 1), (2, 2)], ids=["2x1", "2x2"])
def test_an_accelerate_program_finds_every_process(tmp_path, subm_home, instances, processes):
    pytest.importorskip("accelerate", reason="the program uses Hugging Face Accelerate")
    job = write_job(tmp_path / "job", f"""\
        name: accelerate-fit
        framework: pytorch
        roles:
          worker:
            instances: {instances}
            processes: {processes}
            resources: {{memory: 1 GiB}}
            command: python accelerate_fit.py
            env: {{OMP_NUM_THREADS: "1"}}
        {RESTART_ON_TEARDOWN_ABORT}
        files:
          accelerate_fit.py: {ACCELERATE_PROGRAM}
        """)
    rc, report, err = run_json("run", str(job), "--backend", "local", "--quiet", timeout=300)
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    lines = [json.loads(found) for i in range(instances)
             for found in RESULT.findall(last_attempt(stdout_of(subm_home, f"worker-{i}")))]
    world = instances * processes
    assert sorted(r["process_index"] for r in lines) == list(range(world))
    assert {(r["num_processes"], r["distributed"], r["reduced"]) for r in lines} == {(world, "MULTI_CPU", float(world))}
    assert sorted((int(r["node_rank"]), r["local_process_index"]) for r in lines) == \
        [(n, p) for n in range(instances) for p in range(processes)]
