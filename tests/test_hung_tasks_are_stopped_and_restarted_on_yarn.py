"""Hangs on the real YARN rig: a task that prints nothing for ``timeouts.hang_seconds`` is
stopped as hung in its container and restarted by the job's policy (spending ``max_restarts``,
said as "hung"); ``subm status`` names a task getting close to its hang. The same decision as
the local tests of ``test_hung_tasks_are_stopped_and_restarted.py``, here with the executor's
quiet time read from a YARN container's log files.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_hung_tasks_are_stopped_and_restarted_on_yarn.py
"""
from __future__ import annotations

import re

import pytest

from conftest import run_json, subm, wait_for, write_job
from test_jobs_run_end_to_end_on_yarn import (  # noqa: F401 (apps: a fixture)
    YARN, apps, detach, no_running_container, run_job, wait_final)

pytestmark = pytest.mark.yarn


def hanging_job(tmp_path, hang_seconds: int, max_restarts: int = 1):
    """Two workers; worker:1 prints a line, then its first attempt hangs (sleeps) while worker:0
    waits for its peer as a collective would; every later attempt ends at once."""
    return write_job(tmp_path / "job", f"""\
        name: hangs-on-yarn
        restart: {{policy: gang, max_restarts: {max_restarts}}}
        timeouts: {{hang_seconds: {hang_seconds}, stop_grace_seconds: 1}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: >-
              echo "step 1 of attempt $SUBM_ATTEMPT";
              if [ "$SUBM_ATTEMPT" = 0 ]; then
                if [ "$SUBM_INDEX" = 1 ]; then sleep 600; else while true; do echo waiting; sleep 1; done; fi;
              fi
    """)


def test_a_hung_task_on_yarn_is_stopped_and_the_gang_restarted_by_its_policy(tmp_path, apps):
    rc, report, err = run_job(hanging_job(tmp_path, hang_seconds=8), timeout=300)
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2, report
    assert report["restarts_by_cause"]["hung"] == 1 and report["restarts_by_cause"]["failed"] == 0
    rc, decisions, err = subm("logs", report["app_id"], env=YARN, timeout=60)  # the AM's log
    assert rc == 0, err
    assert re.search(r"worker:1 printed nothing for \d+ s \(timeouts.hang_seconds 8\): stopping it as hung",
                     decisions), decisions
    assert "worker:0 printed nothing" not in decisions  # it kept printing
    wait_for(lambda: no_running_container(report["app_id"]), timeout=60, what="the job's containers gone")


def test_a_hung_task_on_yarn_with_no_restart_left_fails_quoting_what_it_printed(tmp_path, apps):
    rc, report, err = run_job(hanging_job(tmp_path, hang_seconds=8, max_restarts=0), timeout=300)
    apps.append(report.get("app_id"))
    assert rc == 1, report
    diag = report["diagnostics"]
    assert re.match(r"worker:1 failed with no output for \d+ s: hung \(timeouts.hang_seconds 8\)", diag), diag
    assert "step 1 of attempt 0" in diag
    worker1 = next(t for t in report["tasks"] if t["index"] == 1)
    assert worker1["cause"] == "hung"


def test_subm_status_on_yarn_shows_a_task_getting_close_to_its_hang(tmp_path, apps):
    job = hanging_job(tmp_path, hang_seconds=40, max_restarts=0)
    app_id = detach(job, apps)

    def quiet_for_a_while():
        rc, report, _ = run_json("status", app_id, env=YARN)
        return rc == 0 and any((t.get("quiet_seconds") or 0) >= 22 for t in report["tasks"])

    wait_for(quiet_for_a_while, timeout=180, what="worker:1 quiet for 22 s", interval=1)
    rc, text, err = subm("status", app_id, env=YARN)
    assert rc == 0, err
    assert re.search(r"! worker:1 quiet for \d+ s of 40 \(timeouts.hang_seconds", text), text
    assert "! worker:0 quiet" not in text
    subm("kill", app_id, env=YARN)
    wait_final(app_id)
