"""A sweep's pool of trial containers (``sweep/master.py``): groups asked for one at a time
through the admission gate, given back, and the executors gone silent.

A sweep's next group passes the gate a gang passes (``allocation.Gate``): QUEUED while it does
not fit (said once, the reason in the report's ``waiting_for``), ASKED once admitted, HELD once
the cluster granted every container of it; a group not granted within ``timeouts.hold_seconds``
goes back and the sweep asks again after the gang's backoff; one that can never fit fails the
sweep; and where it stands is announced to other jobs' admission as a gang's is (YARN: the
application's progress), HELD while it wants no more groups. One group is asked for at a time,
the next once the last is granted (the cluster's free resources count it only then).

Functions of the sweep's AM (:class:`~.records.SweepAM`: ``master.py``'s ``SweepMaster``), its
state theirs to change.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Dict, List

from ...states import GateState, JobState, Phase
from ..allocation import admit_pause
from .records import Group, Slot, TaskKey, SweepAM


log = logging.getLogger("subm.am")



def allocate(am: SweepAM) -> None:
    """One more group of containers when fewer are up than the sweep can use now, through the
    gate (main loop); then the gate's round (:func:`check`) and its announcement."""
    try:
        _allocate(am)
        check(am)
    finally:
        am.gate.announce(am.containers)


def _allocate(am: SweepAM) -> None:
    now, gate = time.monotonic(), am.gate
    with am.lock:
        if am.finishing or am.search is None:
            return
        up = [g for g in am.groups.values() if not g.released]
        running = sum(1 for g in up if g.trial is not None)
        coming = len(up) - running
        want = min(am.spec.parallel, running + am.search.remaining())
        if len(up) >= want or coming >= am.search.remaining():
            if gate.state == GateState.QUEUED:
                gate.settled(now)  # nothing more to wait for
            return
        if gate.state == GateState.HELD:
            gate.queue(now)  # one more group: it waits for room as a gang does
        if not gate.may_ask(now):  # (a group asked for and not granted yet, or not yet time)
            return
        number = len(am.groups)
        # Each group's containers get indices of their own (logs, the GPU ledger's names).
        plans = {(t.role, t.index): replace(t, index=number * am.plan.job.roles[t.role].instances + t.index)
                 for t in am.plan.tasks}
    verdict = am.containers.admit(list(plans.values()), am.plan.job.placement)
    with am.lock:
        if am.finishing:
            return
        what = f"trial container{'s' if len(plans) > 1 else ''} {number}"
        if not gate.answer(verdict, now, what=what, decide=am.decide, finish=am.finish):
            return
    launched: Dict[TaskKey, str] = {}
    try:
        for key, plan in plans.items():
            launched[key] = am.containers.launch(plan, am.executor_env(plan))
    except Exception as exc:
        log.exception("could not start a trial container")
        for ex_id in launched.values():
            am.containers.kill(ex_id)
        with am.lock:
            gate.queue(now)
            gate.not_before = now + admit_pause(gate.rng)
            if not any(s.alive for s in am.slots.values()):
                am.finish(JobState.FAILED, f"could not start a trial container: {exc}")
        return
    with am.lock:
        am.launched += len(launched)
        am.asking = number
        am.groups[number] = Group(number, dict(launched))
        for key, ex_id in launched.items():
            am.slots[ex_id] = Slot(ex_id, plans[key], number, key,
                                   log=am.containers.log_location(plans[key], ex_id))
        am.changed.notify_all()
        if am.phase == Phase.QUEUED:
            am.phase = Phase.STARTING
        am.decide("asked for trial container%s %s: %d group(s) up, %d trial(s) running, %d to start",
                  "s" if len(launched) > 1 else "", ", ".join(launched.values()), len(up) + 1, running,
                  am.search.remaining())


def check(am: SweepAM) -> None:
    """The gate's round, after allocation: the group asked for granted (HELD), or not within
    the hold (it goes back: the gang's backoff), or the sweep waited longer than
    ``timeouts.queue_seconds`` with nothing up."""
    now, gate = time.monotonic(), am.gate
    with am.lock:
        if am.finishing:
            return
        if gate.out_of_patience(now) and not any(not g.released for g in am.groups.values()):
            am.finish(JobState.FAILED, f"the sweep waited {gate.waited(now):.0f} s for room, longer than "
                                       f"timeouts.queue_seconds ({gate.queue_seconds}): {gate.why}")
            return
        if gate.state != GateState.ASKED:
            return
        group = am.groups.get(am.asking) if am.asking is not None else None
        if group is None or group.released:  # (it went back meanwhile: nothing is arriving)
            gate.state = GateState.HELD
            return
        asked = list(group.members.values())
    if am.containers.granted(asked):
        with am.lock:
            if gate.state == GateState.ASKED:
                gate.state = GateState.HELD
        return
    if not gate.hold_over(now):
        return
    with am.lock:
        if am.finishing or gate.state != GateState.ASKED:
            return
        wait = gate.backoff(now)
        am.decide("trial container%s %s not granted within timeouts.hold_seconds (%g s): giving %s back, "
                  "asking again in %.0f s", "s" if len(asked) > 1 else "", ", ".join(asked),
                  gate.hold_seconds, "them" if len(asked) > 1 else "it", wait, level=logging.WARNING)
        release(am, group, "went back: not granted within the hold")


def release(am: SweepAM, group: Group, why: str) -> None:
    """Every container of ``group`` goes back to the cluster now (under the lock: the main loop
    kills them)."""
    if group.released:
        return
    group.released = True
    ids = list(group.members.values())
    am.decide("container%s %s %s", "s" if len(ids) > 1 else "", ", ".join(ids), why)
    for ex_id in ids:
        slot = am.slots[ex_id]
        slot.released, slot.trial = True, None
        if slot.alive:
            am.send(slot, "exit", code=0)
            am.to_release.append(ex_id)


def silent(am: SweepAM) -> List[str]:
    """The executors not heard from for ``timeouts.lost_after_seconds``: to be declared lost."""
    now = time.monotonic()
    with am.lock:
        return [s.id for s in am.slots.values()
                if s.alive and s.registered and not s.released and now - s.last_seen > am.timeouts.lost_after_seconds]
