"""``subm wait`` and ``subm logs`` on a real YARN: waiting for a detached application (its
timeout, its exit codes), and the logs of every attempt once an AM attempt was lost: each AM
attempt's own log, the tasks' logs in the containers of the earlier AM attempt (gone, but
their logs still on the NodeManager), ``--attempt`` and ``--tail``.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_waiting_and_logs_of_every_attempt_on_yarn.py
"""
from __future__ import annotations

import os
import signal
from typing import List

import pytest

from conftest import run_json, subm, wait_for
from test_jobs_run_end_to_end_on_yarn import (  # noqa: F401 (apps: a fixture)
    FINAL_YARN_STATES, JOBS, YARN, apps, detach, rm_app, wait_final)
from test_node_and_container_failures_on_yarn import am_pids, app_attempts, gang_running

pytestmark = pytest.mark.yarn


def titles(out: str, start: str) -> List[str]:
    return [line for line in out.splitlines() if line.startswith(f"==> {start}")]


def section(out: str, title: str) -> str:
    """The text under one ``==> title <==`` line, up to the next title."""
    rest = out.split(title + "\n", 1)[1]
    return rest.split("\n==> ", 1)[0]


# -- subm wait ---------------------------------------------------------------------------------

def test_subm_wait_times_out_with_124_then_ends_with_the_jobs_report(shared_tmp_path, apps):
    marker = shared_tmp_path / "go"
    app_id = detach(JOBS / "wait-for-marker.yaml", apps, name="wait", marker=marker, max_seconds=120)
    rc, out, err = subm("wait", app_id, "--timeout", "3", env=YARN)
    assert rc == 124 and out == "", err
    assert f"Error: {app_id} is still " in err and "it goes on" in err
    assert rm_app(app_id)["state"] not in FINAL_YARN_STATES  # waiting ended, the job did not
    marker.touch()
    rc, report, err = run_json("wait", app_id, env=YARN, timeout=180)
    assert rc == 0, err
    assert report["app_id"] == app_id and report["state"] == "SUCCEEDED"
    assert [(t["role"], t["index"], t["exit_code"]) for t in report["tasks"]] == [("worker", 0, 0), ("worker", 1, 0)]


def test_subm_wait_exits_1_for_a_failed_job_and_2_for_an_unknown_one(apps):
    app_id = detach(JOBS / "always-fails.yaml", apps)
    rc, out, err = subm("wait", app_id, env=YARN, timeout=240)
    assert rc == 1, err
    assert "FAILED" in out and "worker:1 failed with exit code 3" in out
    rc, _, err = subm("wait", "application_1000000000000_9999", env=YARN)
    assert rc == 2 and err.startswith("Error: APP_ID: YARN knows no application"), err


# -- logs of every attempt ----------------------------------------------------------------------

def test_logs_show_every_am_attempt_and_the_tasks_of_the_lost_one(shared_tmp_path, apps):
    """The AM of attempt 1 is killed; attempt 2 restarts the gang in new containers. Afterwards
    `subm logs` shows both AMs' logs, and each task's logs from both of its containers."""
    marker = shared_tmp_path / "go"
    app_id = detach(JOBS / "am-loss.yaml", apps, marker=marker)
    first = wait_for(lambda: gang_running(app_id, 2), timeout=180, what="both workers running", interval=0.5)
    old = {t["index"]: t["container_id"] for t in first["tasks"]}
    pids = am_pids(app_id)
    assert len(pids) == 1, f"the AM process of {app_id} on this machine: {pids}"
    os.kill(pids[0], signal.SIGKILL)
    second = wait_for(lambda: gang_running(app_id, 2, attempt=2), timeout=180,
                      what="a new AM attempt with the gang running again", interval=0.5)
    new = {t["index"]: t["container_id"] for t in second["tasks"]}
    assert not set(old.values()) & set(new.values())

    # While it runs: the lost attempt's AM log and task logs are there already.
    rc, out, err = subm("logs", app_id, env=YARN, timeout=60)
    assert rc == 0, err
    assert len(titles(out, "ApplicationMaster attempt ")) == 2, out[:2000]

    marker.touch()
    wait_final(app_id, timeout=120)
    attempts = app_attempts(app_id)
    assert len(attempts) == 2

    rc, out, err = subm("logs", app_id, env=YARN, timeout=60)
    assert rc == 0, err
    expected = [f"==> ApplicationMaster attempt {a['id']} ({a['containerId']}) <==" for a in attempts]
    assert titles(out, "ApplicationMaster") == expected and out.startswith(expected[0])
    assert "gang ready: all 2 tasks registered (attempt 1)" in section(out, expected[0])
    assert "the ApplicationMaster was lost" in section(out, expected[1])

    # Each task's logs: its container of AM attempt 1, then its container of attempt 2.
    rc, out, err = subm("logs", app_id, "--role", "worker", "--index", "0", env=YARN, timeout=60)
    assert rc == 0, err
    stdout_titles = titles(out, "worker:0 stdout")
    assert stdout_titles == [f"==> worker:0 stdout ({old[0]}) <==", f"==> worker:0 stdout ({new[0]}) <=="]
    assert "worker 0 attempt 0" in section(out, stdout_titles[0])
    assert "role=worker index=0 attempt=2 " in section(out, stdout_titles[1])
    assert "worker 0 attempt 1" in section(out, stdout_titles[1])

    # --attempt 1: the lost attempt's part alone, from the old containers.
    rc, out, err = subm("logs", app_id, "--role", "worker", "--attempt", "1", env=YARN, timeout=60)
    assert rc == 0, err
    assert "worker 0 attempt 0" in out and "worker 1 attempt 0" in out
    assert "attempt 1\n" not in out and "attempt=2 " not in out
    assert all(cid in out for cid in old.values()) and not any(f"({cid})" in out for cid in new.values())

    # --tail 1: the last line of each file (here, of each stdout, the line the attempt printed).
    rc, out, err = subm("logs", app_id, "--role", "worker", "--index", "1", "--tail", "1", env=YARN, timeout=60)
    assert rc == 0, err
    assert section(out, f"==> worker:1 stdout ({old[1]}) <==") == "worker 1 attempt 0"
    assert section(out, f"==> worker:1 stdout ({new[1]}) <==").rstrip("\n") == "worker 1 attempt 1"
