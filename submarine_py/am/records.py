"""The ApplicationMaster's live records: one per task, one per executor (container).

Attempts inside the AM count from 0 (``SUBM_ATTEMPT``); reports and decisions show them from 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..plan import TaskPlan
from ..states import Cause, TaskState
from ..units import split_address
from .gpu_usage import GpuUsage


def shown(attempt: int) -> int:
    """An attempt as people see it: counted from 1. ``SUBM_ATTEMPT`` (and the AM inside)
    count restarts from 0, so attempt N runs with SUBM_ATTEMPT=N-1."""
    return attempt + 1


@dataclass
class Task:
    """The AM's live record of one task (what :class:`TaskReport` shows of it)."""

    plan: TaskPlan
    state: TaskState = TaskState.PENDING
    attempt: int = 0
    restarts: int = 0
    exit_code: Optional[int] = None
    executor: Optional[str] = None
    address: Optional[str] = None
    log: str = ""
    gpu: GpuUsage = field(default_factory=GpuUsage)
    gpu_idle_flagged: bool = False
    #: Launches in a row that ended before an executor registered (reset by a registration).
    failed_launches: int = 0
    #: When its current attempt began (epoch seconds): a container started before that was
    #: started for an attempt an earlier failure already ended.
    began: float = 0.0
    #: Why its last attempt ended, when it did not succeed (its state FAILED); None otherwise.
    cause: Optional[Cause] = None
    #: Its restarts (of the gang or of itself) by what caused them; ``restarts`` counts them all.
    restarts_by_cause: Dict[Cause, int] = field(default_factory=dict)
    #: Hang detection: the attempt the AM told its executor to stop as hung (once per attempt),
    #: the attempt it warned of a long silence for, and when (monotonic) its GPUs were last busy.
    hang_stopped: Optional[int] = None
    quiet_warned: Optional[int] = None
    gpu_busy_at: Optional[float] = None
    #: When (monotonic) it last registered: how long a spare of an elastic role has waited.
    registered_at: float = 0.0

    @property
    def cluster_restarts(self) -> int:
        """Of its restarts, those for the cluster's faults (they spend no ``max_restarts``)."""
        return sum(n for cause, n in self.restarts_by_cause.items() if cause.is_cluster)

    def quiet_for(self, ex: Optional["Executor"], now: float) -> Optional[float]:
        """How long its running attempt had shown no sign of work at its executor's last heartbeat
        (at most a couple of seconds ago): printed nothing, nor (where its GPUs are sampled) used
        a GPU by ``now`` (monotonic). Not carried forward from that heartbeat: the task may have
        printed since, and a hang must not be declared on a guess. None while it does not run,
        or before a heartbeat of this attempt said."""
        quiet = ex.quiet if ex is not None else None
        if self.state != TaskState.RUNNING or quiet is None or quiet.attempt != self.attempt:
            return None
        seconds = quiet.seconds
        if self.gpu_busy_at is not None:
            seconds = min(seconds, max(0.0, now - self.gpu_busy_at))
        return seconds

    @property
    def key(self) -> Tuple[str, int]:
        return (self.plan.role, self.plan.index)

    @property
    def host(self) -> Optional[str]:
        return split_address(self.address)[0] if self.address else None


@dataclass
class Executor:
    """The AM's record of one executor process (container), registered or not."""

    id: str
    role: str
    task: Optional[Tuple[str, int]] = None
    alive: bool = True
    instructions: List[Dict[str, Any]] = field(default_factory=list)
    info: Dict[str, Any] = field(default_factory=dict)
    #: The task attempt this executor last registered for.
    attempt: Optional[int] = None
    registered: bool = False
    #: Declared lost after a silence (its container was released; it may not come back).
    lost: bool = False
    #: When the AM last heard from it (time.monotonic()): every call counts as a heartbeat.
    last_seen: float = field(default_factory=time.monotonic)
    #: When the AM asked for its container (epoch seconds); None for containers of the job.
    launched_at: Optional[float] = None
    #: What its last heartbeat said of its task's output: silent for so many seconds.
    quiet: Optional["Quiet"] = None


@dataclass(frozen=True)
class Quiet:
    """A heartbeat's word on a running task's output: it had printed nothing (stdout, stderr) for
    ``seconds`` in ``attempt``."""

    seconds: float
    attempt: int

