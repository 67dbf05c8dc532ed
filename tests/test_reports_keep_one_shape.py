"""The typed report and the states: one shape from the AM to the disk, the wire and the CLI."""
import json

import pytest

from submarine_py.backends.local.backend import LocalBackend
from submarine_py.output import format_report, public_report
from submarine_py.plan import make_plan
from submarine_py.report import Event, JobReport, TaskReport, Timings
from submarine_py.states import JobState, Phase, RestartPolicy, TaskState
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

#: A report.json as the AM wrote it before the report was typed (no ``final`` key).
WRITTEN_BY_THE_AM = {
    "app_id": "local_20260101-120000_ab12cd", "name": "ddp", "framework": "pytorch", "backend": "local",
    "state": "FAILED", "phase": "DONE", "attempts": 2,
    "diagnostics": "worker:1 failed with exit code 3 (attempt 1); job failed (after 1 restart)",
    "running": 0, "total": 2,
    "tasks": [
        {"role": "worker", "index": 0, "state": "STOPPED", "exit_code": None, "restarts": 1, "attempt": 1,
         "host": "127.0.0.1", "address": "127.0.0.1:4000", "tracked": True, "log": "/j/logs/worker-0.stdout",
         "executor": "worker-0-e1", "command": "python train.py"},
        {"role": "worker", "index": 1, "state": "FAILED", "exit_code": 3, "restarts": 1, "attempt": 1,
         "host": "127.0.0.1", "address": "127.0.0.1:4001", "tracked": True, "log": "/j/logs/worker-1.stdout",
         "executor": "worker-1-e2", "command": "python train.py",
         "container_id": "container_1_0001_01_000002", "node_http": "node1:8042"},
    ],
    "cluster_spec": {"worker": ["127.0.0.1:4000", "127.0.0.1:4001"]},
    "timings": {"gang_ready_seconds": 0.3, "total_seconds": 4.1},
    "status_url": "http://127.0.0.1:4100",
    "events": [{"time": 1767268800.5, "message": "gang ready: all 2 tasks registered (attempt 0) in 0.30 s"}],
}


def test_a_report_file_reads_as_a_typed_report():
    report = JobReport.from_dict(WRITTEN_BY_THE_AM)
    assert report.state is JobState.FAILED and report.phase is Phase.DONE
    assert report.tasks[1] == TaskReport(role="worker", index=1, state=TaskState.FAILED, exit_code=3, restarts=1,
                                         attempt=1, host="127.0.0.1", address="127.0.0.1:4001", tracked=True,
                                         log="/j/logs/worker-1.stdout", executor="worker-1-e2",
                                         command="python train.py", container_id="container_1_0001_01_000002",
                                         node_http="node1:8042")
    assert report.timings == Timings(gang_ready_seconds=0.3, total_seconds=4.1)
    assert report.events[0].message.startswith("gang ready")


def test_to_dict_and_from_dict_round_trip_through_json():
    report = JobReport.from_dict(WRITTEN_BY_THE_AM)
    again = JobReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == report
    assert report.to_dict() == dict(WRITTEN_BY_THE_AM, final=False)


def test_a_report_with_only_an_id_round_trips():
    report = JobReport(app_id="application_1_0001", state=JobState.RUNNING, attempts=None,
                       yarn_state="RUNNING", tracking_url="http://rm:8088/proxy/application_1_0001/",
                       events=(Event(1.0, "x"),), final=True)
    assert JobReport.from_dict(report.to_dict()) == report


def test_the_public_json_keeps_the_readme_shape():
    public = public_report(JobReport.from_dict(WRITTEN_BY_THE_AM))
    assert list(public)[:8] == ["app_id", "name", "state", "attempts", "diagnostics", "tasks", "timings", "backend"]
    assert public["state"] == "FAILED" and type(public["state"]) is str
    assert public["tasks"][1] == {"role": "worker", "index": 1, "state": "FAILED", "exit_code": 3, "restarts": 1,
                                  "host": "127.0.0.1", "log": "/j/logs/worker-1.stdout", "tracked": True,
                                  "gpu": None, "cause": None, "quiet_seconds": None,
                                  "restarts_by_cause": {"failed": 0, "hung": 0, "preempted": 0, "node_lost": 0, "resized": 0}}
    # Added with the cluster's own restart budget: always every cause, 0 where none.
    assert public["restarts_by_cause"] == {"failed": 0, "hung": 0, "preempted": 0, "node_lost": 0, "resized": 0}
    assert public["timings"] == {"gang_ready_seconds": 0.3, "total_seconds": 4.1}


def test_the_text_report_names_the_state_and_the_failed_task():
    text = format_report(JobReport.from_dict(WRITTEN_BY_THE_AM))
    assert text.startswith("Job ddp (local_20260101-120000_ab12cd) FAILED after 2 attempts in 4.1 s")
    assert ["worker:1", "FAILED", "3", "1", "127.0.0.1"] in [line.split()[:5] for line in text.splitlines()]
    assert "Diagnostics: worker:1 failed with exit code 3" in text


def test_states_are_their_names_in_text_and_json():
    assert JobState.SUCCEEDED == "SUCCEEDED" and f"{JobState.KILLED}" == "KILLED" and str(TaskState.STOPPED) == "STOPPED"
    assert json.dumps([JobState.RUNNING, RestartPolicy.GANG]) == '["RUNNING", "gang"]'
    assert [s.value for s in JobState if s.is_terminal()] == ["SUCCEEDED", "FAILED", "KILLED"]
    assert RestartPolicy("never") is RestartPolicy.NEVER


def test_the_restart_section_reads_as_the_policy_enum():
    spec = spec_from_dict({"name": "t", "restart": {"policy": "task", "max_restarts": 2},
                              "roles": {"worker": {"command": "x"}}})
    assert spec.restart.policy is RestartPolicy.TASK
    assert spec.to_dict()["restart"] == {"policy": "task", "max_restarts": 2, "max_cluster_restarts": 10}


def test_the_local_request_is_what_dry_run_prints_and_submit_runs(tmp_path):
    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {"instances": 2, "command": "x"}}}))
    request = LocalBackend(home=str(tmp_path)).request(plan)
    assert request.job_dir == str(tmp_path / "local" / request.app_id)
    assert request.am_argv[1:] == ("-m", "submarine_py.backends.local.am_main", request.job_dir)
    assert request.job["spec"] == plan.job.to_dict()
    text = request.describe()
    assert "submarine_py.backends.local.am_main" in text and "worker:1: process" in text
    assert not (tmp_path / "local").exists()  # building the request submits nothing


def test_waiting_for_a_job_asks_less_often_while_its_gang_starts(monkeypatch):
    """While the AM's phase is STARTING the report changes with every task that registers and
    no outcome is due: on YARN each ask costs the cluster a proxied report of every task."""
    from submarine_py.backends import base
    from submarine_py.backends.yarn.client.backend import YarnBackend

    reports = iter([JobReport(app_id="a", state=JobState.RUNNING, phase=None),
                    JobReport(app_id="a", state=JobState.RUNNING, phase=Phase.STARTING),
                    JobReport(app_id="a", state=JobState.RUNNING, phase=Phase.RUNNING),
                    JobReport(app_id="a", state=JobState.SUCCEEDED, phase=Phase.DONE, final=True)])
    sleeps = []
    monkeypatch.setattr(base.time, "sleep", sleeps.append)
    backend = YarnBackend.__new__(YarnBackend)
    monkeypatch.setattr(backend, "status", lambda app_id: next(reports), raising=False)
    seen = []
    assert backend.wait("a", on_update=lambda r: seen.append(r.phase)).state == JobState.SUCCEEDED
    assert sleeps == [0.5, 2.0, 0.5]
    assert seen == [None, Phase.STARTING, Phase.RUNNING, Phase.DONE]
