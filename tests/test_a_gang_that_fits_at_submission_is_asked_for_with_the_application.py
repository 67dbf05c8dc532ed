"""A YARN job whose whole gang fits when it is submitted asks for it with the application
(capacity.admit_at_submission: the same admission the AM runs, over the same room), so that
skein's AM asks the RM at once instead of on its next idle heartbeat (5 s); the AM takes those
containers as its first gang (YarnContainers.admit/launch). A gang that does not fit, a job whose
gang grows (elastic) and a sweep ask for nothing with the application: their AM waits for room,
holding nothing. Pure logic: a stand-in RM and skein client."""
from __future__ import annotations

import pytest

from fake_skein import FakeApp, skein_container
from submarine_py.backends.yarn.capacity import admit_at_submission, not_granted, whole_gang
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.states import Placement

pytestmark = pytest.mark.unit


def plan_of(workers, gpus: int = 0, **extra):
    return make_plan(spec_from_dict({"name": "t", **extra, "roles": {"worker": {
        "instances": workers, "command": "x", "resources": {"memory": "1 GiB", "vcores": 1, "gpus": gpus}}}}))


def _res(mem: int, vc: int, gpu: int) -> dict:
    return {"memory": mem, "vCores": vc, "resourceInformations": {"resourceInformation": [
        {"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vc}, {"name": "yarn.io/gpu", "value": gpu}]}}


class FakeRM:
    """The RM's REST as Capacity reads it: two nodes with 2 GPUs each, other jobs' gangs."""

    def __init__(self, free_gpus=(2, 2), apps=()):
        self.free_gpus, self.listed = free_gpus, list(apps)

    def conf_value(self, key):
        return {"yarn.scheduler.minimum-allocation-mb": "1024"}.get(key)

    def nodes(self, running_only=False):
        return [{"nodeHostName": f"n{i}", "state": "RUNNING", "availableResource": _res(16384, 16, g),
                 "usedResource": _res(0, 0, 2 - g)} for i, g in enumerate(self.free_gpus)]

    def scheduler(self):
        return {}

    def apps(self, tags, states, slim=False):
        return self.listed


def test_a_gang_that_fits_now_is_admitted_at_submission_and_one_that_does_not_is_not():
    assert admit_at_submission(plan_of(4, gpus=1), FakeRM((2, 2)), now=100).fits
    short = admit_at_submission(plan_of(4, gpus=1), FakeRM((2, 1)), now=100)
    assert not short.fits and "GPUs" in short.why


def test_an_older_job_waiting_for_the_same_gpus_goes_first():
    older = {"id": "application_1_0001", "state": "RUNNING", "progress": 1.0, "startedTime": 50_000,
             "queue": "default", "applicationTags": "submarine,subm-gang:2x1024m1c1g"}
    assert not admit_at_submission(plan_of(4, gpus=1), FakeRM((2, 2), [older]), now=100).fits
    assert admit_at_submission(plan_of(2, gpus=1), FakeRM((2, 2), [older]), now=100).fits


def test_elastic_jobs_and_sweeps_leave_every_container_to_their_am():
    elastic = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {
        "instances": {"min": 2, "max": 4}, "command": "x"}}}))
    assert whole_gang(elastic) is None and not admit_at_submission(elastic, FakeRM(), now=1).fits
    assert whole_gang(plan_of(3)) is not None


def test_the_am_takes_the_containers_asked_for_with_the_application_as_its_first_gang():
    plan = plan_of(3)
    app = FakeApp([skein_container("worker", i, "RUNNING" if i == 0 else "REQUESTED") for i in range(3)])
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    verdict = yc.admit(plan.tasks, Placement.PACK)
    assert verdict.fits and "submission" in verdict.why
    assert [yc.launch(t, {}) for t in plan.tasks] == ["worker_0", "worker_1", "worker_2"]
    assert app.added == [] and app.killed == []
    assert not yc.granted(["worker_0", "worker_1", "worker_2"])  # two are still asked for
    # A later gang (after a hold ran out, say) is asked for as usual.
    yc.admit(plan.tasks, Placement.PACK)
    assert yc.launch(plan.tasks[0], {}) == "worker_3" and app.added == ["worker_3"]


def test_containers_of_the_application_no_task_takes_go_back_and_a_gang_they_do_not_cover_is_asked_anew():
    plan = plan_of(3)
    app = FakeApp([skein_container("worker", i) for i in range(3)])
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    assert yc.admit(plan.tasks[1:], Placement.PACK).fits  # worker 0 is done (a later AM attempt)
    assert app.killed == ["worker_0"]
    assert [yc.launch(t, {}) for t in plan.tasks[1:]] == ["worker_1", "worker_2"]

    app = FakeApp([skein_container("worker", 0), skein_container("worker", 1, "FAILED")])
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    assert yc.admit(plan.tasks, Placement.PACK).fits  # (no RM here: admitted as before issue 25)
    assert app.killed == ["worker_0"]
    assert [yc.launch(t, {}) for t in plan.tasks] == ["worker_2", "worker_3", "worker_4"]


def me_and_an_older_job_of_four_gpus():
    """The RM's rows of this job (application_1_0002, its AM up) and of one submitted a second
    before it, both asking 4 GPUs: the older one goes first."""
    me = {"id": "application_1_0002", "state": "RUNNING", "progress": 10.0, "startedTime": 60_000,
          "runningContainers": 1, "queue": "default", "applicationTags": "submarine,subm-gang:4x1024m1c1g"}
    older = {"id": "application_1_0001", "state": "ACCEPTED", "progress": 0.0, "startedTime": 59_000,
             "queue": "default", "applicationTags": "submarine,subm-gang:4x1024m1c1g"}
    return me, older


def test_a_job_submitted_at_the_same_moment_that_goes_first_sends_the_gang_back_to_waiting():
    plan = plan_of(4, gpus=1)
    me, older = me_and_an_older_job_of_four_gpus()
    app = FakeApp([skein_container("worker", i) for i in range(4)])
    yc = YarnContainers(app, plan, user="alice", rm=FakeRM((2, 2), [me, older]), app_id="application_1_0002",
                        gang_asked=True)
    verdict = yc.admit(plan.tasks, Placement.PACK)
    assert not verdict.fits and "older job" in verdict.why  # queued, as if never asked at submission
    assert sorted(app.killed) == ["worker_0", "worker_1", "worker_2", "worker_3"] and app.added == []
    # Alone, the same gang keeps what it asked for.
    app = FakeApp([skein_container("worker", i) for i in range(4)])
    yc = YarnContainers(app, plan, user="alice", rm=FakeRM((2, 2), [me]), app_id="application_1_0002",
                        gang_asked=True)
    assert yc.admit(plan.tasks, Placement.PACK).fits and app.killed == []


def test_executors_that_register_before_the_am_admitted_their_gang_run_nothing_until_it_is_up():
    from fake_containers import IdleContainers
    from submarine_py.am.master import ApplicationMaster
    from submarine_py.states import Phase

    class Asked(IdleContainers):  # the gang was asked for with the application; admission answers later
        name = "fake"

    plan = plan_of(3)
    am = ApplicationMaster(plan, "application_1_0003", Asked())
    assert am.job.phase == Phase.QUEUED
    for i in range(2):  # their containers came first; the AM has not run its first round yet
        am.on_register({"executor": f"worker_{i}", "role": "worker", "index": i, "host": "127.0.0.1",
                        "port": 4000 + i})
    assert all(not ex.instructions for ex in am.job.executors.values())
    am.allocation.launches()  # admitted: the third task is asked for
    am.on_register({"executor": "worker_9", "role": "worker", "index": 2, "host": "127.0.0.1", "port": 4002})
    assert am.job.phase == Phase.RUNNING
    assert all(ex.instructions[-1]["op"] == "run" for ex in am.job.executors.values())


def test_executors_that_register_while_the_am_reads_the_room_keep_their_containers_in_the_gang():
    # The AM's first round chose the gang's three tasks; two of their containers registered while
    # it read the room: they count for the gang, which is admitted whole, and nothing goes back.
    plan = plan_of(3)
    app = FakeApp([skein_container("worker", i, "RUNNING") for i in range(3)])
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    for i in range(2):
        yc.registered(f"worker_{i}", {"container": f"container_{i}", "node_http": "n0:8042"})
    verdict = yc.admit(plan.tasks, Placement.PACK)
    assert verdict.fits and "submission" in verdict.why
    assert app.killed == [] and app.added == []
    assert yc.launch(plan.tasks[2], {}) == "worker_2"
    # The registered ones' containers are theirs: a later launch of their task asks anew.
    assert yc.launch(plan.tasks[0], {}) == "worker_3"


def test_an_executor_whose_container_the_am_gave_back_is_told_to_leave_if_it_comes_up_anyway():
    # YARN may start a container whose stop crossed its launch: its executor registers, and must
    # take no task (its container is gone, its heartbeats would stop and look like a lost node).
    from submarine_py.am.master import ApplicationMaster

    plan = plan_of(2)
    app = FakeApp([skein_container("worker", i, "RUNNING") for i in range(2)])
    yc = YarnContainers(app, plan, user="alice", gang_asked=True)
    am = ApplicationMaster(plan, "application_1_0004", yc)
    yc.kill("worker_1")
    reply = am.on_register({"executor": "worker_1", "role": "worker", "index": 1, "host": "127.0.0.1",
                            "port": 4001})
    assert "attempt" not in reply
    assert am.job.executors["worker_1"].instructions[-1]["op"] == "exit"
    assert all(ts.executor != "worker_1" for ts in am.job.tasks.values())


def test_a_gang_sent_back_to_waiting_gives_back_the_containers_whose_executors_registered_early():
    # A job submitted at the same moment goes first: every container asked for with this one
    # goes back, those whose executors registered already too, so the waiting gang holds nothing.
    from submarine_py.am.master import ApplicationMaster
    from submarine_py.states import Phase

    plan = plan_of(4, gpus=1)
    me, older = me_and_an_older_job_of_four_gpus()
    app = FakeApp([skein_container("worker", i, "RUNNING") for i in range(4)])
    yc = YarnContainers(app, plan, user="alice", rm=FakeRM((2, 2), [me, older]), app_id="application_1_0002",
                        gang_asked=True)
    am = ApplicationMaster(plan, "application_1_0002", yc)
    am.on_register({"executor": "worker_0", "role": "worker", "index": 0, "host": "127.0.0.1", "port": 4000,
                    "container": "container_0", "node_http": "n0:8042"})
    assert am.allocation.launches() == []
    for ex in am.allocation.releases():
        yc.kill(ex)
    assert am.job.phase == Phase.QUEUED
    assert sorted(app.killed) == ["worker_0", "worker_1", "worker_2", "worker_3"]
    assert am.job.executors["worker_0"].instructions[-1]["op"] == "exit"
    assert sorted(am.job.to_launch) == sorted(am.job.tasks)


def test_a_container_the_rm_reserved_for_the_gang_counts_as_its_own_not_as_room_taken():
    """The CapacityScheduler reserves a container on a node that is full for now: the queue's
    use counts it, the job's containers do not. Seen on the preemption rig: 2 of 6 one-GPU
    workers granted, a third reserved, and the AM found 3 GPUs free for the 4 it thought it
    lacked, and sent its own gang back to waiting."""
    tasks = plan_of(6, gpus=1).tasks
    assert [t.index for t in not_granted(tasks, running=3, reserved_mb=0)] == [2, 3, 4, 5]
    assert [t.index for t in not_granted(tasks, running=3, reserved_mb=1024)] == [3, 4, 5]
    assert [t.index for t in not_granted(tasks, running=3, reserved_mb=1000)] == [2, 3, 4, 5]  # less than one
    assert not_granted(tasks, running=7, reserved_mb=2048) == []
