"""Allocation: what the job asks the cluster for, when, and what it gives back.

One part of the AM decides it; the main loop asks it each round (:meth:`Allocation.launches`,
:meth:`Allocation.check`), recovery asks it to give a preempted gang back
(:meth:`Allocation.give_back`), supervision to give back the container of a task that is done
(:meth:`Allocation.task_done`). Its inputs are explicit: the job's live state, the backend's
:class:`~.containers.Containers` (which answers admission: :mod:`.admission`) and a clock.

A gang to start (the first, or every task again after its containers went back) passes a
:class:`Gate`: QUEUED holding no task container until the backend says the whole gang fits,
then ASKED; if the cluster has not granted every container within ``timeouts.hold_seconds``,
all of them go back and the job waits again, after a backoff that doubles each time. A single
replacement (a task restarted alone, a container lost under a running gang) is asked for at
once: the rest of its gang is up and waits for it.

An elastic role (``instances: {min, max}``) passes the gate with its ``min`` tasks; the rest
are asked for one at a time, each when it fits (:meth:`Allocation._grow`): with the gang where
they fit then (they join its first world), else later, joining the world by growing it
(``elastic.py``). Only the gang's containers must be granted within the hold.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ..states import GateState, JobState, Phase, TaskState
from ..admission import Verdict
from .containers import Containers
from .elastic import split
from .job import JobRun
from .records import Task

log = logging.getLogger("subm.am")

#: Backoff after a gang given back: the first wait and the cap (seconds); a random share of up
#: to BACKOFF_JITTER is added so that jobs given back together do not ask together again.
BACKOFF_FIRST, BACKOFF_CAP, BACKOFF_JITTER = 2.0, 30.0, 0.5
#: How often the head of the line asks the backend whether its gang fits (the RM's REST, on
#: YARN), on average: each pause is drawn within ADMIT_JITTER of it, so that jobs that began
#: waiting together (behind the same job, given back by the same preemption) do not ask
#: together. A job with older jobs before it in the line asks that many times less often, up to
#: ADMIT_SLOWEST times: it cannot start before them, and the RM's load grows with the log of the
#: number of waiting jobs (the sum of 1/position), not with the number. A gang whose verdict the
#: line's steward told (``Verdict.told_by``: no RM read of its own) asks at the head's pace.
ADMIT_EVERY_SECONDS, ADMIT_JITTER, ADMIT_SLOWEST = 2.0, 0.25, 8
#: How often the AM weighs what the cluster lists for the job against what its tasks use
#: (:meth:`Allocation.reconcile`): while the job waits (it must hold nothing), and while it runs.
RECONCILE_QUEUED_SECONDS, RECONCILE_SECONDS = 5.0, 30.0
_PACE = random.Random()


def admit_pause(rng: Optional[random.Random] = None, ahead: int = 0) -> float:
    """The pause before a waiting gang asks admission again, ``ahead`` older gangs before it."""
    return ADMIT_EVERY_SECONDS * min(1 + max(0, ahead), ADMIT_SLOWEST) * \
        (rng or _PACE).uniform(1 - ADMIT_JITTER, 1 + ADMIT_JITTER)


@dataclass
class Gate:
    """A gang's way through admission, over time (all times monotonic seconds)."""

    hold_seconds: float
    queue_seconds: Optional[float] = None
    state: GateState = GateState.QUEUED
    waiting_since: float = 0.0
    #: When admission may next be asked (backoff, or the pace of ADMIT_EVERY_SECONDS).
    not_before: float = 0.0
    asked_at: float = 0.0
    #: Gangs given back after a hold so far (the backoff doubles with each).
    given_back: int = 0
    #: Seconds spent queued so far, every wait of the job together.
    queued_seconds: float = 0.0
    #: What the job waits for, in words (empty unless queued).
    why: str = ""
    rng: random.Random = field(default_factory=random.Random)
    #: The state the backend was last told of (:meth:`announce`).
    announced: Optional[GateState] = None
    #: Older gangs before this one in the line when admission last weighed it (its pace).
    ahead: int = 0

    def announce(self, containers: Containers) -> None:
        """Tell other jobs' admission where this job stands, when that changed
        (:meth:`Containers.announce`; YARN: the application's progress). Main loop only."""
        if self.state != self.announced:
            self.announced = self.state
            containers.announce(self.state)

    def queue(self, now: float, why: str = "") -> None:
        """Wait (again) for room, holding nothing."""
        self.state, self.waiting_since, self.why = GateState.QUEUED, now, why

    def waited(self, now: float) -> float:
        return now - self.waiting_since if self.state == GateState.QUEUED else 0.0

    def out_of_patience(self, now: float) -> bool:
        return self.state == GateState.QUEUED and self.queue_seconds is not None and self.waited(now) > self.queue_seconds

    def may_ask(self, now: float) -> bool:
        return self.state == GateState.QUEUED and now >= self.not_before

    def refused(self, now: float, why: str, ahead: Optional[int] = 0) -> None:
        if ahead is not None:  # else the line was not weighed: the place last known holds
            self.ahead = ahead
        self.why, self.not_before = why, max(self.not_before, now + admit_pause(self.rng, self.ahead))

    def admitted(self, now: float) -> None:
        self.queued_seconds += now - self.waiting_since
        self.state, self.asked_at, self.why = GateState.ASKED, now, ""

    def hold_over(self, now: float) -> bool:
        return self.state == GateState.ASKED and now - self.asked_at > self.hold_seconds

    def settled(self, now: float) -> None:
        """Nothing more to ask for (a sweep whose groups are all up): HELD, waiting for nothing."""
        if self.state == GateState.QUEUED:
            self.queued_seconds += now - self.waiting_since
        self.state, self.why = GateState.HELD, ""

    def answer(self, verdict: Verdict, now: float, *, what: str, decide: Callable[..., Any],
               finish: Callable[[JobState, str], Any]) -> bool:
        """Admission's answer (:meth:`Containers.admit`) to what the gate asked, taken the same
        way for a gang and for a sweep's group (under the strategy's lock): one that can never
        fit fails the job (waiting would never end); one that does not fit now waits, said once
        each time the reason changes, asking again after ADMIT_EVERY_SECONDS; one that fits is
        ASKED. Returns whether its containers may be asked for now."""
        if verdict.never:
            finish(JobState.FAILED, f"{verdict.why}; job failed (waiting would never end: ask for "
                                    f"fewer or smaller containers, or run on a larger cluster)")
            return False
        if not verdict.fits:
            if verdict.why != self.why and not self.why.startswith("gave its"):
                decide("%s waits, queued: %s", what, verdict.why)
            # A verdict the line's steward told cost the RM nothing: asked again at the head's pace.
            self.refused(now, verdict.why, 0 if verdict.told_by else verdict.ahead)
            return False
        self.admitted(now)
        return True

    def backoff(self, now: float) -> float:
        """Back to the queue after a hold ran out; returns how long before asking again."""
        self.given_back += 1
        wait = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (self.given_back - 1))
        wait += self.rng.uniform(0, BACKOFF_JITTER * wait)
        self.queue(now, f"gave its partial gang back after the hold ({self.hold_seconds:g} s); asking again in {wait:.0f} s")
        self.not_before = now + wait
        return wait


class Allocation:
    """What to ask for and what to give back. ``clock``: monotonic seconds (tests drive it)."""

    def __init__(self, job: JobRun, containers: Containers, *, clock: Callable[[], float] = time.monotonic):
        self.job = job
        self.containers = containers
        self.clock = clock
        timeouts = job.plan.job.timeouts
        self.gate = Gate(timeouts.hold_seconds, timeouts.queue_seconds)
        #: Executors to stop because their containers go back (the main loop kills them).
        self.to_release: List[str] = []
        self.gate.queue(clock())
        job.phase = Phase.QUEUED
        #: The tasks the gate admitted last (None: every task): only their containers must be
        #: granted within the hold (an elastic role's growth is not part of its gang).
        self.gang_keys: Optional[set] = None
        #: Growth of an elastic role (:meth:`_grow`): when to ask again, and why it waits.
        self.grow_not_before = 0.0
        self.grow_why = ""
        #: When a replacement the backend cannot queue may next be admitted (local backend).
        self.replacement_not_before = 0.0
        self.replacement_why = ""
        #: When the cluster's list of the job's containers is next read (:meth:`reconcile`), and
        #: how many task containers it listed last (None: never read, or the backend cannot say).
        self.reconcile_at = 0.0
        self.held: Optional[int] = None

    # -- the main loop's questions (without the job's lock; they take it) ----------------------
    def launches(self) -> List[Task]:
        """Tasks whose executors the main loop should start now."""
        try:
            return self._launches()
        finally:
            self._announce()

    def _announce(self) -> None:
        self.gate.announce(self.containers)

    def _launches(self) -> List[Task]:
        job, gate = self.job, self.gate
        now = self.clock()
        with job.lock:
            # Executors of containers asked for with the application may have registered before
            # the gang was admitted (they took their tasks as they came): while the gang waits
            # for admission, their tasks are part of it still (with none left to ask for, the
            # gang would otherwise never pass the gate, QUEUED for ever).
            early = [k for k, ts in job.tasks.items() if k not in job.to_launch and job.live_executor(ts)] \
                if job.phase == Phase.QUEUED and gate.state == GateState.QUEUED else []
            if job.finishing or not (job.to_launch or early):
                return []
            whole = bool(early) or not any(job.live_executor(ts) for ts in job.tasks.values())
            live: Dict[str, int] = {}
            for ts in job.tasks.values():
                if not whole and job.live_executor(ts):
                    live[ts.plan.role] = live.get(ts.plan.role, 0) + 1
            # What the gang needs (an elastic role: up to its min) and what would grow it.
            need, extra = split(job.plan, [*job.to_launch, *early], live)
            pending = [job.tasks[k] for k in need]
            if gate.state != GateState.QUEUED and not (whole and gate.state == GateState.HELD):
                # A replacement under a gang that is up (or being granted): asked for at once
                # where the cluster queues what it cannot place yet (YARN); else admitted alone.
                if not pending:
                    needed: List[Task] = []
                elif self.containers.queues_requests:
                    job.to_launch = [k for k in job.to_launch if k not in need]
                    needed = pending
                else:
                    needed = self._replacements(pending, now)
                growth = [job.tasks[k] for k in extra if k in job.to_launch] \
                    if extra and gate.state == GateState.HELD and now >= self.grow_not_before else []
                if not growth:
                    return needed
            elif not pending:
                return []  # (only spares of an elastic role: they wait for its gang)
            else:
                growth = None
                if gate.state == GateState.HELD:  # every container went back: a new gang
                    gate.queue(now)
                    job.phase = Phase.QUEUED
                if not gate.may_ask(now):
                    return []
        if growth is not None:
            return needed + self._grow(growth, now)
        verdict = self.containers.admit([ts.plan for ts in pending], job.plan.job.placement)
        with job.lock:
            if job.finishing:
                return []
            queued = now - gate.waiting_since
            if not gate.answer(verdict, now, what="the gang", decide=job.decide, finish=job.finish):
                if not verdict.never and any(job.live_executor(ts) for ts in job.tasks.values()):
                    # Executors of containers asked for with the application registered before
                    # this verdict: a queued gang holds nothing, so they go back too.
                    self._release_all()
                return []
            job.phase = Phase.STARTING
            job.start_gang_clock(now)
            # Again, now: executors of containers asked for with the application may have
            # registered while admission read the room; their tasks are asked for no more.
            need, extra = split(job.plan, job.to_launch, {})
            pending = [job.tasks[k] for k in need]
            up = sum(1 for ts in job.tasks.values() if job.live_executor(ts))
            job.decide("the gang fits%s: asking for its %d container(s)%s%s",
                       f" ({verdict.why})" if verdict.why else "", len(pending),
                       f" ({up} of its executors up already)" if up else "",
                       f" after {queued:.1f} s queued" if queued >= 1 else "")
            job.to_launch = list(extra)
            self.gang_keys = set(need)
        # What would grow it, asked for now where it fits beside the gang: on its way, it joins
        # the first world.
        return pending + (self._grow([job.tasks[k] for k in extra], now, asking=pending) if extra else [])

    def _grow(self, extra: List[Task], now: float, asking: List[Task] = ()) -> List[Task]:
        """Containers for an elastic role beyond its ``min``, asked for one at a time as each fits
        (:meth:`Containers.admit_extra`; the first that does not ends the round): the world grows
        with what the cluster can give, and never holds part of a gang idle waiting for more."""
        job, out = self.job, []
        for ts in extra:
            verdict = self.containers.admit_extra(ts.plan, job.plan.job.placement,
                                                  [t.plan for t in [*asking, *out]])
            with job.lock:
                if job.finishing:
                    return out
                if not verdict.fits:
                    self.grow_not_before = now + admit_pause()
                    if verdict.why != self.grow_why:
                        self.grow_why = verdict.why
                        job.decide("%s would grow the world but waits: %s", ts.plan.id, verdict.why)
                    return out
                if ts.key in job.to_launch:
                    job.to_launch.remove(ts.key)
                    self.grow_why = ""
                    job.decide("%s fits: asking for its container (growing toward %d task(s))", ts.plan.id,
                               len(job.tasks))
                    out.append(ts)
        return out

    def _replacements(self, pending: List[Task], now: float) -> List[Task]:
        """Replacements on a backend that cannot queue a container (local: the machine's GPUs
        another job took meanwhile): started once they fit, said once while they wait. Called
        under the job's lock."""
        job = self.job
        if now < self.replacement_not_before:
            return []
        verdict = self.containers.admit([ts.plan for ts in pending], job.plan.job.placement)
        if not verdict.fits:
            if verdict.why != self.replacement_why:
                job.decide("%s wait%s: %s", ", ".join(ts.plan.id for ts in pending),
                           "s" if len(pending) == 1 else "", verdict.why)
            self.replacement_why = verdict.why
            self.replacement_not_before = now + admit_pause()
            return []
        self.replacement_why = ""
        job.to_launch = [k for k in job.to_launch if job.tasks[k] not in pending]
        return pending

    def check(self) -> None:
        """Each round, after launches: a gang granted, a hold run out, a queue wait too long."""
        try:
            self._check()
        finally:
            self._announce()

    def _check(self) -> None:
        job, gate = self.job, self.gate
        now = self.clock()
        with job.lock:
            if job.finishing:
                return
            if gate.out_of_patience(now):
                job.finish(JobState.FAILED, f"the gang waited {gate.waited(now):.0f} s for room, longer than "
                                            f"timeouts.queue_seconds ({gate.queue_seconds}): {gate.why}")
                return
            if gate.state != GateState.ASKED:
                return
            asked = [ts.executor for ts in job.tasks.values() if ts.executor and job.live_executor(ts)
                     and (self.gang_keys is None or ts.key in self.gang_keys)]
        if self.containers.granted(asked):
            with job.lock:
                gate.state = GateState.HELD
                job.start_gang_clock(now)  # gang_seconds: from containers granted to tasks registered
            return
        if not gate.hold_over(now):
            return
        with job.lock:
            if job.finishing or gate.state != GateState.ASKED:
                return
            wait = gate.backoff(now)
            job.decide("the gang was not granted whole within timeouts.hold_seconds (%g s): giving every "
                       "container back, asking again in %.0f s", gate.hold_seconds, wait, level=logging.WARNING)
            self._release_all()
            job.phase = Phase.QUEUED

    def reconcile(self) -> None:
        """Every container the cluster lists for the job that no task uses goes back now
        (issue 32): the cluster's own list (:meth:`Containers.held`), not the AM's records, so
        that one the AM forgot (a second executor for a task, an executor of a container that
        came up as it went back) cannot keep its GPU while the job waits. Read every
        RECONCILE_QUEUED_SECONDS while queued, RECONCILE_SECONDS while the gang runs, and at
        once after the gang went back. Main loop only, without the lock."""
        job, now = self.job, self.clock()
        with job.lock:
            if job.finishing or now < self.reconcile_at:
                return
            queued = self.gate.state == GateState.QUEUED
            self.reconcile_at = now + (RECONCILE_QUEUED_SECONDS if queued else RECONCILE_SECONDS)
        held = self.containers.held()
        if held is None:
            return
        with job.lock:
            if job.finishing:
                return
            self.held = len(held)
            used = {ts.executor for ts in job.tasks.values() if job.live_executor(ts)}
            stray = [h.executor for h in held
                     if h.executor not in used and not h.given_back and h.executor not in self.to_release]
            if not stray:
                return
            for ex_id in stray:
                ex = job.executors.get(ex_id)
                if ex is not None and ex.alive:  # (an executor superseded, or one that ran no task)
                    ex.alive, ex.task = False, None
                    job.send(ex, "exit", code=0)
            job.decide("%d container(s) the cluster lists for the job run no task of it (%s): giving them back",
                       len(stray), ", ".join(stray), level=logging.WARNING)
            self.to_release.extend(stray)

    def releases(self) -> List[str]:
        """Executors whose containers go back now (the main loop kills them)."""
        with self.job.lock:
            out, self.to_release = self.to_release, []
        return out

    # -- the other parts' requests (under the job's lock) -----------------------------------------
    def give_back(self, why: str) -> None:
        """Every container of the gang goes back and the job queues again (a preempted gang: the
        rest of it is useless until the cluster has room for all of it)."""
        job = self.job
        self._release_all()
        self.gate.queue(self.clock(), why)
        job.phase = Phase.QUEUED

    def task_done(self, ts: Task) -> None:
        """``ts`` succeeded while the job goes on: its container goes back to the cluster now."""
        job = self.job
        ex = job.live_executor(ts)
        if ex is None or job.finishing:
            return
        job.decide("%s is done: its container goes back to the cluster", ts.plan.id)
        self._detach(ts)

    def _release_all(self) -> None:
        job = self.job
        self.reconcile_at = 0.0  # and whatever the cluster lists besides, at once
        for ts in job.tasks.values():
            self._detach(ts)
            if ts.state != TaskState.SUCCEEDED and ts.key not in job.to_launch:
                job.to_launch.append(ts.key)

    def _detach(self, ts: Task) -> None:
        """Part ``ts`` from its executor, which is told to leave; its container is killed. The
        task keeps the executor's id (where its logs are) until another is started for it."""
        job = self.job
        ex = job.live_executor(ts)
        if ex is None:
            return
        ex.alive, ex.task = False, None
        job.send(ex, "exit", code=0)
        self.to_release.append(ex.id)
        job.changed.notify_all()

    # -- the report's words ----------------------------------------------------------------------
    def waiting_for(self) -> str:
        """What the job waits for now ("" unless queued)."""
        return self.gate.why if self.gate.state == GateState.QUEUED else ""

    def queued_seconds(self) -> float:
        return self.gate.queued_seconds + self.gate.waited(self.clock())
