"""A job waiting for its gang asks the ResourceManager only what its decision needs (issue 44):
once it has read the room whole (the running nodes, the queues, this tool's jobs without their
resource requests), each later poll asks the cluster's metrics alone, one small answer whatever
the cluster's size, for as long as the whole cluster has less free than the gang asks. Polls
are spread (jitter) so that jobs that began waiting together do not ask together. Pure logic: a
stand-in RM that counts what it is asked."""
from __future__ import annotations

import random
from typing import List

import pytest

from submarine_py.admission import Need, short_in_all
from submarine_py.am.allocation import ADMIT_EVERY_SECONDS, ADMIT_JITTER, admit_pause
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.backends.yarn.hadoop.resourcemanager import SLIM_APPS, ResourceManager
from submarine_py.errors import BackendError
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.states import Placement

from fake_skein import FakeApp

pytestmark = pytest.mark.unit


def _res(mem: int, vc: int, gpu: int) -> dict:
    return {"memory": mem, "vCores": vc, "resourceInformations": {"resourceInformation": [
        {"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vc}, {"name": "yarn.io/gpu", "value": gpu}]}}


class CountingRM:
    """Two nodes of 2 GPUs; ``used`` of them taken. Counts every call by what it reads."""

    def __init__(self, used_gpus: int, preemption: bool = False):
        self.used, self.preemption, self.calls = used_gpus, preemption, []  # type: ignore[var-annotated]

    def conf_value(self, key):
        return {"yarn.scheduler.minimum-allocation-mb": "1024",
                "yarn.resourcemanager.scheduler.monitor.enable": "true" if self.preemption else "false"}.get(key)

    def nodes(self, running_only=False):
        self.calls.append("nodes" + ("?states=RUNNING" if running_only else ""))
        per = [min(2, max(0, self.used - 2 * i)) for i in range(2)]
        return [{"nodeHostName": f"n{i}", "state": "RUNNING", "availableResource": _res(16384, 16, 2 - u),
                 "usedResource": _res(0, 0, u)} for i, u in enumerate(per)]

    def scheduler(self):
        self.calls.append("scheduler")
        return {}

    def apps(self, tags, states, slim=False):
        self.calls.append("apps" + ("?deSelects" if slim else ""))
        return [{"id": "application_1_0002", "state": "RUNNING", "startedTime": 1000, "queue": "default",
                 "runningContainers": 1, "applicationTags": "submarine,subm-gang:4x1024m1c1g", "progress": 1.0}]

    def metrics(self):
        self.calls.append("metrics")
        return {"totalClusterResourcesAcrossPartition": _res(32768, 32, 4),
                "totalUsedResourcesAcrossPartition": _res(1024 * self.used, self.used, self.used)}


def job(gpus: int):
    return make_plan(spec_from_dict({"name": "t", "roles": {"worker": {
        "instances": gpus, "command": "x", "resources": {"memory": "1 GiB", "vcores": 1, "gpus": 1}}}}))


def waiting_am(rm: CountingRM, gpus: int) -> YarnContainers:
    return YarnContainers(FakeApp([]), job(gpus), user="alice", rm=rm, app_id="application_1_0002",  # type: ignore[arg-type]
                          submitted_at=1.0)


def test_after_one_whole_read_a_waiting_gang_asks_the_cluster_metrics_alone():
    rm = CountingRM(used_gpus=3)
    am = waiting_am(rm, 4)
    first = am.admit(am.plan.tasks, Placement.PACK)
    assert not first.fits and first.why.startswith("waiting for 4 GPUs: 1 free")
    assert rm.calls == ["nodes?states=RUNNING", "scheduler", "apps?deSelects"]  # only running nodes, slim jobs
    rm.calls.clear()
    for _ in range(5):
        later = am.admit(am.plan.tasks, Placement.PACK)
        assert not later.fits and later.why == "waiting for 4 GPUs: 1 free in the cluster (the cluster's metrics)"
    assert rm.calls == ["metrics"] * 5


def test_once_the_cluster_has_enough_free_in_all_the_room_is_read_whole_again():
    rm = CountingRM(used_gpus=3)
    am = waiting_am(rm, 2)
    assert not am.admit(am.plan.tasks, Placement.PACK).fits  # 1 free of 4
    rm.used, rm.calls = 1, []
    verdict = am.admit(am.plan.tasks, Placement.PACK)
    assert verdict.fits
    assert rm.calls == ["metrics", "nodes?states=RUNNING", "scheduler", "apps?deSelects"]


def test_where_yarn_preempts_a_waiting_gang_reads_the_room_whole_every_time():
    rm = CountingRM(used_gpus=4, preemption=True)
    am = waiting_am(rm, 4)
    am.admit(am.plan.tasks, Placement.PACK)
    rm.calls.clear()
    am.admit(am.plan.tasks, Placement.PACK)
    assert "metrics" not in rm.calls and "scheduler" in rm.calls  # a queue under its guarantee is asked for anyway


def test_the_metrics_say_no_only_when_no_placement_could_fit():
    assert short_in_all([Need(1024, 1, 1)] * 4, Need(4096, 4, 4)) is None
    assert short_in_all([Need(1024, 1, 1)] * 4, Need(4096, 4, 3)).why.startswith("waiting for 4 GPUs: 3 free")
    assert short_in_all([Need(2048, 1, 0)] * 2, Need(3072, 8, 8)).why.startswith("waiting for 4096 MiB: 3072 free")


def test_waiting_gangs_ask_again_at_spread_times():
    rng = random.Random(7)
    pauses = [admit_pause(rng) for _ in range(200)]
    low, high = ADMIT_EVERY_SECONDS * (1 - ADMIT_JITTER), ADMIT_EVERY_SECONDS * (1 + ADMIT_JITTER)
    assert all(low <= p <= high for p in pauses)
    assert max(pauses) - min(pauses) > ADMIT_EVERY_SECONDS * ADMIT_JITTER  # spread, not one beat


def test_an_rm_that_knows_fewer_fields_to_leave_out_is_asked_with_those_it_knows():
    rm = ResourceManager(["http://rm:8088"], wait_seconds=0)
    asked: List[str] = []

    def get(path, **params):
        asked.append(params.get("deSelects", ""))
        if params.get("deSelects") not in (None, "resourceRequests"):  # as Hadoop 3.1 answers
            raise BackendError(f"the ResourceManager answered 400 to GET {path}: Invalid deSelects string")
        return {"apps": {"app": [{"id": "a1"}]}}

    rm._get = get  # type: ignore[method-assign]
    assert [a["id"] for a in rm.apps(tags=["submarine"], slim=True)] == ["a1"]
    assert [a["id"] for a in rm.apps(tags=["submarine"], slim=True)] == ["a1"]
    assert asked == [SLIM_APPS[0], "resourceRequests", "resourceRequests"]  # the refusal learnt once


def test_a_client_following_a_job_asks_less_often_while_it_waits_and_while_nothing_changes():
    from submarine_py.backends.yarn.client.backend import YarnBackend
    from submarine_py.report import JobReport
    from submarine_py.states import JobState, Phase

    yarn = YarnBackend.__new__(YarnBackend)
    running = JobReport(app_id="a", name="j", state=JobState.RUNNING, backend="yarn")
    assert yarn.pace(running, 0) == yarn.poll_seconds == 0.5  # what just changed: at once
    assert yarn.pace(running, 600) == yarn.steady_poll_seconds == 4.0  # a long job's steady state
    assert 0.5 < yarn.pace(running, 30) < 4.0
    queued = JobReport(app_id="a", name="j", state=JobState.RUNNING, backend="yarn", waiting_for="waiting for 4 GPUs")
    assert yarn.pace(queued, 0) == 5.0
    starting = JobReport(app_id="a", name="j", state=JobState.RUNNING, backend="yarn", phase=Phase.STARTING)
    assert yarn.pace(starting, 0) == 2.0


def test_a_gang_further_back_in_the_line_asks_less_often_up_to_a_bound():
    from submarine_py.admission import Gang, Room, admit
    from submarine_py.am.allocation import ADMIT_SLOWEST

    gpu = Need(1024, 1, 1)
    older = tuple(Gang(job=f"app_{i}", queue="q", submitted_at=float(i), needs=(gpu,) * 4) for i in range(3))
    me = Gang(job="app_9", queue="q", submitted_at=9.0, needs=(gpu,) * 4)
    verdict = admit(me, Room(nodes={"n": Need(8192, 8, 2)}, others=older), now=10.0)
    assert not verdict.fits and verdict.ahead == 3  # three older gangs before it
    assert admit(older[0], Room(nodes={"n": Need(8192, 8, 2)}, others=older[1:]), now=10.0).ahead == 0
    rng = random.Random(1)
    head, fourth = admit_pause(rng, 0), admit_pause(rng, 3)
    assert head <= ADMIT_EVERY_SECONDS * (1 + ADMIT_JITTER) and fourth >= 4 * ADMIT_EVERY_SECONDS * (1 - ADMIT_JITTER)
    assert admit_pause(rng, 500) <= ADMIT_SLOWEST * ADMIT_EVERY_SECONDS * (1 + ADMIT_JITTER)
    assert short_in_all([gpu] * 4, Need(0, 0, 0)).ahead is None  # the metrics do not weigh the line
