"""The Lightning and Accelerate programs of test_lightning_and_accelerate_programs_run_unchanged.py
on the real YARN rig: a task per node (three nodes), tasks of two processes, and Lightning
resuming from its checkpoint (in the job's shared folder) after a gang restart.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_lightning_and_accelerate_programs_run_unchanged_on_yarn.py
"""
from __future__ import annotations

import json

import pytest

from conftest import REPO, write_job
from test_jobs_run_end_to_end_on_yarn import apps, run_job, subm, YARN  # noqa: F401
from test_lightning_and_accelerate_programs_run_unchanged import (
    ACCELERATE_PROGRAM, RESTART_ON_TEARDOWN_ABORT, RESULT, epochs)

pytestmark = [pytest.mark.yarn, pytest.mark.torch]
pytest.importorskip("torch", reason="the programs train with PyTorch")


def task_stdout(app_id: str, index: int, attempt: int = 0) -> str:
    """What `subm logs` prints of a worker: its stdout and stderr, of every attempt or of ``attempt``."""
    only = ("--attempt", str(attempt)) if attempt else ()
    rc, out, err = subm("logs", app_id, "--role", "worker", "--index", str(index), *only, env=YARN, timeout=60)
    assert rc == 0, err
    return out


def lightning_job(tmp_path, shared_tmp_path):
    """The example, with its checkpoints in a shared folder every node sees."""
    example = (REPO / "examples" / "pytorch-lightning" / "job.yaml").read_text()
    shared = shared_tmp_path / "nfs"
    shared.mkdir()
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text((REPO / "examples" / "pytorch-lightning" / "train.py").read_text())
    job = tmp_path / "job" / "job.yaml"
    job.write_text(example + f"shared_dir: {shared}\n")
    return job


def test_lightning_on_three_nodes_resumes_after_a_gang_restart_on_yarn(tmp_path, shared_tmp_path, apps):
    pytest.importorskip("pytorch_lightning")
    job = lightning_job(tmp_path, shared_tmp_path)
    rc, report, err = run_job(job, timeout=420, nodes=3, epochs=3, fail_once_at=1)
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    outs = [task_stdout(report["app_id"], i) for i in range(3)]
    for node, out in enumerate(outs):
        assert (2, node, 3, node, 0) in epochs(out), out[-2000:]
    assert "resuming from" in outs[0]


def test_lightning_with_two_processes_per_task_on_yarn(tmp_path, shared_tmp_path, apps):
    pytest.importorskip("pytorch_lightning")
    job = lightning_job(tmp_path, shared_tmp_path)
    rc, report, err = run_job(job, timeout=420, nodes=2, processes=2, epochs=2)
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    found = set()
    for i in range(2):
        found |= epochs(task_stdout(report["app_id"], i))
    assert {(1, r, 4, r // 2, r % 2) for r in range(4)} <= found


def test_an_accelerate_program_with_two_processes_per_task_on_yarn(tmp_path, apps):
    pytest.importorskip("accelerate")
    job = write_job(tmp_path / "job", f"""\
        name: accelerate-fit
        framework: pytorch
        roles:
          worker:
            instances: 2
            processes: 2
            resources: {{memory: 1 GiB}}
            command: python accelerate_fit.py
            env: {{OMP_NUM_THREADS: "1"}}
        {RESTART_ON_TEARDOWN_ABORT}
        files:
          accelerate_fit.py: {ACCELERATE_PROGRAM}
        """)
    rc, report, err = run_job(job, timeout=300)
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    lines = [json.loads(found) for i in range(2)
             for found in RESULT.findall(task_stdout(report["app_id"], i, attempt=report["attempts"]))]
    assert sorted(r["process_index"] for r in lines) == [0, 1, 2, 3]
    assert {r["num_processes"] for r in lines} == {4}
