"""A sweep's AM's live records (``sweep/master.py``): its containers (:class:`Slot`), the
groups of them that run one trial at a time (:class:`Group`), and what the sweep's helpers
(``pool.py``, ``trials.py``, ``reporting.py``) read and change of the AM (:class:`SweepAM`),
so that they need not import the AM that calls them."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Tuple

from ...jobfile.model import SweepSpec, Timeouts
from ...plan import Plan, TaskPlan
from ...report import Event
from ...states import JobState, Phase
from ..allocation import Gate
from ..containers import Containers
from .search import Search

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


class SweepAM(Protocol):
    """The sweep's AM as its helpers see it (``sweep/master.py``'s ``SweepMaster`` is one): its
    state, theirs to change under ``lock``, and the few calls they make back."""

    plan: Plan
    job_id: str
    spec: SweepSpec
    task: TaskPlan
    timeouts: Timeouts
    containers: Containers
    url: str
    user: Optional[str]
    shared_dir: Optional[str]
    lock: threading.RLock
    changed: threading.Condition
    slots: Dict[str, Slot]
    groups: Dict[int, Group]
    launched: int
    events: List[Event]
    state: JobState
    phase: Phase
    diagnostics: str
    submitted_at: float
    started_at: float
    finished_at: Optional[float]
    gate: Gate
    asking: Optional[int]
    failed_launches: int
    to_release: List[str]
    search: Optional[Search]

    @property
    def finishing(self) -> bool: ...
    def finish(self, state: JobState, diagnostics: str) -> None: ...
    def decide(self, msg: str, *args: Any, level: int = ...) -> None: ...
    def send(self, rec: Any, op: str, **kw: Any) -> None: ...
    def save_study(self) -> None: ...
    def executor_env(self, task: TaskPlan) -> Dict[str, str]: ...
