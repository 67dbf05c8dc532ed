"""Local jobs that together ask for more GPUs than the machine has run one after the other.

Each local job has its own AM; the machine's GPUs are shared through one ledger under
``$SUBM_HOME/local`` (``backends/local/gpu_ledger.py``). A job whose gang does not fit waits,
QUEUED, holding nothing, and starts when the GPUs are back. ``SUBM_LOCAL_GPUS=0,1`` stands in
for a machine with two GPUs.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import requests

from conftest import describe_processes, processes_of, run_json, wait_for, write_job

pytestmark = pytest.mark.local

GPUS = {"SUBM_LOCAL_GPUS": "0,1"}

JOB = """
    name: {name}
    roles:
      worker:
        instances: 2
        resources: {{memory: 256 MiB, gpus: 1}}
        command: echo "start=$(date +%s.%N) devices=[$CUDA_VISIBLE_DEVICES]"; sleep {sleep}; echo "end=$(date +%s.%N)"
"""


def submit(tmp_path: Path, name: str, sleep: float) -> str:
    job = write_job(tmp_path / name, JOB.format(name=name, sleep=sleep))
    rc, started, err = run_json("run", str(job), "--backend", "local", "--detach", env=GPUS)
    assert rc == 0, err
    return started["app_id"]


def holding(subm_home: Path, app_id: str) -> bool:
    """Whether the job holds both GPUs: only then is the next job sure to wait for it (two AMs
    started together on a loaded machine reach the ledger in either order)."""
    return sorted(e["job"] for e in ledger(subm_home)["gpus"].values()) == [app_id, app_id]


def submit_holding(tmp_path: Path, subm_home: Path, name: str, sleep: float) -> str:
    """Submit a job and wait until it holds the machine's GPUs."""
    app_id = submit(tmp_path, name, sleep)
    wait_for(lambda: holding(subm_home, app_id), 60, f"{name} to hold both GPUs")
    return app_id


def status(app_id: str) -> dict:
    return run_json("status", app_id, env=GPUS)[1]


def queued(app_id: str) -> dict:
    """``subm status``'s report while the job waits for room (its AM's phase: QUEUED)."""
    now = status(app_id)
    if not now.get("waiting_for"):
        return {}
    assert now["state"] == "RUNNING" and all(t["state"] == "PENDING" for t in now["tasks"])
    assert requests.get(now["status_url"] + "/v1/status", timeout=10).json()["phase"] == "QUEUED"
    return now


def ledger(subm_home: Path) -> dict:
    path = subm_home / "local" / "gpu-ledger.json"
    return json.loads(path.read_text()) if path.exists() else {"gpus": {}, "waiting": {}}


def am_log(subm_home: Path, app_id: str) -> str:
    return (subm_home / "local" / app_id / "am.log").read_text()


def seen(report: dict) -> Tuple[List[str], List[Tuple[float, float]]]:
    """Each task's devices, and when it ran (from what it printed)."""
    devices, spans = [], []
    for task in report["tasks"]:
        said: Dict[str, str] = {}
        for line in Path(task["log"]).read_text().splitlines():
            for word in line.split():
                if "=" in word:
                    key, _, value = word.partition("=")
                    said[key] = value
        devices.append(said["devices"])
        spans.append((float(said["start"]), float(said["end"])))
    return sorted(devices), spans


def test_two_jobs_that_together_ask_too_many_gpus_run_one_after_the_other(tmp_path, subm_home, no_leftovers):
    first = submit_holding(tmp_path, subm_home, "turns-a", sleep=4)
    second = submit(tmp_path, "turns-b", sleep=1)
    no_leftovers.extend([first, second])
    waiting = wait_for(lambda: queued(second), 30, "the second job to queue",
                       explain=lambda: json.dumps(status(second)))
    assert waiting["waiting_for"] == (f"waiting for 2 GPUs: 0 free on this machine "
                                      f"(GPU 0 held by job {first}, GPU 1 held by job {first})")
    assert set(ledger(subm_home)["waiting"]) == {second}
    reports = {}
    for app_id in (first, second):
        rc, reports[app_id], err = run_json("wait", app_id, env=GPUS)
        assert rc == 0, err
    devices_a, spans_a = seen(reports[first])
    devices_b, spans_b = seen(reports[second])
    assert devices_a == devices_b == ["[0]", "[1]"]  # within a job, each task its own device
    assert max(end for _, end in spans_a) <= min(start for start, _ in spans_b)  # never on the GPUs at once
    assert reports[second]["timings"]["queued_seconds"] > 1  # the first job ran 4 s meanwhile
    # The first found the GPUs free and never waited; only the second queued, saying for what.
    # (How long admission and the hand-over take: bench/local_jobs.py.)
    assert "waits, queued" not in am_log(subm_home, first)
    assert f"the gang waits, queued: {waiting['waiting_for']}" in am_log(subm_home, second)
    assert ledger(subm_home) == {"gpus": {}, "waiting": {}}


def test_a_job_killed_while_queued_ends_killed_and_leaves_nothing_in_the_ledger(tmp_path, subm_home, no_leftovers):
    running = submit_holding(tmp_path, subm_home, "kill-a", sleep=300)
    waiting = submit(tmp_path, "kill-b", sleep=1)
    no_leftovers.extend([running, waiting])
    wait_for(lambda: queued(waiting), 30, "the second job to queue")
    rc, killed, err = run_json("kill", waiting, env=GPUS)
    assert rc == 0, err
    assert killed["state"] == "KILLED"
    assert {e["job"] for e in ledger(subm_home)["gpus"].values()} == {running}
    wait_for(lambda: ledger(subm_home)["waiting"] == {}, 30, "the killed job to leave the waiting list")
    run_json("kill", running, env=GPUS)
    wait_for(lambda: ledger(subm_home) == {"gpus": {}, "waiting": {}}, 30, "an empty ledger")


def test_gpus_of_a_job_whose_am_was_killed_go_to_the_next_job(tmp_path, subm_home, no_leftovers):
    crashed = submit_holding(tmp_path, subm_home, "crash-a", sleep=300)
    waiting = submit(tmp_path, "crash-b", sleep=1)
    no_leftovers.extend([crashed, waiting])
    wait_for(lambda: queued(waiting), 30, "the second job to queue")
    am = json.loads((subm_home / "local" / crashed / "am.json").read_text())["pid"]
    os.kill(am, signal.SIGKILL)  # no close(), no goodbye: its ledger entries stay behind
    wait_for(lambda: not processes_of(crashed), 30, "the crashed job's executors to die with their AM",
             explain=lambda: describe_processes(processes_of(crashed)))
    rc, report, err = run_json("wait", waiting, env=GPUS)
    assert rc == 0, err
    assert report["timings"]["queued_seconds"] > 0
    assert ledger(subm_home) == {"gpus": {}, "waiting": {}}


RESTARTS = """
    name: {name}
    restart: {{policy: gang, max_restarts: 1}}
    roles:
      worker:
        instances: 2
        resources: {{memory: 256 MiB, gpus: 1}}
        command: >-
          echo "start=$(date +%s.%N) devices=[$CUDA_VISIBLE_DEVICES]";
          if [ "$SUBM_INDEX$SUBM_ATTEMPT" = 10 ]; then sleep 1; exit 3; fi;
          sleep 2; echo "end=$(date +%s.%N)"
"""


def test_a_gang_restart_gets_the_jobs_own_gpus_back_while_another_job_waits(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "restarts", RESTARTS.format(name="restarts"))
    rc, started, err = run_json("run", str(job), "--backend", "local", "--detach", env=GPUS)
    assert rc == 0, err
    restarting = started["app_id"]
    wait_for(lambda: holding(subm_home, restarting), 60, "the restarting job to hold both GPUs")
    waiting = submit(tmp_path, "behind", sleep=1)
    no_leftovers.extend([restarting, waiting])
    wait_for(lambda: queued(waiting), 30, "the second job to queue")
    rc, first, err = run_json("wait", restarting, env=GPUS)
    assert rc == 0, err
    assert first["attempts"] == 2
    for task in first["tasks"]:  # each attempt of a task on the same device
        lines = [line for line in Path(task["log"]).read_text().splitlines() if line.startswith("start=")]
        assert len(lines) == 2 and len({line.split()[1] for line in lines}) == 1, lines
    rc, second, err = run_json("wait", waiting, env=GPUS)
    assert rc == 0, err
    _, spans_a = seen(first)
    _, spans_b = seen(second)
    assert max(end for _, end in spans_a) <= min(start for start, _ in spans_b)
    assert ledger(subm_home) == {"gpus": {}, "waiting": {}}
