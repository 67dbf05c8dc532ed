"""Elastic roles (``instances: {min: 2, max: 8}``): which tasks make up an attempt's world, and
when it changes. The decisions are pure functions here; :class:`Elasticity` applies them each
round of the AM's main loop.

An elastic job has a task for each of its role's ``max`` instances (``plan.py``), and runs each
attempt with the world of those that are up (``Plan.cluster_spec``, ``Plan.world_index``):

* **start** (:func:`starts`): every task of a role of fixed size and ``min`` of each elastic role
  registered; then at once if no other container is on its way, else after
  ``timeouts.settle_seconds`` (a container granted a moment after the others joins the first
  world instead of costing a restart);
* **grow** (:func:`grows`): tasks registered while the gang runs (containers YARN granted later:
  :func:`split` has them asked for one at a time as they fit, ``allocation.py``) join through a
  gang restart with the bigger world, at most once per ``settle_seconds``;
* **shrink** (:func:`shrinks`): a task of the world taken by the cluster (its node lost, its
  container preempted) with at least ``min`` of its role left: a gang restart with the smaller
  world at once, its replacement asked for in the background (it joins by growing).

Both are the cluster's doing and spend no restart budget (``Cause.RESIZED``). When a node dies,
its peers' collectives fail at once, before the AM can tell the machine is gone (a few missed
heartbeats, ``timeouts.lost_after_seconds``): a failure of a world member is therefore judged
only after that long (:meth:`Elasticity.hold`); a loss found meanwhile makes it part of the
shrink, which spends nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ..plan import Plan
from ..states import Phase, TaskState
from .job import JobRun, TaskKey

#: Beyond ``timeouts.lost_after_seconds``: how much longer a failure in an elastic world waits
#: for word of a peer's loss (the AM's round, a poll of the containers).
HOLD_MARGIN_SECONDS = 2.0


# -- the decisions (pure) ----------------------------------------------------------------------
def has_min(plan: Plan, up: Collection[TaskKey]) -> bool:
    """Whether ``up`` (tasks registered) can form a world: every task of a role of fixed size,
    and at least ``min`` of each elastic role."""
    ups = set(up)
    for role, spec in plan.job.roles.items():
        mine = sum(1 for r, _ in ups if r == role)
        if mine < (spec.fewest if spec.elastic else spec.instances):
            return False
    return True


def starts(plan: Plan, up: Collection[TaskKey], coming: int, min_up_for: float, settle: float) -> bool:
    """Whether an attempt starts now with the world ``up``: it has its ``min`` (:func:`has_min`)
    and no container is on its way (``coming``: executors started that have not registered), or
    it has waited ``settle`` seconds with its ``min`` up (``min_up_for``)."""
    return has_min(plan, up) and (coming == 0 or min_up_for >= settle)


def grows(spares: int, coming: int, since_change: float, spare_waited: float, settle: float) -> bool:
    """Whether the running world grows now by its ``spares`` (tasks registered outside it): at
    most once per ``settle`` seconds (``since_change``: since the world last changed), with the
    containers still on their way if they come within ``settle`` of the first spare."""
    return spares > 0 and since_change >= settle and (coming == 0 or spare_waited >= settle)


def shrinks(plan: Plan, world: Collection[TaskKey], lost: TaskKey, alive: Collection[TaskKey]) -> bool:
    """Whether the world goes on without ``lost`` (taken by the cluster): it is a member of an
    elastic role, and at least that role's ``min`` members keep a live executor (``alive``)."""
    spec = plan.job.roles.get(lost[0])
    if spec is None or not spec.elastic or lost not in world:
        return False
    left = sum(1 for k in world if k[0] == lost[0] and k != lost and k in alive)
    return left >= spec.fewest


def can_shrink(plan: Plan, world: Collection[TaskKey]) -> bool:
    """Whether losing some member could leave a smaller world: an elastic role above its ``min``."""
    return any(sum(1 for k in world if k[0] == role) > spec.fewest
               for role, spec in plan.job.roles.items() if spec.elastic)


def split(plan: Plan, pending: Sequence[TaskKey], live: Mapping[str, int]) -> Tuple[List[TaskKey], List[TaskKey]]:
    """Of tasks waiting for a container, those the gang needs (every one of a role of fixed size;
    of an elastic role, as many as bring it to ``min``, lowest index first, ``live``: its tasks
    with an executor already) and those that would grow it (asked for one at a time as they fit)."""
    need, extra = [], []
    taken: Dict[str, int] = dict(live)
    for key in sorted(pending, key=lambda k: (list(plan.job.roles).index(k[0]), k[1])):
        spec = plan.job.roles[key[0]]
        if spec.elastic and taken.get(key[0], 0) >= spec.fewest:
            extra.append(key)
        else:
            need.append(key)
            taken[key[0]] = taken.get(key[0], 0) + 1
    order = {k: i for i, k in enumerate(pending)}
    return sorted(need, key=order.__getitem__), sorted(extra, key=order.__getitem__)


# -- applying them ----------------------------------------------------------------------------
@dataclass
class Held:
    """A failure of a world member, judged later (see the module's doc)."""

    key: TaskKey
    attempt: int
    until: float
    judge: Callable[[], None]


class Elasticity:
    """The running world's changes, each round (under the job's lock). ``resize(why)``: a gang
    restart with a new world (``Recovery.resize``)."""

    def __init__(self, job: JobRun, resize: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic):
        self.job = job
        self.resize = resize
        self.clock = clock
        self.settle = job.plan.job.timeouts.settle_seconds
        self.hold_seconds = job.plan.job.timeouts.lost_after_seconds + HOLD_MARGIN_SECONDS
        self.held: List[Held] = []

    @property
    def on(self) -> bool:
        return self.job.plan.job.elastic

    def coming(self) -> int:
        """Executors started for the job's tasks that have not registered (for this attempt)."""
        job = self.job
        return sum(1 for ts in job.tasks.values() if ts.state == TaskState.PENDING and job.live_executor(ts))

    def start_world(self) -> Optional[Tuple[TaskKey, ...]]:
        """The world to start the gang with now, or None to wait (the gang's start, ``gang.py``)."""
        job = self.job
        up = [k for k, ts in job.tasks.items() if ts.state == TaskState.REGISTERED]
        if not self.on:
            return tuple(job.tasks) if len(up) == len(job.tasks) else None
        now = self.clock()
        if not has_min(job.plan, up):
            job.min_up_since = None
            return None
        if job.min_up_since is None:
            job.min_up_since = now
        coming = self.coming()
        if not starts(job.plan, up, coming, now - job.min_up_since, self.settle):
            return None
        if coming:
            job.decide("starting with the %d task(s) up after timeouts.settle_seconds (%g s); %d more on their "
                       "way join by growing", len(up), self.settle, coming)
        return tuple(sorted(up, key=lambda k: (list(job.plan.job.roles).index(k[0]), k[1])))

    def check(self) -> None:
        """Each round: failures held long enough are judged; registered spares grow the world."""
        job = self.job
        if not self.on or job.finishing:
            return
        now = self.clock()
        due = [h for h in self.held if h.until <= now]
        if due:
            self.held = [h for h in self.held if h.until > now]
            for h in due:
                ts = job.tasks[h.key]
                if not job.finishing and ts.state == TaskState.FAILED and ts.attempt == h.attempt:
                    h.judge()
        if job.phase != Phase.RUNNING or self.held:
            return
        spares = [ts for k, ts in job.tasks.items() if k not in job.world and ts.state == TaskState.REGISTERED]
        if not spares or any(job.tasks[k].state == TaskState.SUCCEEDED for k in job.world):
            return  # (a world whose members are finishing is not restarted to grow)
        waited = now - min(ts.registered_at for ts in spares)
        if grows(len(spares), self.coming(), now - job.world_since, waited, self.settle):
            names = ", ".join(ts.plan.id for ts in spares)
            self.resize(f"{names} came up (containers granted): growing the world from {len(job.world)} to "
                        f"{len(job.world) + len(spares)} task(s)")

    def hold(self, ts_key: TaskKey, attempt: int, judge: Callable[[], None]) -> bool:
        """Keep a world member's failure to judge after ``lost_after_seconds`` (see the module's
        doc); False where no loss could make it part of a shrink (it is judged at once)."""
        job = self.job
        if not self.on or job.phase != Phase.RUNNING or ts_key not in job.world \
                or not can_shrink(job.plan, job.world):
            return False
        self.held.append(Held(ts_key, attempt, self.clock() + self.hold_seconds, judge))
        if len(self.held) == 1:
            job.decide("judging that failure in %.0f s: in an elastic world a peer's lost node fails the others "
                       "first (timeouts.lost_after_seconds %g)", self.hold_seconds,
                       job.plan.job.timeouts.lost_after_seconds)
        return True

    def absorbed(self) -> List[str]:
        """The held failures, now part of a shrink (they spend nothing): their tasks' ids."""
        out = [self.job.tasks[h.key].plan.id for h in self.held]
        self.held = []
        return out

    def shrinks(self, lost: TaskKey) -> bool:
        """Whether the world goes on without ``lost``, taken by the cluster (:func:`shrinks`)."""
        job = self.job
        if not self.on or job.phase != Phase.RUNNING:
            return False
        alive = [k for k, ts in job.tasks.items() if job.live_executor(ts)]
        return shrinks(job.plan, job.world, lost, alive)

    def outside(self, key: TaskKey) -> bool:
        """Whether ``key`` is a spare: a task of the job not in the running world."""
        return self.on and self.job.phase == Phase.RUNNING and key not in self.job.world
