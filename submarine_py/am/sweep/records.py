"""A sweep's AM's live records (``sweep/master.py``): its containers (:class:`Slot`) and the
groups of them that run one trial at a time (:class:`Group`)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ...plan import TaskPlan

TaskKey = Tuple[str, int]


@dataclass
class Slot:
    """A trial container: its executor, the task of the job it runs in each trial (``key``: its
    role and index in the plan), and whether that task runs now."""

    id: str
    plan: TaskPlan
    group: int
    key: TaskKey
    alive: bool = True
    registered: bool = False
    released: bool = False
    address: Optional[str] = None
    host: Optional[str] = None
    #: The trial its task runs now (None: none, or it has ended).
    trial: Optional[int] = None
    trials_run: int = 0
    instructions: List[Dict[str, Any]] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)
    log: str = ""
    #: The cluster's name of its container (YARN's container id), as its executor registered it.
    container: Optional[str] = None


@dataclass
class Group:
    """The containers that run one trial at a time: one per task of the job (one, commonly; a
    gang for a job of several tasks), reused trial after trial."""

    number: int
    #: The job's task -> the executor (container) that runs it.
    members: Dict[TaskKey, str]
    trial: Optional[int] = None
    #: The trial it was told to stop early (its end is then PRUNED).
    pruning: Optional[int] = None
    #: The current trial's first failure, in words ("" while none).
    failing: str = ""
    released: bool = False
