"""What a person reads while a job runs agrees with itself: attempts counted from 1
everywhere (SUBM_ATTEMPT alone counts restarts from 0), one gang-ready time, each progress
line once, roles where roles are listed, and a kill that says who killed the job."""
import re

import pytest
from click.testing import CliRunner

from conftest import run_json, subm, wait_for, write_job
from submarine_py.cli import main

pytestmark = pytest.mark.local

# worker:1 fails in the first attempt; both print the SUBM_ATTEMPT they got.
FAILS_ONCE = """\
import os, sys
attempt = int(os.environ["SUBM_ATTEMPT"])
print(f"SUBM_ATTEMPT={attempt}", flush=True)
sys.exit(3 if attempt == 0 and os.environ["SUBM_INDEX"] == "1" else 0)
"""


def job(tmp_path, max_restarts=2, command="python task.py"):
    return write_job(tmp_path / "job", f"""\
        name: numbers
        restart: {{policy: gang, max_restarts: {max_restarts}}}
        roles:
          worker: {{instances: 2, command: "{command}"}}
        files: {{task.py: task.py}}
    """, {"task.py": FAILS_ONCE})


def test_a_restarted_gang_is_attempt_2_in_every_message(tmp_path, subm_home, no_leftovers):
    rc, out, err = subm("run", str(job(tmp_path)), "--backend", "local")
    app_id = re.search(r"(local_\S+)\)", out).group(1)
    no_leftovers.append(app_id)
    assert rc == 0, err
    lines = err.splitlines()
    restart = next(i for i, line in enumerate(lines) if "AM: restarting the gang" in line)
    assert "restarting the gang: attempt 2 of at most 3, because worker:1 failed with exit code 3 " \
           "(attempt 1)" in lines[restart]
    # Everything after the restart speaks of attempt 2, never of another number.
    assert {int(n) for line in lines[restart + 1:] for n in re.findall(r"attempt (\d+)", line)} == {2}
    assert "AM: worker:1 failed with exit code 3 (attempt 1)" in err
    assert "attempt 0" not in err and "attempt=0" not in err
    assert out.startswith("Job numbers") and "SUCCEEDED after 2 attempts" in out
    # Programs still see SUBM_ATTEMPT from 0; the log headers count like people do.
    # (worker:1's log: it prints before failing; worker:0 may be stopped before it prints.)
    log = (subm_home / "local" / app_id / "logs" / "worker-1.stdout").read_text()
    assert re.findall(r"attempt=(\d)", log) == ["1", "2"]
    assert re.findall(r"^SUBM_ATTEMPT=(\d)$", log, re.M) == ["0", "1"]


def test_the_gang_ready_time_is_one_number_and_the_last_line_prints_once(tmp_path, subm_home, no_leftovers):
    rc, out, err = subm("run", str(job(tmp_path, max_restarts=0, command="true")), "--backend", "local")
    no_leftovers.append(re.search(r"(local_\S+)\)", out).group(1))
    assert rc == 0, err
    am = re.search(r"AM: gang ready: all 2 tasks registered \(attempt 1\), ([\d.]+) s after submission", err)
    summary = re.search(r"\(gang ready ([\d.]+) s after submission\)", out)
    assert am and summary, (err, out)
    assert am.group(1) == summary.group(1)
    final = [line for line in err.splitlines() if "job SUCCEEDED" in line and not line.split("] ", 1)[1]
             .startswith("AM:")]
    assert len(final) == 1, err


def test_the_json_report_has_the_same_gang_ready_time_as_the_am(tmp_path, subm_home, no_leftovers):
    rc, report, err = run_json("run", str(job(tmp_path, max_restarts=0, command="true")), "--backend", "local")
    no_leftovers.append(report["app_id"])
    am = re.search(r"gang ready: .*, ([\d.]+) s after submission", err).group(1)
    assert f"{report['timings']['gang_ready_seconds']:.1f}" == am


def test_logs_of_an_unknown_role_lists_the_roles(tmp_path, subm_home, no_leftovers):
    rc, report, _ = run_json("run", str(job(tmp_path, max_restarts=0, command="true")), "--backend", "local")
    no_leftovers.append(report["app_id"])
    result = CliRunner().invoke(main, ["logs", report["app_id"], "--role", "nope"])
    assert result.exit_code == 1
    assert result.output.rstrip().endswith("roles: worker"), result.output


def test_subm_kill_is_reported_as_killed_by_subm_kill(tmp_path, subm_home, no_leftovers):
    rc, out, err = subm("run", str(job(tmp_path, command="sleep 120")), "--backend", "local", "--detach")
    app_id = out.strip()
    no_leftovers.append(app_id)
    assert rc == 0, err
    wait_for(lambda: run_json("status", app_id)[1]["state"] == "RUNNING", what="the job to run")
    rc, killed, _ = run_json("kill", app_id)
    assert killed["state"] == "KILLED"
    assert killed["diagnostics"] == "killed by `subm kill`"
    rc, status, _ = run_json("status", app_id)
    assert status["diagnostics"] == "killed by `subm kill`"
    assert "SIGTERM" not in (subm_home / "local" / app_id / "am.log").read_text()
