"""Tasks of several processes, and torchrun inside tasks, on the real YARN rig.

The programs are those of the local tests (``test_a_task_of_several_processes_is_one_task.py``,
``test_torchrun_runs_inside_a_task.py``); here each task is a YARN container whose executor
starts the task's processes, copies their stderr into the container's log and stops them all.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_a_task_of_several_processes_is_one_task_on_yarn.py
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List

import pytest

from conftest import require_yarn, run_json, subm, write_job

require_yarn()

from test_a_task_of_several_processes_is_one_task import ALL_REDUCE, FAILS_ONCE  # noqa: E402
from test_torchrun_runs_inside_a_task import TORCHRUN, WORKER  # noqa: E402
from test_jobs_run_end_to_end_on_yarn import YARN, apps  # noqa: E402,F401 (apps: a fixture)

pytestmark = pytest.mark.yarn


def run_on_yarn(job: Path, apps: List[str], timeout: float = 300):
    rc, report, err = run_json("run", str(job), "--backend", "yarn", "--quiet", env=YARN, timeout=timeout)
    apps.append(report.get("app_id"))
    return rc, report, err


def task_log(app_id: str, index: int) -> str:
    """The task's stdout and stderr as ``subm logs`` shows them."""
    rc, out, err = subm("logs", app_id, "--role", "worker", "--index", str(index), env=YARN, timeout=60)
    assert rc == 0, err
    return out


@pytest.mark.torch
def test_two_containers_of_two_processes_each_all_reduce_over_gloo_on_yarn(tmp_path, apps):
    job = write_job(tmp_path / "job", """\
        name: two-by-two
        framework: pytorch
        roles:
          worker:
            instances: 2
            processes: 2
            resources: {memory: 1 GiB, vcores: 1}
            command: python all_reduce.py
            env: {OMP_NUM_THREADS: "1"}
        files: {all_reduce.py: all_reduce.py}
    """, {"all_reduce.py": ALL_REDUCE})
    rc, report, err = run_on_yarn(job, apps)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    ranks = []
    for index in (0, 1):
        log = task_log(report["app_id"], index)
        envs = [json.loads(line[line.index("env ") + 4:]) for line in log.splitlines() if "env {" in line]
        assert sorted(e["LOCAL_RANK"] for e in envs) == ["0", "1"] and log.count("of 4: sum 6") == 2, log
        ranks += [int(e["RANK"]) for e in envs]
    assert sorted(ranks) == [0, 1, 2, 3]


def test_a_failed_local_rank_restarts_the_gang_in_the_same_containers_on_yarn(tmp_path, shared_tmp_path, apps):
    shared = shared_tmp_path / "nfs"  # the program remembers its first failure in SUBM_SHARED_DIR
    shared.mkdir()
    job = write_job(tmp_path / "job", f"""\
        name: fails-once
        framework: pytorch
        shared_dir: {shared}
        restart: {{policy: gang, max_restarts: 1}}
        roles:
          worker:
            instances: 2
            processes: 2
            resources: {{memory: 512 MiB, vcores: 1}}
            command: python fails_once.py
        files: {{fails_once.py: fails_once.py}}
    """, {"fails_once.py": FAILS_ONCE})
    rc, report, err = run_on_yarn(job, apps)
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, f"{report}\n{err}"
    rc, am_log, err = subm("logs", report["app_id"], env=YARN, timeout=60)
    assert rc == 0, err
    assert "worker:0 (local rank 1) failed with exit code 1 (attempt 1)" in am_log, am_log[-3000:]
    assert "; error: ValueError: loss is nan in local rank 1" in am_log
    assert task_log(report["app_id"], 1).count("attempt 1 done") == 2


@pytest.mark.torch
def test_torchrun_inside_each_of_two_containers_binds_the_held_port_on_yarn(tmp_path, apps):
    job = write_job(tmp_path / "job", f"""\
        name: torchrun-inside
        framework: pytorch
        roles:
          worker:
            instances: 2
            resources: {{memory: 2 GiB, vcores: 2}}
            command: {TORCHRUN}
            env: {{OMP_NUM_THREADS: "1"}}
        files: {{worker.py: worker.py}}
    """, {"worker.py": WORKER})
    rc, report, err = run_on_yarn(job, apps)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    ranks = []
    for index in (0, 1):
        log = task_log(report["app_id"], index)
        envs = [json.loads(line[line.index("env ") + 4:]) for line in log.splitlines() if "env {" in line]
        assert {e["GROUP_RANK"] for e in envs} == {str(index)} and log.count("of 4: sum 6") == 2, log
        ranks += [int(e["RANK"]) for e in envs]
    assert sorted(ranks) == [0, 1, 2, 3]
    assert re.search(r"^\d+$", envs[0]["MASTER_PORT"])
