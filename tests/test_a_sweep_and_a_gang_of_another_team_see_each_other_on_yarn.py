"""A sweep shares the two-queue rig with other teams' gangs (issue 31): its groups of containers
pass the same admission gate as a gang's and it says where it stands the same way (its
application's progress, which every AM reads from the RM), so a running sweep holding its
containers is not counted as an older gang still waiting, and a sweep waiting for room is.

Needs the ``sharing`` rig (3 nodes of 2 GPUs, queues teama and teamb):
``bash scripts/test.sh -m sharing tests/test_a_sweep_and_a_gang_of_another_team_see_each_other_on_yarn.py``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict

import pytest

from conftest import run_json, write_job
from submarine_py.admission import STARVE_SECONDS
from test_teams_share_gpus_on_yarn import (YARN, ran, said, status, submit, team_queues,
                                           wait, wait_running)

pytestmark = [pytest.mark.yarn, pytest.mark.sharing]
#: The rig's check (autouse where it is defined, and here since it is imported).
RIG = team_queues

#: A trial: it runs for argv[1] seconds, then prints its score.
TRIAL = """\
    import sys, time
    print(f"began {time.time():.3f}", flush=True)
    time.sleep(float(sys.argv[1]))
    print(f"ended {time.time():.3f}", flush=True)
    print("score=1.0", flush=True)
"""


def submit_sweep(tmp_path: Path, name: str, queue: str, trials: int, parallel: int, seconds: float) -> str:
    values = ", ".join(str(i) for i in range(trials))
    job = write_job(tmp_path / name, f"""\
        name: {name}
        queue: {queue}
        roles:
          worker:
            resources: {{memory: 512 MiB, vcores: 1, gpus: 1}}
            command: python trial.py {seconds}
        files:
          trial.py: trial.py
        sweep:
          metric: score
          goal: maximize
          algorithm: grid
          trials: {trials}
          parallel: {parallel}
          params:
            x: [{values}]
        """, {"trial.py": TRIAL})
    rc, out, err = run_json("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    return out["app_id"]


def wait_trials_running(app_id: str, count: int, timeout: float = 120) -> Dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = status(app_id)
        trials = (report.get("sweep") or {}).get("trials") or report.get("trials") or []
        if sum(1 for t in trials if t.get("state") == "RUNNING") >= count:
            return report
        time.sleep(1)
    pytest.fail(f"{app_id}'s trials never ran: {status(app_id)}")


def waiting_for(app_id: str, timeout: float = 60) -> str:
    """What a job says it waits for, once its AM is up and says so."""
    deadline = time.monotonic() + timeout
    while not (report := status(app_id)).get("waiting_for") and time.monotonic() < deadline:
        time.sleep(1)
    return report.get("waiting_for") or f"nothing: {report}"


def test_a_running_sweep_is_not_counted_as_an_older_gang_still_waiting(tmp_path):
    """Two trials hold 2 of the 6 GPUs; another team's 4-GPU gang fits in the 4 left and runs at
    once, beside them, instead of waiting behind a sweep it takes for a gang not started yet."""
    sweep = submit_sweep(tmp_path, "sweep-running", "teama", trials=2, parallel=2, seconds=40)
    wait_trials_running(sweep, 2)
    gang = submit(tmp_path, "gang-beside", 4, 5, "teamb")
    gang_report = wait(gang)
    assert gang_report["state"] == "SUCCEEDED", gang_report["diagnostics"]
    sweep_report = wait(sweep)
    assert sweep_report["state"] == "SUCCEEDED", sweep_report["diagnostics"]
    gang_began, _ = ran(gang)
    _, sweep_ended = ran(sweep)  # its trials print began/ended as tasks do
    assert gang_began < sweep_ended, said(gang)  # beside the trials, not after them
    assert sweep not in said(gang), said(gang)  # never named as a job waiting first


def test_an_older_gang_waiting_goes_before_a_younger_sweep_waiting_behind_it(tmp_path):
    """A sweep waiting for its first trial container says it waits (its progress: queued), so
    an older gang of another team waiting for every GPU goes first when they come free, then
    the sweep. A sweep that said nothing read as a gang whose containers are arriving (skein's
    default progress, 10 %): ahead of every job, never passed; the gang waited for the sweep,
    the sweep for the older gang, until the gang's queue_seconds ran out.

    The hog's GPUs come free once the gang has waited STARVE_SECONDS: from then on no younger
    job passes it (admission's rule). Before, a younger job that fits may go first (backfill),
    and the hog's six GPUs come free node by node, as each NodeManager reports its containers
    ended: the sweep's one fits before the gang's six do (CI, 2026-11-29, on a loaded machine).
    """
    hog = submit(tmp_path, "hog", 6, 600, "teama")  # until killed, once both wait
    wait_running(hog)
    gang_submitted = time.monotonic()
    gang = submit(tmp_path, "gang-older", 6, 5, "teamb", extra="timeouts: {queue_seconds: 200}")
    assert waiting_for(gang).startswith("waiting for 6 GPUs")
    sweep = submit_sweep(tmp_path, "sweep-younger", "teama", trials=1, parallel=1, seconds=5)
    assert waiting_for(sweep).startswith("waiting for 1 GPU")
    time.sleep(max(0.0, gang_submitted + STARVE_SECONDS + 5 - time.monotonic()))
    assert status(hog)["state"] == "RUNNING"  # both wait for the hog's GPUs
    rc, _, err = run_json("kill", hog, env=YARN, timeout=120)  # its GPUs come free
    assert rc == 0, err
    reports = {app: wait(app) for app in (gang, sweep)}
    assert all(r["state"] == "SUCCEEDED" for r in reports.values()), \
        {app: r["diagnostics"] for app, r in reports.items()}
    _, gang_ended = ran(gang)
    sweep_began, _ = ran(sweep)  # its trials print began/ended as tasks do
    assert gang_ended <= sweep_began, (said(gang), said(sweep))  # the older one first
    assert reports[sweep]["timings"].get("queued_seconds", 0) > 0, reports[sweep]["timings"]
    assert "trial container 0 waits, queued: waiting for 1 GPU" in said(sweep)
