"""A task of several processes (torchrun's ``--nproc_per_node``) on the local backend.

The executor starts the task's command once per local rank, each with the environment the AM
built for it, and treats them as one task: the first that fails is the task's failure (named by
its local rank, its own stderr quoted), the others are stopped, the restart policy decides; the
task succeeds when every process has exited 0; stopping the task stops them all.

The AM runs in this process with the local backend's real executors (``several_processes.py``),
on plans whose tasks are given their processes here. The tests through ``subm run`` at the end
need job files to say ``processes`` themselves, and skip until they can.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import processes_of, run_json, subm, wait_for, write_job
from submarine_py.jobfile import spec_from_dict
from several_processes import InProcessJob, pids_with, plan_with_processes, tasks_by_id

#: Each process prints its environment and takes part in one all_reduce over gloo (world 4).
ALL_REDUCE = """\
import json, os
import torch
import torch.distributed as dist

names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SUBM_INDEX")
print("env " + json.dumps({k: os.environ.get(k) for k in names}), flush=True)
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {value.item():g}", flush=True)
dist.destroy_process_group()
"""

#: Attempt 1: local rank 1 of worker 0 fails once every process has started; its sibling writes
#: to stderr meanwhile (its lines must not be quoted as the failure's). Attempt 2 succeeds.
FAILS_ONCE = """\
import os, pathlib, signal, sys, time

local, index, attempt = os.environ["LOCAL_RANK"], os.environ["SUBM_INDEX"], int(os.environ["SUBM_ATTEMPT"])
shared = pathlib.Path(os.environ["SUBM_SHARED_DIR"])
me = f"{index}-{local}-{attempt}"

def on_term(signum, frame):
    (shared / f"stopped-{me}").touch()
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)
(shared / f"started-{me}").touch()
if attempt > 0:
    shm = os.statvfs("/dev/shm")
    where = f" in a container, /dev/shm {shm.f_blocks * shm.f_frsize >> 20} MiB" \
        if os.path.exists("/.dockerenv") else ""
    print(f"worker {index} local rank {local}: attempt {attempt} done{where}", flush=True)
    sys.exit(0)
if (index, local) == ("0", "1"):
    while len(list(shared.glob("started-*-0"))) < 4:
        time.sleep(0.02)
    print("local rank 1 about to fail", file=sys.stderr, flush=True)
    raise ValueError("loss is nan in local rank 1")
while True:
    print(f"local rank {local} of worker {index} is fine", file=sys.stderr, flush=True)
    time.sleep(0.05)
"""


def pytorch_workers(command: str, script: str, **extra) -> dict:
    return {"name": "procs", "framework": "pytorch", "files": {"task.py": script},
            "roles": {"worker": {"instances": 2, "command": command, "resources": {"memory": "512 MiB"}}},
            **extra}


@pytest.fixture
def several(monkeypatch, subm_home, tmp_path):
    """``several(spec, processes)``: an :class:`InProcessJob` of ``spec`` (its ``files`` sources
    are names of scripts given in ``scripts``)."""

    def make(spec: dict, processes: int, scripts: dict) -> InProcessJob:
        for name, text in scripts.items():
            (tmp_path / name).write_text(text)
        return InProcessJob(plan_with_processes(spec, processes, tmp_path), subm_home)

    return make


@pytest.mark.local
@pytest.mark.torch
def test_two_tasks_of_two_processes_each_all_reduce_over_gloo_as_a_world_of_four(several, no_leftovers):
    job = several(pytorch_workers("python task.py", "all_reduce.py"), 2, {"all_reduce.py": ALL_REDUCE})
    no_leftovers.append(job.job_id)
    report = job.run()
    assert report.state == "SUCCEEDED" and report.attempts == 1, report.diagnostics
    ranks = {}
    for task in ("worker:0", "worker:1"):
        out = job.log(task)
        envs = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("env ")]
        # Both processes wrote to the task's one stdout, each with its own local rank.
        assert sorted(e["LOCAL_RANK"] for e in envs) == ["0", "1"], out
        assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["SUBM_INDEX"]) for e in envs} == \
            {("4", "2", task[-1])}
        ranks[task] = sorted(int(e["RANK"]) for e in envs)
        assert out.count("of 4: sum 6") == 2, out  # 0 + 1 + 2 + 3, seen by every rank
        master = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}
        assert master == {tuple(report.cluster_spec["worker"][0].rsplit(":", 1))}
    assert ranks == {"worker:0": [0, 1], "worker:1": [2, 3]}


@pytest.mark.local
def test_a_failed_local_rank_fails_its_task_stops_its_sibling_and_the_gang_restarts(several, no_leftovers):
    spec = pytorch_workers("python task.py", "fails_once.py", restart={"policy": "gang", "max_restarts": 1},
                           timeouts={"stop_grace_seconds": 5})
    job = several(spec, 2, {"fails_once.py": FAILS_ONCE})
    no_leftovers.append(job.job_id)
    report = job.run()
    assert report.state == "SUCCEEDED" and report.attempts == 2, report.diagnostics
    events = [e.message for e in report.events]
    [failed] = [e for e in events if e.startswith("worker:") and " failed with " in e]
    # The AM names the process that failed, and quotes its stderr, not its sibling's.
    assert failed.startswith("worker:0 (local rank 1) failed with exit code 1 (attempt 1)"), failed
    assert "; error: ValueError: loss is nan in local rank 1 (File " in failed, failed
    assert any(e.startswith("restarting the gang: attempt 2") for e in events), events
    shared = job.shared
    # Its sibling got SIGTERM at once (it exits on it), and so did the other task's processes.
    assert sorted(p.name for p in shared.glob("stopped-*")) == ["stopped-0-0-0", "stopped-1-0-0", "stopped-1-1-0"]
    assert sorted(p.name for p in shared.glob("started-*-1")) == [
        "started-0-0-1", "started-0-1-1", "started-1-0-1", "started-1-1-1"]
    stderr = job.log("worker:0", "stderr")
    # Every process's stderr reached the task's stderr; the executor said what it did.
    assert "local rank 0 of worker 0 is fine" in stderr and "ValueError: loss is nan in local rank 1" in stderr
    assert "local rank 1 exited with code 1: stopping the task's other processes" in stderr
    assert "the task exited on SIGTERM in" in stderr


@pytest.mark.local
def test_without_restarts_the_diagnostics_quote_the_failed_process_only(several, no_leftovers):
    job = several(pytorch_workers("python task.py", "fails_once.py"), 2, {"fails_once.py": FAILS_ONCE})
    no_leftovers.append(job.job_id)
    report = job.run()
    assert report.state == "FAILED", report.diagnostics
    diag = report.diagnostics
    assert diag.startswith("worker:0 (local rank 1) failed with exit code 1 (attempt 1)"), diag
    quoted = diag.split("last lines of worker:0's stderr:", 1)[1]
    assert "ValueError: loss is nan in local rank 1" in quoted and "local rank 1 about to fail" in quoted
    assert "is fine" not in quoted, quoted
    assert tasks_by_id(report)["worker:0"].exit_code == 1


EXITS_EARLY = """\
import os, sys, time
local = os.environ["LOCAL_RANK"]
print(f"stdout of local rank {local}", flush=True)
print(f"stderr of local rank {local}", file=sys.stderr, flush=True)
if local != "0":
    sys.exit(0)  # done early: fine, the others go on
time.sleep(1.0)
print("local rank 0 done", flush=True)
"""


@pytest.mark.local
def test_a_task_succeeds_once_every_process_has_exited_0_early_ones_included(several, no_leftovers):
    job = several(pytorch_workers("python task.py", "early.py"), 3, {"early.py": EXITS_EARLY})
    no_leftovers.append(job.job_id)
    report = job.run()
    assert report.state == "SUCCEEDED" and report.attempts == 1, report.diagnostics
    for task in ("worker:0", "worker:1"):
        out, err = job.log(task), job.log(task, "stderr")
        assert all(f"stdout of local rank {r}" in out for r in range(3)), out
        assert all(f"stderr of local rank {r}" in err for r in range(3)), err
        assert out.index("local rank 0 done") > out.index("stdout of local rank 1")
        assert "stopping the task's other processes" not in err and "SIGTERM" not in err


#: Each process starts a child of its own; local rank 1 also one in a session of its own
#: (``setsid``, as torchrun's workers are) and ignores SIGTERM.
RUNS_UNTIL_STOPPED = """\
import os, pathlib, signal, subprocess, sys, time

local, index = os.environ["LOCAL_RANK"], os.environ["SUBM_INDEX"]
marker = os.environ["MARKER"]
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", marker]
subprocess.Popen(sleeper)
if local == "1":
    subprocess.Popen(sleeper, start_new_session=True)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(os.environ["SUBM_SHARED_DIR"], f"running-{index}-{local}").touch()
while True:
    time.sleep(0.1)
"""


@pytest.mark.local
def test_stopping_a_job_stops_every_process_of_every_task_and_what_they_started(several, no_leftovers, tmp_path):
    marker = f"subm-test-{tmp_path.name}"
    spec = pytorch_workers("python task.py", "runs.py", timeouts={"stop_grace_seconds": 1})
    spec["roles"]["worker"]["env"] = {"MARKER": marker}
    job = several(spec, 2, {"runs.py": RUNS_UNTIL_STOPPED})
    no_leftovers.append(job.job_id)

    def kill_once_all_run(job: InProcessJob) -> None:
        wait_for(lambda: len(list(job.shared.glob("running-*"))) == 4, timeout=60, what="4 processes running")
        assert len(pids_with(marker)) == 6  # a child each, and two in sessions of their own
        job.am.kill_requested = "killed by the test"

    report = job.run(during=kill_once_all_run)
    assert report.state == "KILLED", report.diagnostics
    # Local rank 1 ignores SIGTERM: each task needed SIGKILL after the 1 s grace.
    assert {t.exit_code for t in report.tasks} == {137}
    assert pids_with(marker) == []
    assert processes_of(job.job_id) == []


DOCKER_IMAGE = "localhost/subm-test:bookworm"  # scripts/test-image.sh (python3, no torch)


@pytest.fixture
def image() -> str:
    import shutil
    import subprocess

    if not shutil.which("docker") or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker daemon (scripts/docker-up.sh starts one)")
    if subprocess.run(["docker", "image", "inspect", DOCKER_IMAGE], capture_output=True).returncode != 0:
        pytest.skip(f"no {DOCKER_IMAGE} (scripts/test-image.sh builds it)")
    return DOCKER_IMAGE


@pytest.mark.docker
@pytest.mark.local
def test_in_a_docker_image_a_failed_local_rank_is_quoted_from_its_own_stderr(several, image, no_leftovers):
    """In a container the executor's stderr is Docker's pipe: the failed process's own lines
    come from the executor, which reads each process's stderr."""
    spec = pytorch_workers("python3 task.py", "fails_once.py", restart={"policy": "gang", "max_restarts": 1},
                           docker={"image": image})
    job = several(spec, 2, {"fails_once.py": FAILS_ONCE})
    no_leftovers.append(job.job_id)
    report = job.run()
    assert report.state == "SUCCEEDED" and report.attempts == 2, report.diagnostics
    [failed] = [e.message for e in report.events if e.message.startswith("worker:") and " failed with " in e.message]
    assert failed.startswith("worker:0 (local rank 1) failed with exit code 1 (attempt 1)"), failed
    assert "; error: ValueError: loss is nan in local rank 1 (File " in failed, failed
    # Its processes share /dev/shm (NCCL, DataLoader workers): as large as the task's memory.
    assert job.log("worker:1").count("attempt 1 done in a container, /dev/shm 512 MiB") == 2


# -- what the AM sends and reads, what the executor samples (no processes) ----------------------

@pytest.mark.unit
def test_the_run_instruction_carries_every_processs_environment(monkeypatch):
    from test_gang_scheduling_and_restart_policies import FakeContainers

    from submarine_py.am.master import ApplicationMaster
    from submarine_py.plan import make_plan

    spec = {"name": "p", "framework": "pytorch", "roles": {"worker": {"instances": 2, "command": "train"},
                                                           "tensorboard": {"command": "tb"}}}
    plan = make_plan(spec_from_dict(spec))
    plan = dataclasses.replace(plan, tasks=tuple(dataclasses.replace(t, processes=2 if t.role == "worker" else 1)
                                                 for t in plan.tasks))
    fake = FakeContainers(lambda role, index, attempt: 0)
    fake.am = ApplicationMaster(plan, "local_test", fake)
    assert fake.am.run().state == "SUCCEEDED"
    runs = {(i["env"]["SUBM_ROLE"], i["env"]["SUBM_INDEX"]): i for i in fake.instructions if i["op"] == "run"}
    for index in ("0", "1"):
        run = runs[("worker", index)]
        assert [e["LOCAL_RANK"] for e in run["envs"]] == ["0", "1"] and run["env"] == run["envs"][0]
        assert [e["RANK"] for e in run["envs"]] == [str(2 * int(index)), str(2 * int(index) + 1)]
    assert "envs" not in runs[("tensorboard", "0")]  # one process: its environment alone, as before


@pytest.mark.unit
def test_a_failed_process_is_named_by_its_local_rank_in_the_diagnostics():
    from test_gang_scheduling_and_restart_policies import run_job

    def fail_with_local_rank(am):
        on_exit = am.on_exit
        am.on_exit = lambda body: on_exit(dict(body, local_rank=1) if body["exit_code"] else body)

    report, _ = run_job({"roles": {"worker": {"instances": 2, "command": "train"}}},
                        lambda role, index, attempt: 3 if index == 0 else 0)
    assert report["diagnostics"].startswith("worker:0 failed with exit code 3 (attempt 1)")
    report, fake = run_job({"roles": {"worker": {"instances": 2, "command": "train"}}},
                           lambda role, index, attempt: 3 if index == 0 else 0, before_run=fail_with_local_rank)
    assert report["diagnostics"].startswith("worker:0 (local rank 1) failed with exit code 3 (attempt 1)")


@pytest.mark.unit
def test_the_executor_samples_the_tasks_gpus_once_whatever_its_processes():
    from submarine_py.executor.nvml import task_env

    shared = [{"CUDA_VISIBLE_DEVICES": "2,3", "LOCAL_RANK": str(r)} for r in range(2)]
    assert task_env(shared)["CUDA_VISIBLE_DEVICES"] == "2,3"
    own = [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "2"}]
    assert task_env(own)["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in task_env([{"LOCAL_RANK": "0"}, {"LOCAL_RANK": "1"}])


# -- through `subm run`: need job files that say `processes` ----------------------------------



@pytest.mark.local
@pytest.mark.torch
def test_a_job_file_of_two_workers_with_two_processes_each_all_reduces_over_gloo(tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: two-by-two
        framework: pytorch
        roles:
          worker:
            instances: 2
            processes: 2
            resources: {memory: 512 MiB}
            command: python all_reduce.py
        files: {all_reduce.py: all_reduce.py}
    """, {"all_reduce.py": ALL_REDUCE})
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", report["diagnostics"]
    ranks = []
    for task in report["tasks"]:
        out = Path(task["log"]).read_text()
        envs = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("env ")]
        assert sorted(e["LOCAL_RANK"] for e in envs) == ["0", "1"] and out.count("of 4: sum 6") == 2, out
        ranks += [int(e["RANK"]) for e in envs]
    assert sorted(ranks) == [0, 1, 2, 3]


@pytest.mark.local
def test_a_job_file_whose_local_rank_fails_once_restarts_and_names_it(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: fails-once
        framework: pytorch
        restart: {policy: gang, max_restarts: 1}
        roles:
          worker:
            instances: 2
            processes: 2
            resources: {memory: 256 MiB}
            command: python fails_once.py
        files: {fails_once.py: fails_once.py}
    """, {"fails_once.py": FAILS_ONCE})
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, report["diagnostics"]
    rc, am_log, err = subm("logs", report["app_id"])
    assert rc == 0, err
    assert "worker:0 (local rank 1) failed with exit code 1 (attempt 1)" in am_log, am_log
    assert "error: ValueError: loss is nan in local rank 1" in am_log
    # The first attempt's other processes, which never end on their own, were stopped on
    # SIGTERM (each left its mark on it), not waited out; then all four ran attempt 2.
    # (How long the failure takes to become attempt 2: bench/local_jobs.py.)
    shared = subm_home / "local" / report["app_id"] / "shared"
    assert sorted(p.name for p in shared.glob("stopped-*")) == ["stopped-0-0-0", "stopped-1-0-0", "stopped-1-1-0"]
    assert sorted(p.name for p in shared.glob("started-*-1")) == [
        "started-0-0-1", "started-0-1-1", "started-1-0-1", "started-1-1-1"]
