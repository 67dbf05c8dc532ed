"""The Python API (``submarine_py``, docs/python-api.md): load a job file with its variables,
submit it detached, wait for it, ask its status, read its logs, kill a job; every answer the
typed ``JobReport`` the CLI prints, every error one of the package's own."""
from __future__ import annotations

import io

import pytest
import requests

import submarine_py
from conftest import processes_of, wait_for, write_job
from submarine_py import (BackendError, Job, JobNotFoundError, JobReport, JobState, SpecError, SubmarineError,
                          TaskState, WaitTimeout)

GREETING_JOB = """\
    name: api-{{ name | default('hello') }}
    restart: {policy: gang, max_restarts: {{ restarts | default(0) }}}
    roles:
      worker:
        instances: 2
        command: >-
          echo "{{ greeting }} from $SUBM_INDEX, attempt $SUBM_ATTEMPT";
          {% if fail_once | default(false) %}[ "$SUBM_ATTEMPT" = 0 ] && [ "$SUBM_INDEX" = 1 ] && exit 3;{% endif %}
          sleep {{ seconds | default(0) }}
"""


# -- loading (unit) ---------------------------------------------------------------------------

@pytest.mark.unit
def test_load_takes_the_variables_as_a_dict_read_as_set_reads_them(tmp_path):
    job = submarine_py.load(str(write_job(tmp_path, GREETING_JOB)),
                            {"greeting": "hi: there # not a comment", "seconds": "2", "fail_once": True},
                            backend="local")
    assert isinstance(job, Job) and job.name == "api-hello" and job.backend == "local"
    assert job.why_backend == ""  # named, so no reason is given
    command = job.plan.tasks[0].command
    assert 'echo "hi: there # not a comment from' in command  # one YAML value, whatever it holds
    assert "sleep 2" in command and "exit 3" in command
    envs = job.environments()
    assert set(envs) == {"worker:0", "worker:1"} and envs["worker:1"][0]["SUBM_INDEX"] == "1"


@pytest.mark.unit
def test_load_without_a_backend_says_why_it_chose_local(tmp_path):
    job = submarine_py.load(str(write_job(tmp_path, GREETING_JOB)), {"greeting": "hi"})
    assert job.backend == "local" and job.why_backend == " (no HADOOP_CONF_DIR)"


@pytest.mark.unit
def test_variables_that_set_could_not_give_are_bad_input_naming_each(tmp_path):
    path = str(write_job(tmp_path, GREETING_JOB))
    with pytest.raises(SpecError) as caught:
        submarine_py.load(path, {"greeting": ["a", "list"], "not an identifier": 1})
    assert [p for p, _ in caught.value.problems] == ["variables.greeting", "variables"]
    with pytest.raises(SpecError, match="greeting"):
        submarine_py.load(path)  # the template needs it
    with pytest.raises(SpecError, match="cannot read"):
        submarine_py.load(str(tmp_path / "missing.yaml"))


@pytest.mark.unit
@pytest.mark.parametrize("call", [lambda: submarine_py.status("nonsense"), lambda: submarine_py.wait("x y"),
                                  lambda: submarine_py.kill("../etc"), lambda: submarine_py.logs("nope")])
def test_a_malformed_id_is_bad_input_before_any_backend_is_asked(call):
    with pytest.raises(SpecError, match="is not a job id"):
        call()


@pytest.mark.unit
def test_bad_log_options_are_bad_input_naming_each():
    with pytest.raises(SpecError) as caught:
        submarine_py.logs("local_x", role="../x", index=-1, attempt=0, tail=-5)
    assert [p for p, _ in caught.value.problems] == ["role", "index", "attempt", "tail"]


@pytest.mark.unit
def test_an_unknown_job_is_job_not_found():
    with pytest.raises(JobNotFoundError, match="no local job local_20000101-000000_abcdef"):
        submarine_py.status("local_20000101-000000_abcdef")
    with pytest.raises(SpecError, match="timeout"):
        submarine_py.wait("local_20000101-000000_abcdef", timeout=-1)


@pytest.mark.unit
def test_a_client_librarys_error_becomes_a_backend_error_without_its_traceback(monkeypatch):
    """What requests (or skein) raises is the cluster's trouble, said in the package's words."""
    import submarine_py.client as client

    class Unreachable:
        def status(self, app_id):
            raise requests.ConnectionError("Connection refused by 10.0.0.1:8088")

    monkeypatch.setattr(client, "_backend_for", lambda app_id: Unreachable())
    with pytest.raises(BackendError, match="ConnectionError: Connection refused") as caught:
        submarine_py.status("application_1_1")
    assert isinstance(caught.value, SubmarineError)
    assert caught.value.__suppress_context__ and caught.value.__cause__ is None

    class NoDisk:
        def status(self, app_id):
            raise PermissionError(13, "Permission denied", "/home/x/.submarine/local")

    monkeypatch.setattr(client, "_backend_for", lambda app_id: NoDisk())
    with pytest.raises(BackendError, match="^Permission denied: /home/x/.submarine/local$"):
        submarine_py.status("local_x")


@pytest.mark.unit
def test_a_bug_of_ours_keeps_its_own_traceback(monkeypatch):
    import submarine_py.client as client

    def broken(app_id):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(client, "_backend_for", broken)
    with pytest.raises(ZeroDivisionError):
        submarine_py.status("local_x")


@pytest.mark.unit
def test_importing_part_of_the_package_imports_no_api_and_no_backend():
    import subprocess
    import sys

    code = ("import sys, submarine_py.jobfile; "
            "print(sorted(m for m in sys.modules if m in ('submarine_py.client', 'submarine_py.backends.registry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(submarine_py.__all__) >= {"load", "prepare", "submit", "wait", "run", "status", "kill", "logs",
                                         "write_logs", "jobs", "JobReport", "SubmarineError", "WaitTimeout"}


# -- driving real jobs (local) -----------------------------------------------------------------

@pytest.mark.local
def test_submit_detached_then_wait_status_and_logs(tmp_path, no_leftovers):
    job = submarine_py.load(str(write_job(tmp_path, GREETING_JOB)), {"greeting": "hello", "fail_once": True,
                                                                    "restarts": 1}, backend="local")
    app_id = submarine_py.submit(job)
    no_leftovers.append(app_id)
    assert app_id.startswith("local_")

    seen = []
    report = submarine_py.wait(app_id, timeout=60, on_update=seen.append)
    assert isinstance(report, JobReport) and report.final
    assert report.state == JobState.SUCCEEDED and report.attempts == 2, report.diagnostics
    assert [(t.id, t.state, t.restarts) for t in report.tasks] == [
        ("worker:0", TaskState.SUCCEEDED, 1), ("worker:1", TaskState.SUCCEEDED, 1)]
    assert seen and seen[-1].state == JobState.SUCCEEDED

    assert submarine_py.status(app_id) == report  # the same report, asked again
    assert [j.app_id for j in submarine_py.jobs(include_finished=True, backend="local")] == [app_id]

    text = submarine_py.logs(app_id, role="worker", index=1)
    assert "==> logs/worker-1.stdout <==" in text
    assert "hello from 1, attempt 0" in text and "hello from 1, attempt 1" in text
    first = submarine_py.logs(app_id, role="worker", index=1, attempt=1)
    assert "hello from 1, attempt 0" in first and "attempt 1\n" not in first
    assert submarine_py.logs(app_id, role="worker", index=0, tail=1).endswith("hello from 0, attempt 1\n")
    out = io.StringIO()
    submarine_py.write_logs(app_id, out)
    assert out.getvalue().startswith("==> am.log <==") and "gang ready" in out.getvalue()


@pytest.mark.local
def test_wait_with_a_timeout_leaves_the_job_running_and_kill_stops_it(tmp_path, no_leftovers):
    job = submarine_py.load(str(write_job(tmp_path, GREETING_JOB)), {"greeting": "zzz", "seconds": 300},
                            backend="local")
    app_id = submarine_py.submit(job)
    no_leftovers.append(app_id)
    wait_for(lambda: submarine_py.status(app_id).running == 2, timeout=60, what="both workers running")

    with pytest.raises(WaitTimeout) as caught:
        submarine_py.wait(app_id, timeout=0.5)
    assert isinstance(caught.value, TimeoutError) and caught.value.report.state == JobState.RUNNING
    assert f"{app_id} is still RUNNING after 0.5 s" in str(caught.value)
    # Waiting ended while the workers sleep their 300 s, and the job did not: both still run.
    # (How soon after its timeout wait() returns: bench/latencies.py.)
    after = submarine_py.status(app_id)
    assert after.state == JobState.RUNNING and after.running == 2 and processes_of(app_id)

    report = submarine_py.kill(app_id)
    assert report.state == JobState.KILLED and report.final
    assert "killed by `subm kill`" in report.diagnostics
    assert {t.state for t in report.tasks} == {TaskState.KILLED}
    wait_for(lambda: not processes_of(app_id), timeout=30, what="no process of the job left")
    assert submarine_py.wait(app_id, timeout=5) == report  # an ended job: at once


@pytest.mark.local
def test_run_submits_and_waits_and_a_failure_is_a_report_not_an_error(tmp_path, no_leftovers):
    job = submarine_py.load(str(write_job(tmp_path, GREETING_JOB)), {"greeting": "once", "fail_once": True},
                            backend="local")
    prepared = submarine_py.prepare(job)
    assert "local backend" in prepared.describe()
    report = submarine_py.run(job)
    no_leftovers.append(report.app_id)
    assert report.state == JobState.FAILED and "worker:1 failed with exit code 3" in report.diagnostics
