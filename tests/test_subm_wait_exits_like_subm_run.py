"""``subm wait APP_ID``: for CI and schedulers that submitted with ``--detach``. It blocks until
the job ends, prints the final report as ``subm run`` does, and exits as it does: 0 succeeded,
1 failed or killed; 2 for an id that is no job's; 124 when ``--timeout`` passes first (the job
goes on)."""
from __future__ import annotations

import json

import pytest

from conftest import cli, processes_of, subm, wait_for, write_job

JOB = """\
    name: wait-{{ name }}
    roles:
      worker:
        instances: 2
        command: >-
          echo "worker $SUBM_INDEX"; sleep {{ seconds | default(0) }};
          [ "$SUBM_INDEX" = 1 ] && exit {{ worker_1_exits | default(0) }}; exit 0
"""


def detach(tmp_path, **variables) -> str:
    sets = [a for k, v in variables.items() for a in ("--set", f"{k}={v}")]
    rc, out, err = cli("run", str(write_job(tmp_path, JOB)), "--backend", "local", "--detach", *sets)
    assert rc == 0, err
    return out.strip()


@pytest.mark.unit
@pytest.mark.parametrize("app_id", ["nonsense", "application_x", "local_20000101-000000_abcdef"])
def test_an_id_that_is_no_jobs_is_exit_2(app_id):
    rc, out, err = cli("wait", app_id)
    assert rc == 2 and out == ""
    assert err.startswith("Error: APP_ID: ") and err.count("\n") == 1, err


@pytest.mark.unit
def test_a_negative_timeout_is_refused_by_the_command_line():
    rc, _, err = cli("wait", "local_x", "--timeout", "-1")
    assert rc == 2 and "--timeout" in err


@pytest.mark.local
def test_a_detached_job_that_succeeds_exits_0_with_its_report(tmp_path, no_leftovers):
    app_id = detach(tmp_path, name="ok", seconds=1)
    no_leftovers.append(app_id)
    rc, out, err = cli("wait", app_id, "--output", "json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["app_id"] == app_id and report["state"] == "SUCCEEDED"
    assert [(t["role"], t["index"], t["exit_code"]) for t in report["tasks"]] == [("worker", 0, 0), ("worker", 1, 0)]
    rc, out, _ = cli("wait", app_id)  # an ended job: at once, as text
    assert rc == 0 and f"Job wait-ok ({app_id}) SUCCEEDED" in out


@pytest.mark.local
def test_a_detached_job_that_fails_exits_1_with_the_diagnostics(tmp_path, no_leftovers):
    app_id = detach(tmp_path, name="fails", worker_1_exits=7)
    no_leftovers.append(app_id)
    rc, out, err = cli("wait", app_id)
    assert rc == 1, err
    assert "FAILED" in out and "worker:1 failed with exit code 7" in out


@pytest.mark.local
def test_a_timeout_exits_124_saying_so_and_the_job_goes_on(tmp_path, no_leftovers):
    app_id = detach(tmp_path, name="slow", seconds=300)
    no_leftovers.append(app_id)
    rc, out, err = cli("wait", app_id, "--timeout", "1", "--output", "json")
    assert rc == 124 and out == ""
    assert err.startswith(f"Error: {app_id} is still ") and "after 1 s of waiting; it goes on" in err
    assert err.count("\n") == 1
    # It returned while the job's workers sleep their 300 s: the job, not the wait, goes on.
    # (How soon after its timeout it returns: bench/latencies.py.)
    rc, out, _ = cli("status", app_id, "--output", "json")
    assert json.loads(out)["state"] in ("ACCEPTED", "RUNNING")
    assert processes_of(app_id)
    rc, _, _ = cli("kill", app_id)
    assert rc == 0
    rc, out, _ = cli("wait", app_id, "--timeout", "30")
    assert rc == 1 and "KILLED" in out  # killed counts as not succeeded


@pytest.mark.local
def test_subm_wait_in_a_real_process_waits_for_the_job_to_end(tmp_path, subm_home, no_leftovers):
    app_id = detach(tmp_path, name="real", seconds=2)
    no_leftovers.append(app_id)
    rc, out, err = subm("wait", app_id, timeout=60)
    assert rc == 0, err
    assert "SUCCEEDED" in out and "Traceback" not in err
    wait_for(lambda: (subm_home / "local" / app_id / "report.json").exists(), timeout=5, what="the report")
