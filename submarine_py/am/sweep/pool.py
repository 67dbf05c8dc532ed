"""A sweep's pool of trial containers (``sweep/master.py``): groups asked for one at a time
through the backend's admission, given back, and the executors gone silent.

Functions of the sweep's AM (:class:`~.master.SweepMaster`), its state theirs to change.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Dict, List

from ...states import JobState, Phase
from ..allocation import ADMIT_EVERY_SECONDS
from .records import Group, Slot, TaskKey

if TYPE_CHECKING:  # pragma: no cover
    from .master import SweepMaster

log = logging.getLogger("subm.am")



def allocate(am: "SweepMaster") -> None:
    """One more group of containers when fewer are up than the sweep can use now (main loop)."""
    now = time.monotonic()
    with am.lock:
        if am.finishing or am.search is None or now < am.not_before:
            return
        up = [g for g in am.groups.values() if not g.released]
        running = sum(1 for g in up if g.trial is not None)
        coming = len(up) - running
        want = min(am.spec.parallel, running + am.search.remaining())
        if len(up) >= want or coming >= am.search.remaining():
            return
        number = len(am.groups)
        # Each group's containers get indices of their own (logs, the GPU ledger's names).
        plans = {(t.role, t.index): replace(t, index=number * am.plan.job.roles[t.role].instances + t.index)
                 for t in am.plan.tasks}
    verdict = am.containers.admit(list(plans.values()), am.plan.job.placement)
    if not verdict.fits:
        with am.lock:
            if verdict.why != am.waiting_for:
                am.decide("trial container%s %d waits: %s", "s" if len(plans) > 1 else "", number,
                          verdict.why)
            am.waiting_for, am.not_before = verdict.why, now + ADMIT_EVERY_SECONDS
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
            am.not_before = now + ADMIT_EVERY_SECONDS
            if not any(s.alive for s in am.slots.values()):
                am.finish(JobState.FAILED, f"could not start a trial container: {exc}")
        return
    with am.lock:
        am.launched += len(launched)
        am.waiting_for = ""
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


def release(am: "SweepMaster", group: Group, why: str) -> None:
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


def silent(am: "SweepMaster") -> List[str]:
    """The executors not heard from for ``timeouts.lost_after_seconds``: to be declared lost."""
    now = time.monotonic()
    with am.lock:
        return [s.id for s in am.slots.values()
                if s.alive and s.registered and not s.released and now - s.last_seen > am.timeouts.lost_after_seconds]
