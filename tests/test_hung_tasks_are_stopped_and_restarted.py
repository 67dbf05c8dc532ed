"""A task that prints nothing for ``timeouts.hang_seconds`` (and, where its GPUs are sampled,
uses none) has hung: the AM has its executor stop it, and the failure is the program's, under
the restart policy, with "no output for N s" and the last lines it printed in the diagnostics.

The AM's decision through the fake containers of
``test_gang_scheduling_and_restart_policies.py`` (which play the executors' heartbeats), then
real jobs on the local backend.
"""
import re
import time
from typing import Callable, Dict

import pytest

from conftest import run_json, subm, wait_for, write_job
from submarine_py.am.master import ApplicationMaster
from submarine_py.jobfile import spec_from_dict
from submarine_py.output import format_report
from submarine_py.plan import make_plan
from submarine_py.report import JobReport
from test_gang_scheduling_and_restart_policies import WORKERS, FakeContainers, tasks_by_id

Quietness = Callable[[str, int], float]  # (task id, attempt) -> seconds it has printed nothing


class Quiet(FakeContainers):
    """Executors whose heartbeats say how long their task has printed nothing (``quiet``), and
    which stop a task the AM finds hung, reporting its end as a real executor does."""

    def __init__(self, outcome, quiet: Quietness):
        super().__init__(outcome)
        self.quiet = quiet
        self.hung: Dict[str, float] = {}

    def poll(self):
        for ts in self.am.job.tasks.values():
            if ts.state == "RUNNING" and ts.executor:
                self.am.heard_from(ts.executor, quiet=self.quiet(ts.plan.id, ts.attempt), attempt=ts.attempt)
        return super().poll()

    def on_hung(self, ex_id, instr):
        self.hung[ex_id] = instr["quiet"]
        self.am.on_exit({"executor": ex_id, "attempt": instr["attempt"], "exit_code": 143, "stopped": False,
                         "hung": instr["quiet"], "stderr_tail": "loading batch 7",
                         "stdout_tail": "step 2 loss 0.31\nstep 3 loss 0.30"})


def am_with(spec: dict, outcome, quiet: Quietness):
    fake = Quiet(outcome, quiet)
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "local_test", fake)
    fake.am = am
    return am, fake


def events(report) -> str:
    return "\n".join(e["message"] for e in report["events"])


HANGS = {"timeouts": {"hang_seconds": 60}}


@pytest.mark.unit
def test_a_task_silent_for_hang_seconds_is_stopped_as_hung_and_the_gang_restarted():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1}, **HANGS)
    am, fake = am_with(spec, lambda role, index, attempt: 0 if attempt or index == 0 else None,
                       lambda task, attempt: 61.0 if (task, attempt) == ("worker:1", 0) else 1.0)
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["restarts_by_cause"] == {"hung": 1} and report["attempts"] == 2
    assert list(fake.hung) == ["worker-1-e2"]
    log = events(report)
    assert "worker:1 printed nothing for 61 s (timeouts.hang_seconds 60): stopping it as hung (attempt 1)" in log
    assert "restarting the gang: attempt 2 of at most 2, because worker:1 failed with no output for 61 s: " \
           "hung (timeouts.hang_seconds 60) (attempt 1)" in log


@pytest.mark.unit
def test_a_hung_task_with_no_restart_left_fails_the_job_quoting_what_it_printed():
    am, _ = am_with(dict(WORKERS, **HANGS), lambda role, index, attempt: None,
                    lambda task, attempt: 61.0 if task == "worker:1" else 1.0)
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert diag.startswith("worker:1 failed with no output for 61 s: hung (timeouts.hang_seconds 60) (attempt 1)")
    assert "job failed (max_restarts is 0)" in diag
    assert "last lines of worker:1's stderr:\n    loading batch 7" in diag
    assert "last lines of worker:1's stdout:\n    step 2 loss 0.31\n    step 3 loss 0.30" in diag
    worker1 = tasks_by_id(report)["worker:1"]
    assert (worker1["state"], worker1["cause"], worker1["exit_code"]) == ("FAILED", "hung", 143)
    assert ["worker:1", "HUNG", "143"] in [line.split()[:3] for line in format_report(JobReport.from_dict(report))
                                           .splitlines()]


def running_am(spec: dict, quiet: Quietness):
    """An AM whose gang runs (commands that never end), polled by hand."""
    am, fake = am_with(spec, lambda role, index, attempt: None, quiet)
    for _ in range(3):
        am._launch_and_poll()
    assert {t.state for t in am.job.tasks.values()} == {"RUNNING"}
    return am, fake


@pytest.mark.unit
def test_a_long_silence_is_named_before_it_becomes_a_hang():
    am, fake = running_am(dict(WORKERS, **HANGS), lambda task, attempt: 40.0 if task == "worker:1" else 2.0)
    am._launch_and_poll()
    with am.job.lock:
        am.supervision.check_hangs()
    am._launch_and_poll()
    report = am.report()
    assert not fake.hung
    assert [e.message for e in report.events][-1] == \
        "worker:1 has printed nothing for 40 s of timeouts.hang_seconds 60 (attempt 1)"
    assert 40 <= tasks_by_id(report.to_dict())["worker:1"]["quiet_seconds"] < 45
    text = format_report(report)
    assert re.search(r"! worker:1 quiet for 4\d s of 60 \(timeouts.hang_seconds", text), text
    assert "worker:0 quiet" not in text  # 2 s: far from it


@pytest.mark.unit
def test_a_task_busy_on_its_gpus_is_not_hung_though_it_prints_nothing():
    am, fake = running_am(dict(WORKERS, **HANGS), lambda task, attempt: 61.0)
    now = time.time()
    for index in (0, 1):
        ex = am.job.tasks[("worker", index)].executor
        am.on_gpu({"executor": ex, "samples": [
            {"time": now, "devices": [{"id": "0", "utilization": 0 if index else 80, "memory_used_mb": 1}]}]})
    am._launch_and_poll()
    with am.job.lock:
        am.supervision.check_hangs()
    am._launch_and_poll()  # the executors hear what the AM decided
    assert list(fake.hung) == ["worker-1-e2"]  # worker:0's GPU is busy; worker:1's idle: hung


@pytest.mark.unit
def test_untracked_tasks_and_jobs_without_hang_seconds_are_not_watched():
    ps = {"roles": {"worker": {"instances": 1, "command": "train"},
                    "ps": {"instances": 1, "command": "serve", "tracked": False}}, **HANGS}
    am, fake = running_am(ps, lambda task, attempt: 99999.0 if task == "ps:0" else 1.0)
    with am.job.lock:
        am.supervision.check_hangs()
    am._launch_and_poll()
    assert not fake.hung
    am, fake = running_am(WORKERS, lambda task, attempt: 99999.0)
    with am.job.lock:
        am.supervision.check_hangs()
    am._launch_and_poll()
    assert not fake.hung and am.report().tasks[0].quiet_seconds >= 99999


@pytest.mark.unit
def test_hang_seconds_is_a_whole_number_of_seconds_and_off_by_default():
    assert spec_from_dict(dict({"name": "t"}, **WORKERS)).timeouts.hang_seconds is None
    assert spec_from_dict(dict({"name": "t", "timeouts": {"hang_seconds": 1200}}, **WORKERS)).timeouts.hang_seconds \
        == 1200
    from submarine_py.errors import SpecError
    for bad in (0, -5, "20m", 1.5):
        with pytest.raises(SpecError, match="timeouts.hang_seconds"):
            spec_from_dict(dict({"name": "t", "timeouts": {"hang_seconds": bad}}, **WORKERS))


# -- real jobs on the local backend ----------------------------------------------------------------

def hanging_job(tmp_path, policy: str, hang_seconds: int = 3):
    """worker:0 prints a line, then its first attempt hangs (sleeps); a later attempt ends at once."""
    return write_job(tmp_path / "job", f"""\
        name: hangs
        restart: {{policy: {policy}, max_restarts: 1}}
        timeouts: {{hang_seconds: {hang_seconds}, stop_grace_seconds: 1}}
        roles:
          worker:
            command: >-
              echo "step 1 of attempt $SUBM_ATTEMPT";
              if [ "$SUBM_ATTEMPT" = 0 ]; then sleep 120; fi
    """)


@pytest.mark.local
def test_a_local_task_that_prints_then_hangs_is_failed_and_restarted_by_its_policy(tmp_path, subm_home, no_leftovers):
    rc, report, err = run_json("run", str(hanging_job(tmp_path, "gang")), "--backend", "local", timeout=120)
    no_leftovers.append(report["app_id"])
    assert rc == 0, report
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    assert report["restarts_by_cause"] == {"failed": 0, "hung": 1, "preempted": 0, "node_lost": 0, "resized": 0}
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert re.search(r"worker:0 printed nothing for \d+ s \(timeouts.hang_seconds 3\): stopping it as hung", am_log)
    assert re.search(r"worker:0 failed with no output for \d+ s: hung", am_log), am_log
    assert "step 1 of attempt 0" in am_log  # the last lines it printed


@pytest.mark.local
def test_a_local_task_that_hangs_with_no_restart_left_fails_saying_what_it_printed(tmp_path, subm_home,
                                                                                   no_leftovers):
    rc, report, err = run_json("run", str(hanging_job(tmp_path, "never")), "--backend", "local", timeout=120)
    no_leftovers.append(report["app_id"])
    assert rc == 1
    diag = report["diagnostics"]
    assert re.match(r"worker:0 failed with no output for \d+ s: hung \(timeouts.hang_seconds 3\)", diag), diag
    assert "last lines of worker:0's stdout:\n    step 1 of attempt 0" in diag
    assert report["tasks"][0]["cause"] == "hung"


@pytest.mark.local
def test_a_local_task_that_keeps_printing_is_not_hung(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: chatty
        timeouts: {hang_seconds: 4}
        roles:
          worker:
            command: for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "tick $i" >&2; sleep 0.5; done
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local", timeout=120)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 1, report
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert "stopping it as hung" not in am_log


@pytest.mark.local
def test_subm_status_shows_a_task_getting_close_to_its_hang(tmp_path, subm_home, no_leftovers):
    rc, out, err = subm("run", str(hanging_job(tmp_path, "never", hang_seconds=30)), "--backend", "local",
                        "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    try:
        def quiet_for_a_while():
            rc, report, _ = run_json("status", app_id)
            return rc == 0 and (report["tasks"][0]["quiet_seconds"] or 0) >= 16
        wait_for(quiet_for_a_while, timeout=90, what="worker:0 quiet for 16 s", interval=1)
        rc, text, err = subm("status", app_id)
        assert rc == 0, err
        assert re.search(r"! worker:0 quiet for \d+ s of 30 \(timeouts.hang_seconds", text), text
    finally:
        subm("kill", app_id)
