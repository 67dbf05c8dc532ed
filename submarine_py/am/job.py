"""What the ApplicationMaster knows of its job while it runs: the live state its parts share.

The AM is split by responsibility (``gang.py``: registration and the gang; ``supervision.py``:
running tasks and their ends; ``recovery.py``: failures and restarts; ``reporting.py``: the
report). Each takes this :class:`JobRun` as its explicit input and changes it under its lock;
the transitions every part needs (a decision logged, an instruction sent, the verdict) are
methods here, so there is one way to make each.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from ..plan import Plan
from ..report import Event
from ..states import Cause, JobState, Phase, TaskState
from .records import Executor, Task

log = logging.getLogger("subm.am")

#: Decisions kept in the report (the AM's log has all of them).
MAX_EVENTS = 200

TaskKey = Tuple[str, int]


class Voice:
    """How an AM's strategy speaks: its decisions (logged, and kept for the report's ``events``)
    and the instructions it queues for an executor's long poll. Wants ``events``, ``seq`` and
    ``changed`` (a condition of the strategy's lock); the gang job's :class:`JobRun` and the
    sweep's master speak through it."""

    events: List[Event]
    seq: int
    changed: threading.Condition

    def decide(self, msg: str, *args: Any, level: int = logging.INFO) -> None:
        """Log a decision of the AM and keep it for the report's ``events`` (what CI sees)."""
        log.log(level, msg, *args)
        self.events.append(Event(time=round(time.time(), 3), message=msg % args if args else msg))
        del self.events[:-MAX_EVENTS]

    def send(self, rec: Any, op: str, **kw: Any) -> None:
        """Queue an instruction for an executor (``rec``: its record; its long poll returns it)."""
        self.seq += 1
        rec.instructions.append({"seq": self.seq, "op": op, **kw})
        self.changed.notify_all()


class JobRun(Voice):
    """The job's tasks and executors, its phase and verdict, and the AM's decisions so far."""

    def __init__(self, plan: Plan, job_id: str, *, submitted_at: Optional[float] = None):
        self.plan = plan
        self.job_id = job_id
        self.submitted_at = submitted_at or time.time()
        self.started_at = time.time()
        self.finished_at: Optional[float] = None
        self.lock = threading.RLock()
        #: Notified when instructions are queued or executors leave (long polls wait on it).
        self.changed = threading.Condition(self.lock)
        self.tasks: Dict[TaskKey, Task] = {(t.role, t.index): Task(t) for t in plan.tasks}
        self.executors: Dict[str, Executor] = {}
        self.seq = 0
        self.attempt = 0  # the gang's attempt (gang policy); tasks keep their own too
        self.gang_restarts = 0
        #: Of the gang's restarts, those for the cluster's faults (they spend no max_restarts).
        self.gang_cluster_restarts = 0
        #: Every restart so far, of the gang or of one task, by what caused it (the report's counts).
        self.restarts_by_cause: Dict[Cause, int] = {}
        self.phase = Phase.STARTING
        self.state = JobState.RUNNING
        self.diagnostics = ""
        #: When the gang's clock started (monotonic): :meth:`start_gang_clock`.
        self.gang_started = 0.0
        self.start_gang_clock()
        self.gang_ready_seconds: Optional[float] = None
        self.cluster: Optional[Dict[str, List[str]]] = None
        #: Tasks whose executor the AM must start (the main loop does, as allocation says).
        self.to_launch: List[TaskKey] = list(self.tasks)
        self.events: List[Event] = []
        #: Nodes each attempt of the gang spanned (hosts of its tasks when it was ready).
        self.spans: List[int] = []
        #: The tasks that run together in this attempt (its world): every task, unless a role is
        #: elastic (``elastic.py`` decides which); and the number of them in each attempt so far.
        self.world: Tuple[TaskKey, ...] = tuple(self.tasks)
        self.world_sizes: List[int] = []
        #: When (monotonic) the world last changed (the gang started), and since when the tasks
        #: registered for the attempt being started have had their ``min`` (elastic roles).
        self.world_since = time.monotonic()
        self.min_up_since: Optional[float] = None

    def start_gang_clock(self, now: Optional[float] = None) -> None:
        """``timeouts.gang_seconds`` (the gang's time to register) counts from now: the gang was
        admitted (its containers asked for), its containers were granted, or it restarted. The
        one place the gang's clock is set; its readers are registration's (the gang timeout,
        "gang ready ... after the restart")."""
        self.gang_started = time.monotonic() if now is None else now

    # -- who runs what ---------------------------------------------------------------------
    def live_executor(self, ts: Task) -> Optional[Executor]:
        ex = self.executors.get(ts.executor) if ts.executor else None
        return ex if ex and ex.alive else None

    def need_executor(self, ts: Task) -> None:
        """Have a new executor started for a task whose executor is gone."""
        if ts.key not in self.to_launch:
            self.to_launch.append(ts.key)

    def all_tracked_succeeded(self) -> bool:
        """Every tracked task of the world succeeded (an elastic role's tasks outside it never ran)."""
        return all(t.state == TaskState.SUCCEEDED for k, t in self.tasks.items() if t.plan.tracked and k in self.world)

    # -- the job's TensorBoard ---------------------------------------------------------------
    def is_tensorboard(self, ts: Task) -> bool:
        """Whether ``ts`` runs the job's TensorBoard (the ``tensorboard`` field)."""
        return ts.plan is self.plan.tensorboard_task

    @property
    def tensorboard_url(self) -> Optional[str]:
        """Where the job's TensorBoard serves, while its task runs: the address its executor
        registered, the port TensorBoard binds (see plan.TENSORBOARD_COMMAND)."""
        tb = self.plan.tensorboard_task
        ts = self.tasks.get((tb.role, tb.index)) if tb else None
        if ts is None or ts.state != TaskState.RUNNING or not ts.address:
            return None
        return f"http://{ts.address}/"

    # -- the verdict -----------------------------------------------------------------------
    @property
    def finishing(self) -> bool:
        """True once the verdict is in (the job is finishing or done)."""
        return self.phase in (Phase.FINISHING, Phase.DONE)

    def finish(self, state: JobState, diagnostics: str, announce: bool = True) -> None:
        """The verdict: every task still up is stopped, every executor told to leave."""
        if self.finishing:
            return
        self.state, self.diagnostics = state, diagnostics
        self.phase = Phase.FINISHING
        self.finished_at = time.time()
        for ts in self.tasks.values():
            if ts.state in (TaskState.RUNNING, TaskState.REGISTERED, TaskState.PENDING):
                ts.state = TaskState.STOPPED if state != JobState.KILLED else TaskState.KILLED
        for ex in self.executors.values():
            if ex.alive:
                self.send(ex, "exit", code=0)
        self.to_launch.clear()
        if announce:
            self.decide("job %s%s", state, f": {diagnostics}" if diagnostics else "")

    @property
    def attempts(self) -> int:
        """Attempts the job has had: of the gang, or of its most restarted task."""
        return 1 + max(self.gang_restarts, max((t.restarts for t in self.tasks.values()), default=0))
