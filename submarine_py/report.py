"""A job's report: what the ApplicationMaster knows of a job, typed.

The AM builds a :class:`JobReport` (``ApplicationMaster.report()``), serves it as
JSON (``/v1/status``) and writes it at the end (``report.json`` locally,
``subm-report.json`` in the AM container's log directory on YARN). Every
backend's ``status()``/``kill()``/``list()`` returns one; ``output`` renders it
for people and CI, and the AM's status page shows it.

``to_dict()`` is the on-disk and wire form; ``from_dict()`` reads it back
(also files written before this module existed, whose keys it shares).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .states import Cause, JobState, Phase, TaskState, TrialState

__all__ = ["Ahead", "Event", "GpuSummary", "JobReport", "Place", "SweepReport", "TaskReport", "Timings", "TrialReport", "replace"]


@dataclass(frozen=True)
class Timings:
    #: Seconds from submission until every task had registered (the gang), first attempt.
    gang_ready_seconds: Optional[float] = None
    #: Seconds from submission until the job ended (or until now, while it runs).
    total_seconds: Optional[float] = None
    #: Seconds the job waited for room for its gang, holding no task container (every wait).
    queued_seconds: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k != "queued_seconds"}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> "Timings":
        data = data or {}
        return cls(gang_ready_seconds=data.get("gang_ready_seconds"), total_seconds=data.get("total_seconds"),
                   queued_seconds=data.get("queued_seconds"))


@dataclass(frozen=True)
class Event:
    """A decision of the AM (gang ready, task failed, restarting...), as shown to CI."""

    time: float
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return {"time": self.time, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Event":
        return cls(time=float(data["time"]), message=str(data["message"]))


@dataclass(frozen=True)
class GpuSummary:
    """A task's GPU use from its executor's NVML samples (see ``am/gpu_usage.py``)."""

    #: The GPUs the task sees: NVML indices or UUIDs, as CUDA_VISIBLE_DEVICES names them.
    devices: Tuple[str, ...] = ()
    samples: int = 0
    #: Mean over the samples of the devices' average utilization (%).
    mean_utilization: float = 0.0
    #: Highest utilization of any of its devices (%).
    peak_utilization: int = 0
    #: Highest memory used by its devices together, and their total (MiB).
    peak_memory_mb: int = 0
    memory_total_mb: int = 0
    #: Longest stretch (s) with every device at 0 %, and the current one.
    idle_seconds: float = 0.0
    idle_now_seconds: float = 0.0
    #: The longest idle stretch reached the AM's threshold (SUBM_GPU_IDLE_SECONDS).
    idle: bool = False

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["devices"] = list(self.devices)
        return d

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Optional["GpuSummary"]:
        if not data:
            return None
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known and v is not None}
        kw["devices"] = tuple(str(d) for d in kw.get("devices") or ())
        return cls(**kw)


#: How the diagnostics of a job whose AM was signalled begin (YARN's own, when it killed the
#: application with a reason, say more: see the YARN backend's status()).
SIGNALLED = "the ApplicationMaster received"

#: The task fields ``--output json`` promises, in order (docs/cli.md, "--output json").
PUBLIC_TASK_FIELDS = ("role", "index", "state", "exit_code", "restarts", "host", "log", "tracked", "gpu",
                      "cause", "restarts_by_cause", "quiet_seconds")


def restart_counts(counts: Optional[Mapping[str, Any]]) -> Dict[str, int]:
    """Restarts by cause with every cause named (0 where none), in :class:`Cause` order: the
    shape ``--output json`` promises whatever happened."""
    counts = counts or {}
    return {c.value: int(counts.get(c.value) or 0) for c in Cause}


@dataclass(frozen=True)
class TaskReport:
    role: str
    index: int
    state: TaskState = TaskState.PENDING
    exit_code: Optional[int] = None
    restarts: int = 0
    #: The attempt this task is on, counted from 1 like every attempt shown to people
    #: (its SUBM_ATTEMPT is one less).
    attempt: int = 1
    host: Optional[str] = None
    address: Optional[str] = None
    tracked: bool = True
    #: Where its stdout/stderr are: a path (local) or a NodeManager URL (YARN).
    log: str = ""
    executor: Optional[str] = None
    command: str = ""
    #: YARN only: the task's container and its NodeManager's HTTP address (None elsewhere).
    container_id: Optional[str] = None
    node_http: Optional[str] = None
    #: GPU use, for tasks with GPUs whose executor could sample them (None otherwise).
    gpu: Optional[GpuSummary] = None
    #: Why its last attempt ended, when it did not succeed (state FAILED): the program's
    #: (``failed``, ``hung``) or the cluster's (``preempted``, ``node_lost``). None otherwise.
    cause: Optional[Cause] = None
    #: Its restarts (``restarts`` counts them all) by cause: names of :class:`Cause` -> count.
    restarts_by_cause: Mapping[str, int] = field(default_factory=dict)
    #: While it runs: seconds since it last printed (stdout or stderr), as its executor says.
    quiet_seconds: Optional[float] = None

    @property
    def id(self) -> str:
        return f"{self.role}:{self.index}"

    def to_dict(self) -> Dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["state"] = self.state.value
        d["gpu"] = self.gpu.to_dict() if self.gpu else None
        d["cause"] = self.cause.value if self.cause else None
        d["restarts_by_cause"] = {k: v for k, v in restart_counts(self.restarts_by_cause).items() if v} or None
        for key in ("container_id", "node_http", "gpu", "cause", "restarts_by_cause", "quiet_seconds"):
            if d[key] is None:
                del d[key]
        return d

    def public(self) -> Dict[str, Any]:
        d = self.to_dict()
        out = {k: d.get(k) for k in PUBLIC_TASK_FIELDS}
        out["restarts_by_cause"] = restart_counts(self.restarts_by_cause)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TaskReport":
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["state"] = TaskState(kw.get("state") or TaskState.PENDING)
        kw["gpu"] = GpuSummary.from_dict(kw.get("gpu"))
        kw["cause"] = Cause(kw["cause"]) if kw.get("cause") else None
        kw["restarts_by_cause"] = {k: v for k, v in restart_counts(kw.get("restarts_by_cause")).items() if v}
        return cls(**kw)


@dataclass(frozen=True)
class TrialReport:
    """One trial of a sweep: its parameters, where it ran, how it ended."""

    number: int
    params: Mapping[str, Any]
    state: TrialState = TrialState.RUNNING
    #: Its result (the last value of the metric it printed); a pruned trial's last intermediate one.
    value: Optional[float] = None
    #: The last step it reported (an intermediate value's ``step=N``), if any.
    step: Optional[int] = None
    #: The container (executor) that ran it, and its host.
    container: Optional[str] = None
    host: Optional[str] = None
    started_at: Optional[float] = None
    duration_seconds: Optional[float] = None
    #: Why it failed (exit code, the error in its stderr), or why it was stopped.
    diagnostics: str = ""
    #: Its intermediate values by step (what early stopping weighed; a resumed sweep replays them).
    intermediate: Mapping[int, float] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["state"], d["params"] = self.state.value, dict(self.params)
        d["intermediate"] = {str(k): v for k, v in self.intermediate.items()}
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrialReport":
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["state"] = TrialState(kw.get("state") or TrialState.RUNNING)
        kw["params"] = dict(kw.get("params") or {})
        kw["intermediate"] = {int(k): float(v) for k, v in (kw.get("intermediate") or {}).items()}
        return cls(**kw)


@dataclass(frozen=True)
class SweepReport:
    """A sweep's trials so far and the best of them (``best``: None until one succeeded)."""

    metric: str
    goal: str
    trials: Tuple[TrialReport, ...] = ()
    best: Optional[TrialReport] = None
    #: Trials the sweep runs in all.
    planned: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"metric": self.metric, "goal": self.goal, "planned": self.planned,
                "trials": [t.to_dict() for t in self.trials],
                "best": best_of(self.best) if self.best else None}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Optional["SweepReport"]:
        if not data:
            return None
        trials = tuple(TrialReport.from_dict(t) for t in data.get("trials") or ())
        best = data.get("best") or None
        number = best.get("number") if best else None
        return cls(metric=str(data.get("metric") or ""), goal=str(data.get("goal") or "minimize"), trials=trials,
                   best=next((t for t in trials if t.number == number), None), planned=int(data.get("planned") or 0))


@dataclass(frozen=True)
class Ahead:
    """A gang ahead of a waiting job in its queue's line: its id, user, GPUs asked, since when."""

    app_id: str
    user: Optional[str]
    gpus: int
    waiting_since: float


@dataclass(frozen=True)
class Place:
    """A waiting job's place in its queue's line (``subm status``; ``queue_view.place_of``)."""

    queue: str
    #: 1: the head of its queue's line.
    position: int
    ahead: Tuple[Ahead, ...]
    #: GPUs free in the cluster now (None: not read), the GPUs its gang asks, the containers it
    #: asks them in and the fewest nodes those can span on this cluster (None: unknown).
    free_gpus: Optional[int]
    gpus: int
    containers: int
    nodes: Optional[int]
    #: When it is expected to start (epoch seconds; None: unknown) and why (``forecast.py``).
    expected_start: Optional[float]
    basis: str

    def to_dict(self) -> Dict[str, Any]:
        return dict(asdict(self), ahead=[asdict(a) for a in self.ahead])

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Optional["Place"]:
        if not data:
            return None
        known = {f.name for f in fields(cls)}
        return cls(**dict({k: v for k, v in data.items() if k in known},
                          ahead=tuple(Ahead(**a) for a in data.get("ahead") or ())))


def best_of(trial: TrialReport) -> Dict[str, Any]:
    """``best`` as ``--output json`` shows it."""
    return {"number": trial.number, "params": dict(trial.params), "value": trial.value}


@dataclass(frozen=True)
class JobReport:
    app_id: str
    name: Optional[str] = None
    state: JobState = JobState.ACCEPTED
    backend: str = ""
    framework: Optional[str] = None
    #: The AM's phase; None where no AM has answered (yet).
    phase: Optional[Phase] = None
    #: 1 + the restarts so far; None where the backend cannot know (YARN's list).
    attempts: Optional[int] = 1
    diagnostics: str = ""
    running: int = 0
    total: int = 0
    tasks: Tuple[TaskReport, ...] = ()
    #: role -> ["host:port", ...] once the gang has registered.
    cluster_spec: Optional[Dict[str, List[str]]] = None
    timings: Timings = field(default_factory=Timings)
    status_url: str = ""
    #: The job's TensorBoard (the ``tensorboard`` field), ``http://host:port/``, while its task
    #: runs; None otherwise (no TensorBoard, not started yet, or the job has ended).
    tensorboard_url: Optional[str] = None
    events: Tuple[Event, ...] = ()
    #: True when nothing about the job will change any more.
    final: bool = False
    #: YARN only: the application's own state and its tracking URL.
    yarn_state: Optional[str] = None
    tracking_url: Optional[str] = None
    #: Who ran it and where (the queue: YARN only).
    user: Optional[str] = None
    queue: Optional[str] = None
    #: Epoch seconds: submission, the AM's start, the job's end.
    submitted_at: Optional[float] = None
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    #: The job spec as submitted: in the final report file, for history; None elsewhere.
    spec: Optional[Dict[str, Any]] = None
    #: Every restart (of the gang or of a task) by cause: names of :class:`Cause` -> count.
    #: The cluster's (preempted, node_lost) spend restart.max_cluster_restarts, not max_restarts.
    restarts_by_cause: Mapping[str, int] = field(default_factory=dict)
    #: timeouts.hang_seconds, where the job set it (what ``quiet_seconds`` of tasks are weighed against).
    hang_seconds: Optional[int] = None
    #: timeouts.job_seconds, where the job set it (a running job's declared limit: ``forecast.py``).
    job_seconds: Optional[int] = None
    #: While queued: what the job waits for ("waiting for 4 GPUs: 2 free in queue teamb ...").
    waiting_for: Optional[str] = None
    #: While queued: task containers the cluster still lists for the job (its AM gives them
    #: back; on YARN the AM's last reading of skein's list, or the ResourceManager's count where
    #: that is more): a queued job says "holding no task container" only when this is 0 or None.
    held_containers: Optional[int] = None
    #: Nodes each attempt of the gang spanned, in order.
    nodes_spanned: Tuple[int, ...] = ()
    #: A sweep's trials and its best so far (None: not a sweep).
    sweep: Optional[SweepReport] = None
    #: An elastic job's (``docs/elastic.md``): the tasks in each attempt's world, in order
    #: (empty for a job whose roles have a fixed size).
    world_sizes: Tuple[int, ...] = ()
    #: While waiting: its place in its queue's line and when it is expected to start (added by
    #: ``subm status`` alone, never by the AM nor by what polls).
    place: Optional[Place] = None

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "app_id": self.app_id,
            "name": self.name,
            "framework": self.framework,
            "backend": self.backend,
            "state": self.state.value,
            "phase": self.phase.value if self.phase else None,
            "attempts": self.attempts,
            "diagnostics": self.diagnostics,
            "running": self.running,
            "total": self.total,
            "tasks": [t.to_dict() for t in self.tasks],
            "cluster_spec": self.cluster_spec,
            "timings": self.timings.to_dict(),
            "status_url": self.status_url,
            "events": [e.to_dict() for e in self.events],
            "final": self.final,
        }
        # Known where an AM (or YARN) said so; left out otherwise, like the YARN-only keys.
        for key in ("tensorboard_url", "user", "queue", "submitted_at", "started_at", "finished_at", "spec",
                    "hang_seconds", "job_seconds", "waiting_for", "held_containers"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        counts = {k: v for k, v in restart_counts(self.restarts_by_cause).items() if v}
        if counts:
            d["restarts_by_cause"] = counts
        if self.nodes_spanned:
            d["nodes_spanned"] = list(self.nodes_spanned)
        if self.world_sizes:
            d["world_sizes"] = list(self.world_sizes)
        if self.yarn_state is not None or self.tracking_url is not None:
            d.update(yarn_state=self.yarn_state, tracking_url=self.tracking_url)
        if self.sweep is not None:
            d["sweep"] = self.sweep.to_dict()
        if self.place is not None:
            d["place"] = self.place.to_dict()
        return d

    def public(self) -> Dict[str, Any]:
        """The report as ``--output json`` promises it (docs/cli.md, "--output json")."""
        out: Dict[str, Any] = {
            "app_id": self.app_id, "name": self.name, "state": self.state.value, "attempts": self.attempts,
            "diagnostics": self.diagnostics, "tasks": [t.public() for t in self.tasks],
            "timings": self.timings.to_dict(), "backend": self.backend,
        }
        if self.framework is not None:
            out["framework"] = self.framework
        if self.status_url:
            out["status_url"] = self.status_url
        if self.tensorboard_url:
            out["tensorboard_url"] = self.tensorboard_url
        out["restarts_by_cause"] = restart_counts(self.restarts_by_cause)
        if self.waiting_for:
            out["waiting_for"] = self.waiting_for
            if self.held_containers:
                out["held_containers"] = self.held_containers
            if self.place is not None:
                out["place"] = self.place.to_dict()
        if self.nodes_spanned:
            out["nodes_spanned"] = list(self.nodes_spanned)
        if self.sweep is not None:
            out["metric"], out["goal"] = self.sweep.metric, self.sweep.goal
            out["trials"] = [{"number": t.number, "params": dict(t.params), "state": t.state.value, "value": t.value,
                              "container": t.container, "host": t.host, "started_at": t.started_at,
                              "duration_seconds": t.duration_seconds,
                              "diagnostics": t.diagnostics} for t in self.sweep.trials]
            out["best"] = best_of(self.sweep.best) if self.sweep.best else None
        if self.world_sizes:
            out["world_sizes"] = list(self.world_sizes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JobReport":
        return cls(
            app_id=str(data["app_id"]),
            name=data.get("name"),
            state=JobState(data.get("state") or JobState.ACCEPTED),
            backend=data.get("backend") or "",
            framework=data.get("framework"),
            phase=Phase(data["phase"]) if data.get("phase") else None,
            attempts=data.get("attempts", 1),
            diagnostics=data.get("diagnostics") or "",
            running=data.get("running") or 0,
            total=data.get("total") or 0,
            tasks=tuple(TaskReport.from_dict(t) for t in data.get("tasks") or ()),
            cluster_spec=data.get("cluster_spec"),
            timings=Timings.from_dict(data.get("timings")),
            status_url=data.get("status_url") or "",
            tensorboard_url=data.get("tensorboard_url"),
            events=tuple(Event.from_dict(e) for e in data.get("events") or ()),
            final=bool(data.get("final", False)),
            yarn_state=data.get("yarn_state"),
            tracking_url=data.get("tracking_url"),
            user=data.get("user"),
            queue=data.get("queue"),
            submitted_at=data.get("submitted_at"),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            spec=data.get("spec"),
            restarts_by_cause={k: v for k, v in restart_counts(data.get("restarts_by_cause")).items() if v},
            hang_seconds=data.get("hang_seconds"),
            job_seconds=data.get("job_seconds"),
            waiting_for=data.get("waiting_for"),
            held_containers=data.get("held_containers"),
            nodes_spanned=tuple(int(n) for n in data.get("nodes_spanned") or ()),
            sweep=SweepReport.from_dict(data.get("sweep")),
            world_sizes=tuple(int(n) for n in data.get("world_sizes") or ()),
            place=Place.from_dict(data.get("place")),
        )
