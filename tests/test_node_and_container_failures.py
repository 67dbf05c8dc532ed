"""What the ApplicationMaster does when machines, launches or the AM itself fail.

Driven through the ``FakeContainers`` of ``test_gang_scheduling_and_restart_policies.py`` (no processes, no HTTP):
executors that fall silent (a dead machine says nothing), containers that end before
their executor registers, and a new AM attempt that takes a job over.
"""
import time
from typing import List

import pytest

from submarine_py.backends.yarn.am.main import app_attempt
from submarine_py.backends.yarn.am.exits import tidy as _tidy
from submarine_py.plan import make_plan
from submarine_py.report import JobReport
from submarine_py.am.master import ApplicationMaster
from submarine_py.am.records import Executor
from submarine_py.am.recovery import MAX_FAILED_LAUNCHES
from submarine_py.am.containers import Ended
from test_gang_scheduling_and_restart_policies import WORKERS, FakeContainers, tasks_by_id
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit


class Freezing(FakeContainers):
    """Executors of the tasks in ``freeze`` stop calling the AM once their first command runs,
    as when their machine dies (no exit, no connection closed)."""

    def __init__(self, outcome, freeze, **kw):
        super().__init__(outcome, **kw)
        self.freeze = set(freeze)
        self.frozen: List[str] = []
        self.lost_calls: List[str] = []

    def poll(self):
        for ex_id, ex in self.executors.items():
            if ex["alive"] and ex["task"].id in self.freeze and any(r[0] == ex["task"].id for r in self.runs) \
                    and ex_id not in self.frozen and not ex.get("replacement"):
                self.frozen.append(ex_id)
        saved = {ex_id: self.executors[ex_id]["alive"] for ex_id in self.frozen}
        for ex_id in self.frozen:  # silent: neither polled nor reported, unless killed
            self.executors[ex_id]["alive"] = self.executors[ex_id].get("killed", False)
        ended = super().poll()
        for ex_id, alive in saved.items():
            if not self.executors[ex_id].get("killed"):
                self.executors[ex_id]["alive"] = alive
        return ended

    def launch(self, task, env):
        ex_id = super().launch(task, env)
        self.executors[ex_id]["replacement"] = bool(self.runs)
        return ex_id

    def lost(self, executor):
        self.lost_calls.append(executor)
        super().lost(executor)


def am_for(spec: dict, driver) -> ApplicationMaster:
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "local_test", driver)
    am.supervision.lost_after_seconds = 0.3
    driver.am = am
    return am


# -- a machine that dies ------------------------------------------------------------------

def test_a_silent_executor_is_declared_lost_its_container_released_and_the_gang_restarted():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    driver = Freezing(lambda role, index, attempt: None if attempt == 0 else 0, freeze={"worker:1"})
    am = am_for(spec, driver)
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2
    assert driver.lost_calls == ["worker-1-e2"]  # its container released, the machine avoided
    assert sorted((t, a) for t, a, _ in driver.runs) == [("worker:0", 0), ("worker:0", 1),
                                                         ("worker:1", 0), ("worker:1", 1)]
    messages = " | ".join(e["message"] for e in report["events"])
    assert "no heartbeat from its executor on 127.0.0.1" in messages and "declared lost" in messages
    # Were it to come back, the AM tells it to leave: its task has another executor now.
    assert [i["op"] for i in am.next_instructions("worker-1-e2", 0, 0)] == ["exit"]


def test_executors_lost_together_are_one_failure_of_the_gang():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    driver = Freezing(lambda role, index, attempt: None if attempt == 0 else 0, freeze={"worker:0", "worker:1"})
    report = am_for(spec, driver).run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2
    assert sorted(driver.lost_calls) == ["worker-0-e1", "worker-1-e2"]


def test_a_lost_executor_under_policy_never_restarts_the_gang_since_its_node_is_at_fault():
    """``never`` is about the program's failures: a lost node spends max_cluster_restarts."""
    spec = dict(WORKERS, restart={"policy": "never"})
    driver = Freezing(lambda role, index, attempt: None if attempt == 0 else 0, freeze={"worker:1"})
    report = am_for(spec, driver).run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2 and report["restarts_by_cause"] == {"node_lost": 1}
    messages = " | ".join(e["message"] for e in report["events"])
    assert "worker:1 was lost with its node (attempt 1): no heartbeat from its executor" in messages


def test_a_lost_executor_fails_the_job_saying_why_once_the_clusters_restarts_are_spent():
    spec = dict(WORKERS, restart={"policy": "never", "max_cluster_restarts": 0})
    driver = Freezing(lambda role, index, attempt: None, freeze={"worker:1"})
    report = am_for(spec, driver).run().to_dict()
    assert report["state"] == "FAILED"
    assert "worker:1 was lost with its node (attempt 1): no heartbeat from its executor" in report["diagnostics"]
    assert "max_cluster_restarts is 0" in report["diagnostics"]
    assert tasks_by_id(report)["worker:1"]["cause"] == "node_lost"


def test_the_jobs_lost_after_seconds_sets_the_silence_and_the_heartbeat_executors_are_told():
    for lost, heartbeat in ((6, 2.0), (30, 2.0), (1.5, 0.5)):
        plan = make_plan(spec_from_dict(dict({"name": "t", "timeouts": {"lost_after_seconds": lost}}, **WORKERS)))
        am = ApplicationMaster(plan, "local_test", FakeContainers(lambda role, index, attempt: 0))
        assert (am.supervision.lost_after_seconds, am.gang.heartbeat_seconds) == (lost, heartbeat)
        reply = am.on_register({"executor": "e0", "role": "worker", "index": 0, "host": "h", "port": 1})
        assert reply["heartbeat"] == heartbeat


def test_an_am_that_was_not_running_does_not_blame_the_executors():
    """A gap in the AM's own loop (suspended, starved of CPU) is not the executors' silence."""
    am = am_for(WORKERS, FakeContainers(lambda role, index, attempt: 0))
    am.supervision.lost_after_seconds = 6.0
    am.job.executors["e1"] = Executor("e1", "worker", registered=True, last_seen=time.monotonic() - 8.0)
    assert [ex_id for ex_id, _ in am.supervision.silent_executors()] == ["e1"]
    am.forgive_stall(5.0)  # 8 s without a word, 5 of them the AM's own (the shell's loop)
    assert am.supervision.silent_executors() == []


# -- containers that never start ---------------------------------------------------------

class FailingLaunches(FakeContainers):
    """Containers the AM launches, some of which end before their executor registers: ``fail``
    scripts them wave by wave (each a list of (exit code, diagnostics, started_at or None) for the
    first launches of one round of the AM's loop); ``first_ends`` makes the end of worker:0's first container, given its id. The
    others register as the cluster starts them."""

    def __init__(self, outcome, fail, first_ends=None):
        super().__init__(outcome)
        self.fail = [list(wave) for wave in fail if wave]
        self.wave = None  # this round's
        self.first_ends = first_ends
        self.ending = []

    def launch(self, task, env):
        ex_id = super().launch(task, env)
        ending = None
        if self.first_ends is not None and task.id == "worker:0":
            ending, self.first_ends = self.first_ends(ex_id), None
        else:
            if self.wave is None and self.fail:
                self.wave = self.fail.pop(0)
            if not self.wave:
                return ex_id
            code, diag, started = self.wave.pop(0)
            ending = Ended(ex_id, code, diag, role=task.role, started_at=started() if callable(started) else started)
        if ending is not None:
            self.executors[ex_id]["alive"] = False
            self.ending.append(ending)
        return ex_id

    def poll(self):
        out, self.ending, self.wave = self.ending, [], None
        return out + super().poll()


def launching_am(spec: dict, fail, outcome=lambda role, index, attempt: 0, first_ends=None):
    plan = make_plan(spec_from_dict(dict({"name": "t"}, **spec)))
    driver = FailingLaunches(outcome, fail, first_ends)
    am = ApplicationMaster(plan, "application_1_1", driver)
    driver.am = am
    return am, driver


YARN_127 = ("YARN container container_1_01_000002 on node1:8042 FAILED, exit status 127: Container exited "
            "with a non-zero exit code 127; its log ends: exec: /opt/py/bin/python3: not found")


def test_a_container_that_never_starts_fails_the_job_at_once_under_policy_never():
    spec = dict(WORKERS, restart={"policy": "never"})
    am, _ = launching_am(spec, [[(127, YARN_127, None)]])
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert "worker:0 failed with its container ended before the executor registered (exit code 127" in diag
    assert "exec: /opt/py/bin/python3: not found" in diag  # YARN's reason is kept
    assert "restart policy 'never'" in diag
    assert tasks_by_id(report)["worker:0"]["exit_code"] == 127


def test_containers_failing_together_at_launch_are_one_failure():
    """Every container of a role with a missing interpreter fails at once: one restart, not one each."""
    long_ago = time.time() - 60
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    am, _ = launching_am(spec, [[(127, YARN_127, long_ago), (127, YARN_127, long_ago)]])
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2


def test_launches_failing_again_and_again_end_the_job_whatever_restarts_remain():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 50})
    waves = [[(1, "Resource file:/staging/train.py changed on src filesystem", time.time)]
             for _ in range(MAX_FAILED_LAUNCHES)]
    am, _ = launching_am(spec, waves)
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert f"worker:0 failed to launch {MAX_FAILED_LAUNCHES} times in a row" in diag
    assert "changed on src filesystem" in diag
    assert report["attempts"] == MAX_FAILED_LAUNCHES  # the first failures were restarts


def test_a_container_the_driver_turned_down_is_replaced_without_counting():
    turned_down = lambda ex_id: Ended(ex_id, None, "placed on a dead machine: released", role="worker",  # noqa: E731
                                      counts=False)
    am, driver = launching_am(dict(WORKERS, restart={"policy": "never"}), [], first_ends=turned_down)
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]


# -- an AM lost, and the next YARN attempt ---------------------------------------------------

def saved_state(attempt: int, restarts: int) -> JobReport:
    """What an AM saved: ``attempt`` counted as the AM counts (from 0; reports show it from 1)."""
    return JobReport.from_dict({
        "app_id": "application_1_1", "attempts": restarts + 1, "state": "RUNNING", "phase": "RUNNING",
        "timings": {"gang_ready_seconds": 4.2},
        "events": [{"time": 1.0, "message": "gang ready: all 2 tasks registered (attempt 1), 4.2 s after submission"}],
        "tasks": [{"role": "worker", "index": i, "attempt": attempt + 1, "restarts": restarts} for i in (0, 1)]})


def test_a_new_am_attempt_restarts_the_gang_counting_the_loss_as_a_restart():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 2})
    am, driver = launching_am(spec, [])
    am.take_over(saved_state(attempt=0, restarts=0), lost_attempts=1)
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2
    assert {t["attempt"] for t in report["tasks"]} == {2}  # shown from 1
    assert {env["SUBM_ATTEMPT"] for _, _, env in driver.runs} == {"1"}
    messages = [e["message"] for e in report["events"]]
    assert messages[0].startswith("gang ready")  # the earlier AM's decisions are kept
    assert any("the ApplicationMaster was lost" in m for m in messages)
    assert report["timings"]["gang_ready_seconds"] == 4.2


def test_a_new_am_attempt_with_no_restart_left_fails_the_job():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 2})
    am, driver = launching_am(spec, [])
    am.take_over(saved_state(attempt=2, restarts=2), lost_attempts=1)
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    assert "the ApplicationMaster was lost" in report["diagnostics"]
    assert "after 2 restarts" in report["diagnostics"]
    assert report["attempts"] == 3 and driver.runs == []


def test_without_a_readable_state_each_lost_am_attempt_counts_as_a_restart():
    spec = dict(WORKERS, restart={"policy": "task", "max_restarts": 3})
    am, _ = launching_am(spec, [])
    am.take_over(None, lost_attempts=2)
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert {t["restarts"] for t in report["tasks"]} == {2} and {t["attempt"] for t in report["tasks"]} == {3}


# -- YARN's words -------------------------------------------------------------------------

def test_the_app_attempt_comes_from_the_container_id():
    assert app_attempt("container_e17_1795383153123_0003_02_000001") == 2
    assert app_attempt("container_1795383153123_0003_01_000002") == 1
    assert app_attempt(None) == 1


def test_yarn_diagnostics_lose_their_stack_frames_stamps_and_repeats():
    raw = ("[2026-11-22 21:44:49.813]Exception from container-launch.\nContainer id: c_1\nExit code: 127\n"
           "\tat org.apache.hadoop.util.Shell.runCommand(Shell.java:1008)\n"
           "[2026-11-22 21:44:50.106]Container exited with a non-zero exit code 127.\n"
           "[2026-11-22 21:44:50.112]Container exited with a non-zero exit code 127.\n")
    assert _tidy(raw) == ("Exception from container-launch. Container id: c_1 Exit code: 127 "
                          "Container exited with a non-zero exit code 127.")
