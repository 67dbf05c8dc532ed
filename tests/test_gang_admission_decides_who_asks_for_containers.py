"""Gang admission (submarine_py/admission.py, pure): a job asks for its containers only when its whole
gang fits, in its queue and on the nodes; older jobs go first; a younger job may pass one that
does not fit only until that one has waited STARVE_SECONDS; within its queue's guarantee a job
asks anyway where YARN preempts for it. And the gate over time (am/allocation.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from submarine_py.admission import STARVE_SECONDS, Gang, Need, Room, admit, fewest_nodes, place
from submarine_py.am.allocation import BACKOFF_CAP, Gate
from submarine_py.backends.yarn.capacity import Capacity, node_room, parse_gang_tag, queue_room, waiting_gangs
from submarine_py.states import GateState

pytestmark = pytest.mark.unit

GPU = Need(2048, 1, 1)


def nodes(*gpus: int) -> dict:
    return {f"n{i + 1}": Need(16384, 16, g) for i, g in enumerate(gpus)}


def gang(job: str, n: int, at: float, queue: str = "teama", **kw) -> Gang:
    return Gang(job=job, queue=queue, submitted_at=at, needs=(GPU,) * n, **kw)


def test_a_gang_that_fits_is_admitted_on_as_few_nodes_as_the_free_gpus_allow():
    verdict = admit(gang("a", 4, 0), Room(nodes(2, 2, 2)), now=10)
    assert verdict.fits and verdict.nodes == 2
    assert place((GPU,) * 2, nodes(1, 2, 1)) == ["n2", "n2"]
    assert fewest_nodes((GPU,) * 5, nodes(2, 2, 2)) == 3


def test_spread_puts_one_task_per_node_where_it_can():
    assert sorted(place((GPU,) * 3, nodes(2, 2, 2), spread=True)) == ["n1", "n2", "n3"]


def test_a_gang_that_does_not_fit_waits_and_names_the_gpus_that_are_short():
    room = Room(nodes(1, 1, 0), queue_free=Need(40000, 40, 2), queue_guaranteed=Need(24576, 24, 3))
    verdict = admit(gang("a", 4, 0, queue="teamb"), room, now=10)
    assert not verdict.fits
    assert verdict.why.startswith("waiting for 4 GPUs: 2 free in queue teamb (3 guaranteed)")


def test_free_gpus_on_different_nodes_do_not_make_a_task_of_two_gpus_fit():
    me = Gang(job="a", queue="q", submitted_at=0, needs=(Need(2048, 1, 2),))
    verdict = admit(me, Room(nodes(1, 1, 1)), now=1)
    assert not verdict.fits and "at most 1 on one node" in verdict.why


def test_two_contending_gangs_never_both_ask_the_older_goes_first():
    # 6 GPUs free; two 4-GPU gangs: each AM reaches the same verdicts from the same room.
    a, b = gang("a", 4, 100, "teama"), gang("b", 4, 101, "teamb")
    assert admit(a, Room(nodes(2, 2, 2), others=(b,)), now=110).fits
    later = admit(b, Room(nodes(2, 2, 2), others=(a,)), now=110)
    assert not later.fits and later.why == "waiting for 4 GPUs: 2 free in the cluster, at most 2 on one node; 1 older job (a) first"


def test_a_gang_asked_and_arriving_is_counted_before_anyone():
    arriving = gang("old", 4, 200, asked=True)
    assert not admit(gang("a", 4, 100), Room(nodes(2, 2, 2), others=(arriving,)), now=210).fits


def test_an_older_gang_whose_word_that_it_asked_is_late_keeps_the_room_it_still_needs():
    """The older gang asked as its GPUs came free and got 5 of its 6 containers, but the RM still
    shows the progress it had while queued (skein passes an AM's progress on at its next
    heartbeat). The one GPU left is the one it still needs: a younger one-GPU sweep does not take
    it (it did once in CI, and the gang waited for the sweep's trial to end)."""
    row = {"id": "application_1_0004", "state": "RUNNING", "progress": 1.0, "startedTime": 100_000,
           "runningContainers": 6, "queue": "teamb", "applicationTags": "submarine,subm-gang:6x1024m1c1g"}
    others = waiting_gangs([row], me="application_1_0005")
    assert [(g.job, g.asked, len(g.holding)) for g in others] == [("application_1_0004", False, 5)]
    sweep = gang("application_1_0005", 1, 110, "teama")
    verdict = admit(sweep, Room(nodes(0, 1, 0), others=others), now=115)
    assert not verdict.fits and "1 older job (application_1_0004) first" in verdict.why
    assert admit(sweep, Room(nodes(0, 2, 0), others=others), now=115).fits  # room for both


def test_a_younger_small_job_passes_an_older_large_one_until_it_has_waited_too_long():
    big = gang("big", 6, 100)
    small = gang("small", 1, 105)
    assert admit(small, Room(nodes(1, 1, 0), others=(big,)), now=110).fits  # backfill
    starving = admit(small, Room(nodes(1, 1, 0), others=(big,)), now=100 + STARVE_SECONDS)
    assert not starving.fits and "older job" in starving.why


def test_higher_priority_goes_before_age():
    urgent = gang("urgent", 4, 200, priority=5)
    assert not admit(gang("old", 4, 100), Room(nodes(2, 2, 2), others=(urgent,)), now=210).fits


def test_within_its_queues_guarantee_a_job_asks_where_yarn_preempts_for_it():
    room = Room(nodes(0, 0, 0), queue_free=Need(40000, 40, 6), queue_guaranteed=Need(24576, 24, 3),
                queue_used=Need(0, 0, 0), preemption=True)
    assert admit(gang("b", 2, 0, "teamb"), room, now=1).fits
    assert not admit(gang("b", 4, 0, "teamb"), room, now=1).fits  # beyond the guarantee
    assert not admit(gang("b", 2, 0, "teamb"), Room(nodes(0, 0, 0), queue_used=Need(), queue_guaranteed=Need(
        24576, 24, 3)), now=1).fits  # no preemption: nothing makes room


def test_the_gate_gives_a_partial_gang_back_after_the_hold_and_backs_off():
    gate = Gate(hold_seconds=20)
    gate.queue(0)
    assert gate.may_ask(0)
    gate.admitted(5)
    assert gate.state == GateState.ASKED and not gate.hold_over(20) and gate.hold_over(26)
    waits = [gate.backoff(26 + i) for i in range(8)]
    assert gate.state == GateState.QUEUED and not gate.may_ask(27)
    assert 2 <= waits[0] <= 3 and waits[1] >= 4 and max(waits) <= BACKOFF_CAP * 1.5


def test_the_gate_runs_out_of_patience_only_when_queue_seconds_is_set():
    assert not Gate(hold_seconds=20).out_of_patience(10 ** 6)
    gate = Gate(hold_seconds=20, queue_seconds=30)
    gate.queue(0)
    assert not gate.out_of_patience(30) and gate.out_of_patience(31)


# -- what the ResourceManager says, read ------------------------------------------------------

def _res(mem: int, vc: int, gpu: int) -> dict:
    return {"memory": mem, "vCores": vc, "resourceInformations": {"resourceInformation": [
        {"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vc}, {"name": "yarn.io/gpu", "value": gpu}]}}


def test_the_rms_nodes_queues_and_applications_become_room():
    assert node_room([{"nodeHostName": "h1", "state": "RUNNING", "availableResource": _res(4096, 4, 2)},
                      {"nodeHostName": "h2", "state": "LOST", "availableResource": _res(4096, 4, 2)}]) == \
        {"h1": Need(4096, 4, 2)}
    scheduler = {"scheduler": {"schedulerInfo": {"queues": {"queue": [
        {"queueName": "teamb", "maxEffectiveCapacity": _res(49152, 48, 6), "resourcesUsed": _res(8192, 4, 4),
         "minEffectiveCapacity": _res(24576, 24, 3)}]}}}}
    assert queue_room(scheduler, "root.teamb") == (Need(40960, 44, 2), Need(24576, 24, 3), Need(8192, 4, 4))
    apps = [
        {"id": "me", "state": "RUNNING", "progress": 1.0, "applicationTags": "submarine,subm-gang:2x1024m1c1g"},
        {"id": "queued", "state": "RUNNING", "progress": 1.0, "applicationTags": "submarine,subm-gang:4x1024m1c1g",
         "startedTime": 5000, "queue": "teama"},
        {"id": "arriving", "state": "RUNNING", "progress": 25.0, "runningContainers": 3,
         "applicationTags": "subm-gang:4x1024m1c1g,submarine"},
        {"id": "running", "state": "RUNNING", "progress": 50.0, "applicationTags": "subm-gang:4x1024m1c1g"},
        {"id": "not-ours", "state": "ACCEPTED", "applicationTags": "submarine"},
    ]
    found = {g.job: g for g in waiting_gangs(apps, "me")}
    assert set(found) == {"queued", "arriving"}
    assert found["queued"].submitted_at == 5.0 and len(found["queued"].needs) == 4 and not found["queued"].asked
    assert found["arriving"].asked and len(found["arriving"].needs) == 2  # 2 of 4 granted already
    assert parse_gang_tag(["subm-gang:1x1500m1c0g"]) == (Need(2048, 1, 0),)  # YARN's rounding


def test_a_gang_of_the_same_queue_is_of_the_same_queue_however_the_rm_spells_it():
    """Hadoop 3.4's RM reports an application's queue as its path (``root.teama``), 3.1's as its
    leaf (``teama``), and a job file may name either: the older gang of the job's own queue
    goes first in both."""
    apps = [{"id": "older", "state": "ACCEPTED", "applicationTags": "submarine,subm-gang:4x1024m1c1g",
             "startedTime": 5000, "queue": "root.teama"}]
    (older,) = waiting_gangs(apps, "me")
    assert older.queue == "teama"
    rm = SimpleNamespace(conf_value=lambda name: None)
    for named in ("teama", "root.teama"):
        assert Capacity(rm, "me", named).me([], 10.0).queue == older.queue


def test_the_words_on_room_name_gpus_first_per_queue_and_node():
    from submarine_py.backends.yarn.capacity import room_words

    room = Room({"h1": Need(8192, 7, 0), "h2": Need(4096, 3, 1)}, queue_free=Need(40960, 44, 1),
                queue_guaranteed=Need(24576, 24, 3), others=(gang("x", 2, 0),))
    assert room_words(room, "teamb") == (
        "queue teamb may take 1 GPU, 40960 MiB, 44 vcores more (3 GPUs guaranteed); free per node: "
        "h2 1 GPU, 4096 MiB, 3 vcores; h1 0 GPUs, 8192 MiB, 7 vcores; 1 other job waiting for a gang")


# -- the gate in the AM: replacements where the backend cannot queue a container ---------------

def test_a_replacement_waits_for_room_where_the_backend_cannot_queue_it():
    """Locally a task's replacement (say a finished task asked for again by a gang restart) may
    find its machine's GPUs taken by another job: it waits, said once, instead of failing."""
    from submarine_py.admission import Verdict
    from submarine_py.am.allocation import Allocation
    from fake_containers import IdleContainers
    from submarine_py.am.job import JobRun
    from submarine_py.am.records import Executor
    from submarine_py.jobfile import spec_from_dict
    from submarine_py.plan import make_plan

    class Machine(IdleContainers):
        free = False

        def admit(self, tasks, placement):
            return Verdict(True) if self.free else Verdict(False, "waiting for 1 GPU: 0 free on this machine")

    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {"instances": 2, "command": "x"}}}))
    job, machine, now = JobRun(plan, "j"), Machine(), [100.0]
    allocation = Allocation(job, machine, clock=lambda: now[0])
    allocation.gate.state = GateState.HELD
    w0, w1 = job.tasks[("worker", 0)], job.tasks[("worker", 1)]
    job.executors["e1"] = Executor("e1", "worker", task=w1.key)
    w1.executor = "e1"
    job.to_launch = [w0.key]
    assert allocation.launches() == [] and job.to_launch == [w0.key]
    assert allocation.launches() == []  # not asked again before ADMIT_EVERY_SECONDS
    now[0] += 3
    machine.free = True
    assert allocation.launches() == [w0] and job.to_launch == []
    assert [e.message for e in job.events] == ["worker:0 waits: waiting for 1 GPU: 0 free on this machine"]


def test_a_gang_the_cluster_can_never_hold_is_told_at_once():
    # Four workers of more than half a node each, on three nodes: never, however long it waits.
    big = Need(9000, 1, 0)
    me = Gang(job="a", queue="q", submitted_at=0, needs=(big,) * 4)
    totals = {f"n{i}": Need(16384, 16, 2) for i in range(3)}
    verdict = admit(me, Room(nodes=totals, totals=totals), now=1)
    assert not verdict.fits and verdict.never
    assert verdict.why == ("the gang asks 36000 MiB, 4 vcores in 4 container(s), which cannot all fit at once on this "
                           "cluster's 3 node(s) even if they were empty (the largest has 2 GPUs, 16384 MiB, 16 vcores)")
    assert admit(Gang(job="a", queue="q", submitted_at=0, needs=(GPU,) * 7), Room(nodes=totals, queue_most=Need(
        10 ** 6, 100, 6)), now=1).never  # more GPUs than the queue may ever hold
    assert not admit(Gang(job="a", queue="q", submitted_at=0, needs=(big,) * 3), Room(nodes={}, totals=totals),
                     now=1).never  # fits when the nodes empty: it waits
