"""The ApplicationMaster's live records: one per task, one per executor (container).

Attempts inside the AM count from 0 (``SUBM_ATTEMPT``); reports and decisions show them from 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..plan import TaskPlan
from ..states import TaskState
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
    #: Its executor was declared lost: the cluster will not replace it, the AM launches one.
    orphaned: bool = False

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

