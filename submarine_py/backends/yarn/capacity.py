"""Room for a gang on a YARN cluster, as the ResourceManager's REST API tells it.

What the AM's admission (``submarine_py/admission.py``) weighs: free resources per running node
(``/ws/v1/cluster/nodes``: ``availableResource``, GPUs included), what the job's queue may still
take (``/ws/v1/cluster/scheduler``: ``maxEffectiveCapacity`` less ``resourcesUsed``; its
guarantee is ``minEffectiveCapacity``), and the other jobs of this tool waiting for their gangs
(``/ws/v1/cluster/apps``). Each job says its gang in a tag at submission (:func:`gang_tag`, as
YARN keeps tags: lower case) and where its gang stands in its progress, which its AM sets and
every AM can read (:data:`PROGRESS`): this is how AMs that never talk to each other agree on who
goes first.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...admission import Gang, Need, Room, Verdict, admit, short_in_all
from ...plan import Plan, TaskPlan
from ...states import Placement
from .hadoop.resourcemanager import GPU, ResourceManager, resources_of
from .protocol import ASKED_BELOW, GANG_TAG, QUEUED_BELOW, TAG

log = logging.getLogger("subm.am.yarn")

#: YARN rounds each container's memory up to a multiple of this (yarn.scheduler.minimum-allocation-mb).
DEFAULT_MIN_MEMORY_MB = 1024


def as_asked(memory_mb: int, vcores: int, gpus: int, min_memory_mb: int = DEFAULT_MIN_MEMORY_MB) -> Need:
    """A container's :class:`Need` as YARN grants it: memory rounded up to a multiple of the
    scheduler's minimum allocation, at least one vcore."""
    step = max(1, min_memory_mb)
    return Need(-(-memory_mb // step) * step, max(1, vcores), gpus)


def needs_of(tasks: Sequence[TaskPlan], min_memory_mb: int = DEFAULT_MIN_MEMORY_MB) -> Tuple[Need, ...]:
    """One :class:`Need` per task, as YARN will grant it."""
    return tuple(as_asked(t.resources.memory_mb, t.resources.vcores, t.resources.gpus, min_memory_mb) for t in tasks)


def not_granted(tasks: Sequence[TaskPlan], running: int, reserved_mb: int,
                min_memory_mb: int = DEFAULT_MIN_MEMORY_MB) -> List[TaskPlan]:
    """The tasks of a gang asked for with the application that the RM has not granted yet, from
    its count of the job's containers (``running``, its AM's included) and the memory it
    reserved for the job (``reserved_mb``). A container the scheduler reserves for the job on a
    node that is full for now counts in the queue's use but not among the job's containers: it
    is the gang's own, and counted as granted, or the gang would find the room its own
    reservation takes missing."""
    rest = list(tasks)[max(0, running - 1):]
    for taken, need in enumerate(needs_of(rest, min_memory_mb)):
        if need.memory_mb > reserved_mb:
            return rest[taken:]
        reserved_mb -= need.memory_mb
    return []


def task_containers_counted(app: Mapping[str, Any]) -> Optional[int]:
    """The task containers the RM counts for a running application (its ``runningContainers``
    less the AM's), or None where it does not say."""
    if app.get("state") != "RUNNING" or app.get("runningContainers") is None:
        return None
    return max(0, int(app.get("runningContainers") or 0) - 1)


def gang_tag(plan: Plan) -> str:
    """The job's gang as a YARN tag: ``subm-gang:2x2048m1c1g+1x1024m1c0g`` (count x per task)."""
    groups: Dict[Tuple[int, int, int], int] = {}
    for t in plan.tasks:
        key = (t.resources.memory_mb, t.resources.vcores, t.resources.gpus)
        groups[key] = groups.get(key, 0) + 1
    return GANG_TAG + "+".join(f"{n}x{m}m{c}c{g}g" for (m, c, g), n in groups.items())


def parse_gang_tag(tags: Any, min_memory_mb: int = DEFAULT_MIN_MEMORY_MB) -> Optional[Tuple[Need, ...]]:
    """The needs a job's tags say (None: no gang tag, not one of ours or older)."""
    words = tags.split(",") if isinstance(tags, str) else list(tags or [])
    for word in words:
        word = word.strip().lower()
        if not word.startswith(GANG_TAG):
            continue
        needs: List[Need] = []
        for part in word[len(GANG_TAG):].split("+"):
            m = re.fullmatch(r"(\d+)x(\d+)m(\d+)c(\d+)g", part)
            if not m:
                return None
            n, mem, vc, g = (int(x) for x in m.groups())
            needs += [as_asked(mem, vc, g, min_memory_mb)] * n
        return tuple(needs)
    return None


def _need(block: Optional[Mapping[str, Any]]) -> Need:
    res = resources_of(block)  # type: ignore[arg-type]
    block = block or {}
    return Need(int(res.get("memory-mb", block.get("memory", 0)) or 0),
                int(res.get("vcores", block.get("vCores", 0)) or 0), int(res.get(GPU, 0)))


def node_room(nodes: Sequence[Mapping[str, Any]]) -> Dict[str, Need]:
    """Free resources of each running node, by host name."""
    out: Dict[str, Need] = {}
    for n in nodes:
        if n.get("state") != "RUNNING":
            continue
        free = _need(n.get("availableResource"))
        if not free.memory_mb and n.get("availMemoryMB") is not None:
            free = Need(int(n.get("availMemoryMB") or 0), int(n.get("availableVirtualCores") or 0), free.gpus)
        out[str(n.get("nodeHostName") or n.get("id"))] = free
    return out


def node_totals(nodes: Sequence[Mapping[str, Any]]) -> Dict[str, Need]:
    """What each running node has in all (used and free), by host name."""
    out: Dict[str, Need] = {}
    for n in nodes:
        if n.get("state") == "RUNNING":
            out[str(n.get("nodeHostName") or n.get("id"))] = _need(n.get("availableResource")) + _need(n.get("usedResource"))
    return out


def leaf_queue(name: str) -> str:
    """A leaf queue's name as a job file names it: ``teama`` for ``teama`` and for the path
    ``root.teama``, which Hadoop 3.4's RM reports as an application's queue (3.1 says ``teama``)."""
    return name.rsplit(".", 1)[-1]


def find_queue(scheduler: Mapping[str, Any], name: str) -> Optional[Mapping[str, Any]]:
    """The leaf queue ``name`` (its short name, or its path's last part) in the scheduler's JSON."""
    info = (scheduler.get("scheduler") or {}).get("schedulerInfo") or {}
    short = leaf_queue(name)
    stack = [info]
    while stack:
        q = stack.pop()
        kids = (q.get("queues") or {}).get("queue") or []
        if not kids and q.get("queueName") == short:
            return q
        stack.extend(kids)
    return None


def queue_room(scheduler: Mapping[str, Any], name: str) -> Tuple[Optional[Need], Optional[Need], Optional[Need]]:
    """(what the queue may still take, its guarantee, what it uses); all None where the
    scheduler does not say (FairScheduler, an older RM): then nodes alone bound admission."""
    most = queue_most(scheduler, name)
    if most is None:
        return None, None, None
    q = find_queue(scheduler, name) or {}
    used = _need(q.get("resourcesUsed"))
    return most - used, _need(q.get("minEffectiveCapacity")), used


def room_in(nodes: Mapping[str, Need], totals: Mapping[str, Need], scheduler: Mapping[str, Any], queue: str,
            preemption: bool, others: Tuple[Gang, ...]) -> Room:
    """The :class:`Room` a gang of ``queue`` weighs: the running nodes' free resources and totals
    (:func:`node_room`, :func:`node_totals`), its queue's from the scheduler, the others waiting."""
    free, guaranteed, used = queue_room(scheduler, queue)
    return Room(nodes=nodes, totals=totals, queue_most=queue_most(scheduler, queue), queue_free=free,
                queue_guaranteed=guaranteed, queue_used=used, preemption=preemption, others=others)


def queue_most(scheduler: Mapping[str, Any], name: str) -> Optional[Need]:
    """The most the queue may ever hold (``maxEffectiveCapacity``), or None where not said."""
    q = find_queue(scheduler, name)
    if q is None or not q.get("maxEffectiveCapacity"):
        return None
    return _need(q.get("maxEffectiveCapacity"))


def waiting_gangs(apps: Sequence[Mapping[str, Any]], me: str,
                  min_memory_mb: int = DEFAULT_MIN_MEMORY_MB) -> Tuple[Gang, ...]:
    """Other jobs of this tool that wait for their gang (queued, or asked and still arriving:
    then only the containers not yet granted), from the RM's applications."""
    out = []
    for a in apps:
        if a.get("id") == me or a.get("state") not in ("ACCEPTED", "RUNNING"):
            continue
        needs = parse_gang_tag(a.get("applicationTags"), min_memory_mb)
        if not needs:
            continue
        progress = float(a.get("progress") or 0.0)
        queued = a.get("state") == "ACCEPTED" or progress < QUEUED_BELOW
        asked = not queued and progress < ASKED_BELOW
        if not queued and not asked:
            continue
        held = max(0, int(a.get("runningContainers") or 0) - 1)
        holding: Tuple[Need, ...] = ()
        if asked:  # the containers it holds besides its AM are granted already
            needs = needs[held:]
            if not needs:
                continue
        elif held:  # it waits, yet the RM counts task containers for it (issue 32)
            holding = needs[:held]
        out.append(Gang(job=str(a.get("id")), queue=leaf_queue(str(a.get("queue") or "")),
                        submitted_at=float(a.get("startedTime") or 0) / 1000.0, needs=needs,
                        priority=int(a.get("priority") or 0), asked=asked, holding=holding))
    return tuple(out)


class Capacity:
    """Reads :class:`Room` for one job from the RM (three REST calls: the running nodes, the
    scheduler's queues, this tool's jobs without what admission does not read), or only what the
    whole cluster has free (:meth:`free_in_all`, one small call)."""

    def __init__(self, rm: ResourceManager, app_id: str, queue: str):
        self.rm = rm
        self.app_id = app_id
        self.queue = queue
        #: This job as the RM lists it (when it started, its priority): how others order it.
        self.started_at: Optional[float] = None
        self.priority = 0
        #: Containers the RM counts for this job now, its AM's included, and the memory it
        #: reserved for the job on nodes full for now (see :func:`not_granted`).
        self.running = 0
        self.reserved_mb = 0
        value = rm.conf_value("yarn.scheduler.minimum-allocation-mb")
        self.min_memory_mb = int(value) if value and value.isdigit() else DEFAULT_MIN_MEMORY_MB
        self.preemption = (rm.conf_value("yarn.resourcemanager.scheduler.monitor.enable") or "").lower() == "true"
        #: The room has been read whole at least once (see :meth:`short_in_all`).
        self.read_whole = False
        #: This tool's applications as the last whole read listed them (who may steward the line).
        self.listed: List[Dict[str, Any]] = []

    def room(self) -> Room:
        listed = self.rm.nodes(running_only=True)
        scheduler = self.rm.scheduler()
        apps = self.rm.apps(tags=[TAG], states=["ACCEPTED", "RUNNING"], slim=True)
        for a in apps:
            if a.get("id") == self.app_id:
                self.started_at = float(a.get("startedTime") or 0) / 1000.0 or self.started_at
                self.priority = int(a.get("priority") or 0)
                self.running = int(a.get("runningContainers") or 0)
                self.reserved_mb = int(a.get("reservedMB") or 0)
        self.read_whole, self.listed = True, apps
        return room_in(node_room(listed), node_totals(listed), scheduler, self.queue, self.preemption,
                       waiting_gangs(apps, self.app_id, self.min_memory_mb))

    def short_in_all(self, me: Gang) -> Optional[Verdict]:
        """No, from the RM's ``/metrics`` alone (:meth:`free_in_all`), when the whole cluster
        has less free than ``me`` asks: a waiting job costs the RM one small answer a poll, not
        every node, every queue and every waiting job (issue 44). None (read the room) for the
        first answer (the room read whole says what else the job waits for, or that it can never
        fit), for a job the RM counts containers for besides its AM (it may hold some: its own,
        which the cluster's total counts as used), and where YARN preempts (within its queue's
        guarantee a gang is asked for whatever is free)."""
        if not self.read_whole or self.preemption or self.running > 1:
            return None
        free = self.free_in_all()
        return short_in_all(me.needs, free, me.queue) if free is not None else None

    def free_in_all(self, metrics: Optional[Mapping[str, Any]] = None) -> Optional[Need]:
        """What the whole cluster has free (its resources less what is used: reservations count
        as free, so that this never says less than there is), from the RM's ``/metrics``: one
        small answer whatever the number of nodes and jobs. None where the RM does not say what
        it uses (``totalUsedResourcesAcrossPartition``)."""
        metrics = self.rm.metrics() if metrics is None else metrics
        in_all, used = (metrics.get(k) for k in ("totalClusterResourcesAcrossPartition",
                                                 "totalUsedResourcesAcrossPartition"))
        if not in_all or not used:
            return None
        return _need(in_all) - _need(used)

    def me(self, tasks: Sequence[TaskPlan], submitted_at: float) -> Gang:
        """This job's gang of ``tasks``, ordered as the others see it (after :meth:`room`)."""
        return Gang(job=self.app_id, queue=leaf_queue(self.queue), submitted_at=self.started_at or submitted_at,
                    needs=needs_of(tasks, self.min_memory_mb), priority=self.priority)


def whole_gang(plan: Plan) -> Optional[Tuple[TaskPlan, ...]]:
    """The tasks of a job whose whole gang may be asked for with the application itself (see
    :func:`admit_at_submission`): every task, where no role is elastic (an elastic role's gang
    is its ``min``, the rest grows one by one) and the job is no sweep (its pool asks
    trial by trial). None: the AM asks for everything."""
    if plan.job.sweep is not None or any(spec.elastic for spec in plan.job.roles.values()):
        return None
    return tuple(plan.tasks)


def admit_at_submission(plan: Plan, rm: ResourceManager, now: float) -> Verdict:
    """Whether the job's whole gang fits now, decided as its AM would (the same :func:`admit`
    over the same room), before the application exists: then skein asks for the gang as soon as
    the AM's container starts. skein's AM sends the requests the AM adds later only on its next
    idle heartbeat to the RM (every 5 s: min(5000, yarn.am.liveness-monitor.expiry-interval-ms / 2)),
    which was most of a gang's start-up. A gang that does not fit (or a job whose gang grows,
    :func:`whole_gang`) is submitted asking for nothing and waits in its AM, holding nothing."""
    tasks = whole_gang(plan)
    if not tasks:
        return Verdict(False, "the AM asks for this job's containers")
    capacity = Capacity(rm, "", plan.job.queue)
    room = capacity.room()
    return admit(capacity.me(tasks, now), room, now=now, spread=plan.job.placement == Placement.SPREAD)


def room_words(room: Room, queue: str) -> str:
    """``queue teamb may take 2 GPUs, 40960 MiB, 44 vcores more (3 GPUs guaranteed); free per
    node: 127.0.0.101 0 GPUs 8192 MiB 7 vcores, ...``: what is short is seen first, GPUs first."""
    def said(n: Need) -> str:
        return f"{n.gpus} GPU{'s' if n.gpus != 1 else ''}, {n.memory_mb} MiB, {n.vcores} vcores"

    parts = []
    if room.queue_free is not None:
        guaranteed = f" ({room.queue_guaranteed.gpus} GPUs guaranteed)" if room.queue_guaranteed is not None else ""
        parts.append(f"queue {queue} may take {said(room.queue_free)} more{guaranteed}")
    nodes = sorted(room.nodes.items(), key=lambda kv: (-kv[1].gpus, -kv[1].memory_mb, kv[0]))
    parts.append("free per node: " + ("; ".join(f"{name} {said(n)}" for name, n in nodes) or "no running node"))
    if room.others:
        parts.append(f"{len(room.others)} other job{'s' if len(room.others) > 1 else ''} waiting for a gang")
    for g in room.others:
        if g.holding and not g.asked:  # it waits, yet holds: named (its AM gives them back)
            parts.append(f"{g.job} waits while holding {len(g.holding)} container(s), "
                         f"{sum(n.gpus for n in g.holding)} GPU(s)")
    return "; ".join(parts)
