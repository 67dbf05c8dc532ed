"""The cluster's faults are not the program's: a container YARN preempts, or whose node is lost,
is replaced without spending ``restart.max_restarts``; ``restart.max_cluster_restarts`` bounds
those restarts instead.

The decision alone (:class:`Restarts`), YARN's exit statuses read as causes, and the
ApplicationMaster driven through the fake containers of
``test_gang_scheduling_and_restart_policies.py`` (no processes, no HTTP).
"""
from typing import Dict, List, Tuple

import pytest

from submarine_py.am.containers import Ended
from submarine_py.am.master import ApplicationMaster
from submarine_py.backends.yarn.am.exits import cluster_cause
from submarine_py.errors import SpecError
from submarine_py.jobfile import spec_from_dict
from submarine_py.jobfile.model import RestartSpec
from submarine_py.output import format_report
from submarine_py.plan import make_plan
from submarine_py.report import JobReport
from submarine_py.restarts import Remedy, Restarts, Spent
from submarine_py.states import Cause, RestartPolicy
from test_gang_scheduling_and_restart_policies import WORKERS, FakeContainers, tasks_by_id

pytestmark = pytest.mark.unit

GANG, TASK, NEVER = RestartPolicy.GANG, RestartPolicy.TASK, RestartPolicy.NEVER


def restarts(policy: RestartPolicy, max_restarts: int = 0, max_cluster_restarts: int = 10) -> Restarts:
    return Restarts(RestartSpec(policy, max_restarts, max_cluster_restarts))


# -- the decision -------------------------------------------------------------------------------

@pytest.mark.parametrize("cause", [Cause.PREEMPTED, Cause.NODE_LOST])
def test_the_clusters_faults_restart_the_gang_with_no_max_restarts_left(cause):
    decision = restarts(GANG, max_restarts=0).after(cause, Spent(4, 4), Spent(4, 4))
    assert decision.remedy == Remedy.RESTART_GANG


def test_the_clusters_restarts_leave_the_programs_budget_whole():
    # Three restarts so far, two of them for the cluster's faults: one of max_restarts 2 is spent.
    assert restarts(GANG, max_restarts=2).after(Cause.FAILED, Spent(3, 2), Spent(3, 2)).remedy == Remedy.RESTART_GANG
    assert restarts(GANG, max_restarts=1).after(Cause.FAILED, Spent(3, 2), Spent(3, 2)).gives_up


def test_the_clusters_restarts_are_bounded_by_max_cluster_restarts():
    r = restarts(GANG, max_restarts=5, max_cluster_restarts=3)
    assert r.after(Cause.PREEMPTED, Spent(2, 2), Spent(2, 2)).remedy == Remedy.RESTART_GANG
    decision = r.after(Cause.PREEMPTED, Spent(3, 3), Spent(3, 3))
    assert decision.gives_up
    assert decision.why == "after 3 restarts for the cluster's faults (max_cluster_restarts)"
    assert restarts(GANG, max_cluster_restarts=0).after(Cause.NODE_LOST, Spent(), Spent()).why == \
        "max_cluster_restarts is 0"


def test_a_hang_is_the_programs_failure():
    assert restarts(GANG, max_restarts=0).after(Cause.HUNG, Spent(), Spent()).gives_up
    assert restarts(TASK, max_restarts=1).after(Cause.HUNG, Spent(), Spent()).remedy == Remedy.RESTART_TASK


def test_under_task_the_clusters_fault_restarts_the_task_alone_within_its_own_budget():
    r = restarts(TASK, max_restarts=0, max_cluster_restarts=2)
    assert r.after(Cause.PREEMPTED, Spent(9, 9), Spent(1, 1)).remedy == Remedy.RESTART_TASK
    assert r.after(Cause.PREEMPTED, Spent(0, 0), Spent(2, 2)).gives_up


def test_under_never_the_clusters_fault_restarts_the_gang_and_the_programs_ends_the_job():
    r = restarts(NEVER)
    assert r.after(Cause.PREEMPTED, Spent(), Spent()).remedy == Remedy.RESTART_GANG
    assert r.after(Cause.FAILED, Spent(1, 1), Spent(1, 1)).why == "restart policy 'never'"


def test_an_am_lost_spends_max_restarts_only():
    assert restarts(GANG, max_restarts=1).after_am_loss(0, [0, 0]).remedy == Remedy.RESTART_GANG


# -- the job file -------------------------------------------------------------------------------

def test_max_cluster_restarts_defaults_to_ten_and_is_bounded():
    job = {"name": "t", "roles": {"worker": {"command": "x"}}}
    assert spec_from_dict(job).restart.max_cluster_restarts == 10
    assert spec_from_dict(dict(job, restart={"max_cluster_restarts": 0})).restart.max_cluster_restarts == 0
    for bad in (-1, 101, "many", True):
        with pytest.raises(SpecError, match="restart.max_cluster_restarts"):
            spec_from_dict(dict(job, restart={"max_cluster_restarts": bad}))


# -- YARN's exit statuses -----------------------------------------------------------------------

@pytest.mark.parametrize("code, diagnostics, cause", [
    (-102, "Container preempted by scheduler", Cause.PREEMPTED),
    (-106, "Container Killed by ResourceManager", Cause.PREEMPTED),  # the NodeManager's record of it
    (143, "Container Killed by ResourceManager; Container killed on request. Exit code is 143", Cause.PREEMPTED),
    (None, "Container preempted by scheduler", Cause.PREEMPTED),     # the NodeManager forgot it
    (-100, "Container released on a *lost* node", Cause.NODE_LOST),
    (-101, "Most of the disks failed. 1/1 local-dirs are bad", Cause.NODE_LOST),
    (-104, "is running beyond physical memory limits", None),        # the program's memory
    (1, "Container exited with a non-zero exit code 1. Last 4096 bytes of stderr: preempted by scheduler", None),
    (137, "", None),
])
def test_yarns_exit_statuses_say_whose_fault_a_container_end_was(code, diagnostics, cause):
    assert cluster_cause(code, diagnostics) == cause


# -- the ApplicationMaster ----------------------------------------------------------------------

PREEMPTED = ("YARN container container_1_01_000003 on node2:8042 FAILED, exit status -102: "
             "Container preempted by scheduler")


class Preempting(FakeContainers):
    """The cluster takes the containers of ``take`` ((task id, attempt) pairs) once their
    command runs, as YARN's preemption does: they end with its exit status, no word from the
    executor."""

    def __init__(self, outcome, take: List[Tuple[str, int]], cause=Cause.PREEMPTED, **kw):
        super().__init__(outcome, **kw)
        self.take = list(take)
        self.cause = cause

    def poll(self):
        ended = super().poll()
        running = {ex["task"].id: ex_id for ex_id, ex in self.executors.items() if ex["alive"]}
        for task_id, attempt, _ in list(self.runs):
            if (task_id, attempt) in self.take and task_id in running:
                self.take.remove((task_id, attempt))
                ex_id = running[task_id]
                self.executors[ex_id]["alive"] = False
                ended.append(Ended(ex_id, -102, PREEMPTED, role="worker", cause=self.cause))
        return ended


def run_preempted(spec: dict, take, outcome=lambda role, index, attempt: 0 if attempt else None, **kw):
    """``outcome`` by default: the first attempt runs until taken, later ones succeed."""
    fake = Preempting(outcome, take, **kw)
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "application_1_1", fake)
    fake.am = am
    return am.run().to_dict(), fake


def events(report: Dict) -> str:
    return "\n".join(e["message"] for e in report["events"])


def test_a_preempted_task_restarts_the_gang_without_spending_max_restarts():
    report, fake = run_preempted(dict(WORKERS, restart={"policy": "gang", "max_restarts": 0}), [("worker:1", 0)])
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2 and report["restarts_by_cause"] == {"preempted": 1}
    assert {t["restarts"] for t in report["tasks"]} == {1}
    assert tasks_by_id(report)["worker:1"]["restarts_by_cause"] == {"preempted": 1}
    log = events(report)
    assert f"worker:1 was preempted (attempt 1): its container ended (exit code -102; {PREEMPTED})" in log
    assert "restarting the gang: attempt 2 (the cluster's fault: restart 1 of at most 10 for the cluster's " \
           "faults, no max_restarts spent), because worker:1 was preempted" in log
    # The rest of the gang is useless without worker:1: every container went back (worker:0's
    # too) and the whole gang was asked for again once it fit.
    assert "giving every container of the gang back until the cluster has room for all of it" in log
    assert "worker-0-e1" in fake.killed
    assert sorted((t, a) for t, a, _ in fake.runs if a == 1) == [("worker:0", 1), ("worker:1", 1)]
    assert {ex["task"].id for ex_id, ex in fake.executors.items() if ex_id not in ("worker-0-e1", "worker-1-e2")} \
        == {"worker:0", "worker:1"}


def test_a_preempted_task_under_task_restarts_alone():
    report, fake = run_preempted(dict(WORKERS, restart={"policy": "task"}), [("worker:1", 0)],
                                 outcome=lambda role, index, attempt: 0 if index == 0 or attempt else None)
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    tasks = tasks_by_id(report)
    assert (tasks["worker:0"]["restarts"], tasks["worker:1"]["restarts"]) == (0, 1)
    assert "restarting worker:1 alone: its attempt 2 (the cluster's fault" in events(report)


def test_a_job_preempted_over_and_over_fails_once_max_cluster_restarts_are_spent():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 5, "max_cluster_restarts": 2})
    report, _ = run_preempted(spec, [("worker:1", 0), ("worker:1", 1), ("worker:1", 2)],
                              outcome=lambda role, index, attempt: None)
    assert report["state"] == "FAILED"
    assert report["attempts"] == 3 and report["restarts_by_cause"] == {"preempted": 2}
    assert "worker:1 was preempted (attempt 3)" in report["diagnostics"]
    assert "job failed (after 2 restarts for the cluster's faults (max_cluster_restarts))" in report["diagnostics"]
    worker1 = tasks_by_id(report)["worker:1"]
    assert (worker1["state"], worker1["cause"], worker1["exit_code"]) == ("FAILED", "preempted", -102)
    text = format_report(JobReport.from_dict(report))
    assert ["worker:1", "PREEMPTED", "-102", "2", "(2", "preempted)"] in \
        [line.split()[:6] for line in text.splitlines()]
    assert "Restarts: 2 preempted (the cluster's faults spend no max_restarts)" in text


def test_a_failure_after_preemptions_still_has_its_max_restarts():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    # Attempt 1 of worker:1 is preempted, attempt 2 fails (exit 3), attempt 3 succeeds.
    report, _ = run_preempted(spec, [("worker:1", 0)],
                              outcome=lambda role, index, attempt: None if attempt == 0 else
                              3 if (index, attempt) == (1, 1) else 0)
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["restarts_by_cause"] == {"failed": 1, "preempted": 1}
    assert "restarting the gang: attempt 3 of at most 3, because worker:1 failed with exit code 3" in events(report)


def test_a_container_preempted_before_its_executor_registered_is_replaced_at_no_cost():
    fake = FakeContainers(lambda role, index, attempt: 0)
    spec = dict({"name": "t", "timeouts": {"gang_seconds": 30}}, **WORKERS)
    am = ApplicationMaster(make_plan(spec_from_dict(spec)), "application_1_1", fake)
    fake.am = am
    first_poll = fake.poll

    def preempt_worker1_before_it_registers():
        ex = fake.executors.get("worker-1-e2")
        if ex and ex["alive"] and not ex["registered"]:
            fake.executors["worker-1-e2"]["alive"] = False
            return [Ended("worker-1-e2", -102, PREEMPTED, role="worker", cause=Cause.PREEMPTED)]
        return first_poll()

    fake.poll = preempt_worker1_before_it_registers
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 1 and "restarts_by_cause" not in report  # none: left out of the file
    assert "worker:1: its container was preempted before its executor registered" in events(report)
    assert "worker-1-e3" in fake.executors  # the replacement


def test_under_never_the_am_launches_the_restart_for_the_clusters_fault():
    """The cluster replaces no container (skein's services restart none): under ``never`` too, a
    restart for the cluster's fault is the AM's to launch."""
    fake = Preempting(lambda role, index, attempt: 0 if attempt else None, [("worker:1", 0)])
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t", "restart": {"policy": "never"}}, **WORKERS))),
                           "application_1_1", fake)
    fake.am = am
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["restarts_by_cause"] == {"preempted": 1}
    # Two executors for the first gang, two for the gang asked for again (all given back).
    assert len(fake.executors) == 4 and "worker-0-e1" in fake.killed


def test_a_new_am_attempt_knows_which_restarts_were_the_clusters():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "application_1_1",
                           FakeContainers(lambda role, index, attempt: 0))
    previous = JobReport.from_dict({
        "app_id": "application_1_1", "attempts": 3, "state": "RUNNING", "phase": "RUNNING",
        "restarts_by_cause": {"preempted": 2},
        "tasks": [{"role": "worker", "index": i, "attempt": 3, "restarts": 2,
                   "restarts_by_cause": {"preempted": 2}} for i in (0, 1)]})
    am.take_over(previous, lost_attempts=1)
    # Two restarts, both the cluster's: the lost AM is the first of max_restarts 1.
    assert not am.job.finishing, am.job.diagnostics
    assert am.job.attempt == 3 and am.job.gang_cluster_restarts == 2
    assert am.report().restarts_by_cause == {"preempted": 2}


# -- the history ----------------------------------------------------------------------------------

def test_the_history_keeps_the_causes_and_reads_rows_written_before_them(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from submarine_py.history import History, _schema, record_of
    from submarine_py.output import format_history, format_history_job

    history = History(str(tmp_path / "history"))
    preempted = JobReport.from_dict({
        "app_id": "application_1_0002", "name": "ddp", "state": "FAILED", "attempts": 3, "final": True,
        "submitted_at": 1_790_000_000.0, "restarts_by_cause": {"preempted": 2},
        "tasks": [{"role": "worker", "index": 0, "state": "FAILED", "exit_code": -102, "restarts": 2,
                   "cause": "preempted", "restarts_by_cause": {"preempted": 2}}]})
    assert history.add(record_of(preempted))
    # A row written before the causes were kept: the schema without them.
    old = _schema()
    old = old.remove(old.get_field_index("restarts_by_cause"))
    task = old.field("tasks").type.value_type
    old = old.set(old.get_field_index("tasks"), pa.field("tasks", pa.list_(pa.struct(
        [task.field(i) for i in range(task.num_fields) if task.field(i).name != "cause"]))))
    row = record_of(JobReport.from_dict({"app_id": "application_1_0001", "state": "SUCCEEDED", "final": True,
                                         "submitted_at": 1_789_000_000.0,
                                         "tasks": [{"role": "worker", "index": 0, "state": "SUCCEEDED"}]}))
    del row["restarts_by_cause"], row["tasks"][0]["cause"]
    pq.write_table(pa.Table.from_pylist([row], schema=old), tmp_path / "history" / "application_1_0001.parquet")

    before, after = history.rows()
    assert before["restarts_by_cause"] is None and before["tasks"][0]["cause"] is None
    assert after["restarts_by_cause"] == {"failed": 0, "hung": 0, "preempted": 2, "node_lost": 0, "resized": 0}
    assert after["tasks"][0]["cause"] == "preempted"
    assert ["application_1_0002", "ddp", "FAILED", "3", "(2", "preempted)"] in \
        [line.split()[:6] for line in format_history([before, after]).splitlines()]
    shown = format_history_job(after)
    assert "after 3 attempt(s) (restarts: 2 preempted)" in shown
    assert ["worker:0", "PREEMPTED", "-102", "2"] in [line.split()[:4] for line in shown.splitlines()]
