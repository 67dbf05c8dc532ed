"""Issue 32: the AM never has two executors for one task and never holds a container it does not
track. A gang asked for with the application whose executors register while the AM admits it
is not asked for again (whichever moment they register in); a container asked for while its
task's executor came up goes back at once; a gang given back gives back every container YARN
lists for the job (checked against skein's list and the RM's count), not only those the AM knows;
an executor the AM no longer knows is told to leave; a waiting job's report says what YARN still
counts for it. Pure logic: a stand-in skein client and RM."""
from __future__ import annotations

from typing import Dict, List

import pytest

from fake_skein import FakeApp, skein_container
from submarine_py.admission import Verdict
from submarine_py.am.master import ApplicationMaster
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.states import Cause, GateState, Phase

pytestmark = pytest.mark.unit


def plan_of(workers: int, gpus: int = 1):
    return make_plan(spec_from_dict({"name": "t", "restart": {"policy": "gang", "max_restarts": 2}, "roles": {
        "worker": {"instances": workers, "command": "x",
                   "resources": {"memory": "1 GiB", "vcores": 1, "gpus": gpus}}}}))


def register(am: ApplicationMaster, ex: str, index: int) -> Dict:
    return am.on_register({"executor": ex, "role": "worker", "index": index, "host": "127.0.0.1",
                           "port": 4000 + index, "container": f"container_of_{ex}", "node_http": "n0:8042"})


def one_round(am: ApplicationMaster, app: FakeApp) -> None:
    """The main loop's allocation part (``_launch_and_poll`` without the polls)."""
    for ts in am.allocation.launches():
        am.supervision.launch(ts)
    if hasattr(am.allocation, "reconcile"):  # (so that each test fails for want of its own fix)
        am.allocation.reconcile()
    for ex in am.allocation.releases():
        am.containers.kill(ex)
    with am.job.lock:
        am.gang.maybe_run()


def executors_per_task(am: ApplicationMaster) -> Dict[str, List[str]]:
    """Every live executor the AM keeps, by the task it runs (a task with two: the bug)."""
    out: Dict[str, List[str]] = {}
    for ex in am.job.executors.values():
        if ex.alive and ex.task is not None:
            out.setdefault(am.job.tasks[ex.task].plan.id, []).append(ex.id)
    return out


def held(app: FakeApp) -> List[str]:
    return sorted(c.id for c in app.all.values() if c.state in ("WAITING", "REQUESTED", "RUNNING"))


def asked_with_the_application(workers: int):
    plan = plan_of(workers)
    app = FakeApp([skein_container("worker", i, "RUNNING", yarn=True) for i in range(workers)], yarn=True)
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    return plan, app, yc, ApplicationMaster(plan, "application_1_0001", yc)


@pytest.mark.parametrize("when", ["while admission reads skein", "between admission and launch",
                                  "as its container is asked for"])
def test_executors_registering_while_the_am_admits_its_gang_asked_at_submission_are_not_asked_for_again(when):
    plan, app, yc, am = asked_with_the_application(4)
    register(am, "worker_0", 0)  # came up before the AM's first round
    if when == "while admission reads skein":
        app.on_read = lambda: [register(am, f"worker_{i}", i) for i in (1, 2)]
        one_round(am, app)
    elif when == "between admission and launch":
        chosen = am.allocation.launches()
        assert [ts.plan.index for ts in chosen] == [1, 2, 3]
        for i in (1, 2, 3):
            register(am, f"worker_{i}", i)
        for ts in chosen:
            am.supervision.launch(ts)
    else:  # its own container registers as the AM asks for one: a container more for the task
        launch = yc.launch

        def late(task, env):
            if task.index == 3:
                register(am, "worker_3", 3)
            return launch(task, env)

        yc.launch = late
        one_round(am, app)
    for ts in list(am.job.tasks.values()):  # the rest come up
        if not am.job.executors[ts.executor].registered:
            register(am, ts.executor, ts.plan.index)
    assert all(len(es) == 1 for es in executors_per_task(am).values()), executors_per_task(am)
    assert sorted(executors_per_task(am)) == [f"worker:{i}" for i in range(4)]
    assert am.job.phase == Phase.RUNNING
    # Whatever was asked for again went back at once: YARN holds the gang's four, no more.
    assert held(app) == [f"worker_{i}" for i in range(4)], (app.added, app.killed)


def test_a_gang_given_back_after_a_preemption_gives_back_every_container_yarn_lists_for_the_job():
    plan, app, yc, am = asked_with_the_application(4)
    one_round(am, app)
    for i in range(4):
        register(am, f"worker_{i}", i)
    assert am.job.phase == Phase.RUNNING
    # A container the AM does not track: granted to the job, its executor never given a task.
    app.all["worker_9"] = skein_container("worker", 9, "RUNNING", yarn=True)
    # YARN takes worker_2 back: the rest of the gang is useless and goes back, the job waits.
    yc.admit = lambda tasks, placement: Verdict(False, "waiting for 4 GPUs: 1 free")
    app.all["worker_2"].state = "KILLED"
    am.supervision.executor_ended("worker_2", -102, "Container preempted by scheduler", cause=Cause.PREEMPTED)
    assert am.job.phase == Phase.QUEUED
    one_round(am, app)
    assert held(app) == [], "the job waits holding " + ", ".join(held(app))
    assert "worker_9" in am.job.events[-1].message
    # The cluster caught up: nothing listed, and the report says so.
    one_round(am, app)
    assert am.allocation.gate.state == GateState.QUEUED
    am.allocation.reconcile_at = 0.0
    am.allocation.reconcile()
    assert am.allocation.held == 0


def test_a_container_granted_to_a_running_job_that_no_task_uses_goes_back():
    plan, app, yc, am = asked_with_the_application(2)
    one_round(am, app)
    for i in range(2):
        register(am, f"worker_{i}", i)
    app.all["worker_5"] = skein_container("worker", 5, "RUNNING", yarn=True)
    reply = register(am, "worker_5", 1)  # came up: every task has its executor, it gets none
    assert reply["index"] is None
    am.allocation.reconcile_at = 0.0
    one_round(am, app)
    assert held(app) == ["worker_0", "worker_1"] and app.killed == ["worker_5"]
    assert am.job.phase == Phase.RUNNING


def test_an_executor_the_am_does_not_know_or_whose_task_has_another_is_told_to_leave():
    plan, app, yc, am = asked_with_the_application(2)
    one_round(am, app)
    for i in range(2):
        register(am, f"worker_{i}", i)
    assert [i["op"] for i in am.next_instructions("worker_7", 0, wait=0)] == ["exit"]
    # worker:1 was given a second executor (the race of issue 32): the first is told to leave.
    from submarine_py.am.records import Executor

    ts = am.job.tasks[("worker", 1)]
    am.job.executors["worker_4"] = Executor("worker_4", "worker", task=ts.key)
    ts.executor = "worker_4"
    assert am.next_instructions("worker_1", 0, wait=0)[-1]["op"] == "exit"
    assert not am.job.executors["worker_1"].alive
    assert all(i["op"] != "exit" for i in am.next_instructions("worker_0", 0, wait=0))


def test_a_gang_asked_at_submission_whose_executors_all_registered_before_the_ams_first_round_runs():
    """Every executor of the gang asked for with the application came up before the AM's first
    round (a loaded AM): each took its task as it registered, so no task is left to ask for.
    The gang still passes admission (admitted at submission) and runs; it does not wait, QUEUED,
    for ever."""
    plan, app, yc, am = asked_with_the_application(2)
    for i in range(2):
        register(am, f"worker_{i}", i)
    one_round(am, app)
    assert am.job.phase == Phase.RUNNING, am.job.phase
    assert {ex: [i["op"] for i in am.job.executors[ex].instructions] for ex in ("worker_0", "worker_1")} == \
        {"worker_0": ["run"], "worker_1": ["run"]}
    assert not app.added and not app.killed  # nothing asked for again, nothing given back
