"""Issue 32 on a real YARN shared by two teams (3 nodes with 2 GPUs, queues teama and teamb at
50 %, YARN's preemption monitor on: CI's ``preemption`` pass), the race driven on purpose: a
gang that fits at submission is asked for with the application, and its AM waits before taking
the first of those containers (``SUBM_TEST_LAUNCH_PAUSE``) while its executors register; then
another team's job gets YARN to preempt it. Every task has one executor, the container asked
for meanwhile goes back at once, and once the preempted gang gave everything back the
ResourceManager counts only its AM while it waits; in the end nothing is held.
"""
from __future__ import annotations

import time

import pytest

from test_teams_share_gpus_on_yarn import (YARN, cluster_gpus, rm_get, said, status, submit,  # noqa: F401
                                           team_queues, wait, wait_running)

pytestmark = pytest.mark.yarn


def app_row(app_id: str) -> dict:
    return rm_get(f"/ws/v1/cluster/apps/{app_id}")["app"]


@pytest.mark.preemption
def test_executors_registering_while_the_am_takes_its_gang_then_a_preemption_leave_nothing_held(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SUBM_TEST_LAUNCH_PAUSE", "8")  # the AM waits; the six executors register
    race = submit(tmp_path, "race", 6, 45, "teama", extra="restart: {max_restarts: 0}")
    monkeypatch.delenv("SUBM_TEST_LAUNCH_PAUSE")
    wait_running(race, timeout=180)
    # One executor per task: the container asked for while worker:0's came up goes back at once
    # (the AM says so once that container is granted, seconds after the gang is ready).
    deadline = time.monotonic() + 60
    while "giving that container back" not in (logs := said(race)) and time.monotonic() < deadline:
        time.sleep(2)
    assert "admitted at submission" in logs, logs[-3000:]
    assert "found its executor" in logs and "giving that container back" in logs, logs[-3000:]
    deadline = time.monotonic() + 30
    while app_row(race)["runningContainers"] != 7 and time.monotonic() < deadline:
        time.sleep(1)
    assert app_row(race)["runningContainers"] == 7  # the gang of six and the AM, no more

    # teamb is under its share: YARN preempts teama's containers for it; the gang goes back.
    small = submit(tmp_path, "small", 2, 15, "teamb")
    deadline, queued_at, held = time.monotonic() + 120, None, []
    while time.monotonic() < deadline:
        report = status(race)
        if report.get("waiting_for") and queued_at is None:
            queued_at = time.monotonic()
        if queued_at is not None:
            held.append(app_row(race)["runningContainers"])
            if time.monotonic() - queued_at > 20 or not report.get("waiting_for"):
                break
        time.sleep(1)
    assert queued_at is not None, "the preempted gang never waited"
    assert 1 in held, f"the waiting job kept task containers: the RM counted {held}"

    reports = {app: wait(app) for app in (small, race)}
    assert all(r["state"] == "SUCCEEDED" for r in reports.values()), \
        {app: r["diagnostics"] for app, r in reports.items()}
    assert reports[race]["restarts_by_cause"]["preempted"] >= 1
    # Nothing held: both applications ended, and every GPU is free again.
    deadline = time.monotonic() + 60
    while cluster_gpus() < 6 and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster_gpus() == 6
    # Once YARN has the applications finished (the AM's container ends after its report is
    # written: seconds), their rows count no container: 0, or -1 where the RM has no usage (3.4).
    def ended(app: str) -> bool:
        row = app_row(app)
        return row["state"] in ("FINISHED", "FAILED", "KILLED") and \
            row["runningContainers"] in (0, -1, None)
    deadline = time.monotonic() + 60
    while not all(ended(a) for a in (race, small)) and time.monotonic() < deadline:
        time.sleep(1)
    rows = {a: {k: app_row(a).get(k) for k in ("state", "runningContainers")} for a in (race, small)}
    assert all(ended(a) for a in (race, small)), rows
