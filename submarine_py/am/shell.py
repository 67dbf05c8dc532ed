"""The ApplicationMaster's shell, whatever the job: one frame, two strategies.

The shell holds what every AM does: the job's token and user, its address, the kill requests
(a signal's, an executor's ``/v1/kill``), the report file and its snapshots, the job's deadline,
the stop patience after the verdict, the main loop and its teardown, the executors'
environment and heartbeat, and the forgiveness of the AM's own stalls (a pause of its process is
not its executors' silence). A strategy fills in the rest: the gang job (``master.py``,
:class:`~.master.ApplicationMaster`: a gang started, supervised and restarted) or the sweep
(``sweep/master.py``, :class:`~.sweep.master.SweepMaster`: groups of containers reused trial
after trial). ``process.make_am`` picks one for a plan; :class:`AM` says what the HTTP server
(``server.py``) and the process runner (``process.py``) call on either.

Threads: HTTP handlers change the strategy's state under its lock; the main thread runs
:meth:`Shell.run`, which alone calls the containers.
"""
from __future__ import annotations

import abc
import getpass
import logging
import os
import secrets
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Protocol, Tuple

from ..executor import protocol
from ..plan import Plan, TaskPlan
from ..report import JobReport
from ..states import JobState, Phase
from .containers import Containers
from .reporting import SNAPSHOT_SECONDS, write_report
from .supervision import HEARTBEAT_SECONDS, STOP_MARGIN_SECONDS

log = logging.getLogger("subm.am")

#: A gap between two rounds of the main loop longer than this is the AM's own stall.
STALL_SECONDS = 1.0


class AM(Protocol):
    """What ``server.py`` (the executors' calls, the status page) and ``process.py`` (serve,
    signals, run) call on an ApplicationMaster, whichever strategy it runs."""

    job_id: str
    token: str
    url: str
    containers: Containers
    kill_requested: Optional[str]
    signalled: Optional[str]

    def report(self) -> JobReport: ...
    def run(self) -> JobReport: ...
    def kill(self, why: str = ...) -> None: ...
    def take_over(self, previous: Optional[JobReport], lost_attempts: int) -> None: ...
    def on_register(self, body: Dict[str, Any]) -> Dict[str, Any]: ...
    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]: ...
    def heard_from(self, executor: str, quiet: Optional[float] = ..., attempt: Optional[int] = ...) -> None: ...
    def on_started(self, body: Dict[str, Any]) -> None: ...
    def on_exit(self, body: Dict[str, Any]) -> None: ...
    def on_metric(self, body: Dict[str, Any]) -> None: ...
    def on_gpu(self, body: Dict[str, Any]) -> None: ...
    def on_goodbye(self, body: Dict[str, Any]) -> None: ...
    def connection_dropped(self, executor: str) -> None: ...


def heartbeat_seconds(lost_after_seconds: float) -> float:
    """How often executors call: every third of ``timeouts.lost_after_seconds`` (at most
    HEARTBEAT_SECONDS), so that a silence that long is three missed calls."""
    return min(HEARTBEAT_SECONDS, lost_after_seconds / 3)


class Shell(abc.ABC):
    """The frame every AM runs in; a strategy (a subclass) gives the hooks below (a strategy
    missing one cannot be made)."""

    #: What the strategy runs, in the job deadline's diagnostics ("job", "sweep").
    what = "job"
    #: The strategy's lock (its state's) and the condition its long polls wait on.
    lock: Any
    changed: threading.Condition

    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 token: Optional[str] = None, report_path: Optional[str] = None,
                 snapshots: bool = False):
        self.plan = plan
        self.job_id = job_id
        self.containers = containers
        self.token = token or secrets.token_hex(16)
        self.report_path = report_path
        #: Rewrite the report file while running (YARN: the cluster may end the AM before it
        #: writes a final one). Off where the file's presence means "finished" (local).
        self.snapshots = snapshots
        self.url = ""
        #: Set from a signal handler; the main loop acts on it (handlers must not take locks).
        self.kill_requested: Optional[str] = None
        #: The signal that ended the job, if any: YARN may then record FAILED whatever this AM
        #: asks for (the SIGTERM reaches skein's AM too), so the last log line claims no verdict.
        self.signalled: Optional[str] = None
        try:
            self.user: Optional[str] = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        except (KeyError, OSError):  # a uid without a passwd entry (some containers)
            self.user = None
        self.timeouts = plan.job.timeouts
        self.heartbeat = heartbeat_seconds(self.timeouts.lost_after_seconds)
        #: Executors whose connection dropped under a poll (``server.py``), for the main loop.
        self.dropped: set = set()

    def executor_env(self, task: TaskPlan) -> Dict[str, str]:
        """What the containers must put in the environment of an executor the AM starts."""
        return {protocol.AM_URL: self.url, protocol.TOKEN: self.token, protocol.JOB_ID: self.job_id,
                protocol.INDEX: str(task.index), **self.plan.executor_settings(task.role)}

    # -- the strategy's hooks ------------------------------------------------------------------
    def begin(self) -> None:
        """Before the first round (its first log line)."""

    @abc.abstractmethod
    def round(self) -> None:
        """One round of the main loop: what to start and give back, what ended, what fell
        silent, the strategy's own checks."""

    @abc.abstractmethod
    def kill(self, why: str = "killed by request") -> None:
        """The verdict KILLED, for ``why`` (a signal, ``/v1/kill``)."""

    @abc.abstractmethod
    def report(self) -> JobReport:
        """The job's report now (what ``/v1/status`` and the report file show)."""

    @property
    @abc.abstractmethod
    def finishing(self) -> bool:
        """True once the verdict is in (under the lock)."""

    @abc.abstractmethod
    def finish(self, state: JobState, diagnostics: str) -> None:
        """The verdict (under the lock)."""

    @abc.abstractmethod
    def verdict(self) -> Tuple[JobState, str]:
        """The job's state and diagnostics (under the lock)."""

    @abc.abstractmethod
    def set_phase(self, phase: Phase) -> None:
        """Move the job to ``phase`` (under the lock)."""

    @abc.abstractmethod
    def live(self) -> List[Tuple[str, bool]]:
        """The executors still up: (id, registered), under the lock."""

    @abc.abstractmethod
    def watched(self) -> Iterable[Any]:
        """The records whose ``last_seen`` tells an executor's silence (under the lock)."""

    def stopped_unheard(self, ex_id: str) -> None:
        """An executor that never registered was stopped after the verdict (under the lock)."""

    def summary(self, report: JobReport) -> str:
        """The last log line of a job that was not signalled."""
        return f"{self.what} {self.job_id} {report.state} in {report.timings.total_seconds:.1f} s"

    # -- the main loop -------------------------------------------------------------------------
    def run(self) -> JobReport:
        """Drive the job to its end; returns the final report."""
        self.begin()
        self._loop()
        with self.lock:
            alive = [ex_id for ex_id, _ in self.live()]
        for ex_id in alive:
            self.containers.kill(ex_id)
        self.containers.close()
        with self.lock:
            self.set_phase(Phase.DONE)
            report = self.report()
            state, diagnostics = self.verdict()
            self.changed.notify_all()
        self.write_report(report)
        self.containers.finish(state, diagnostics)
        if self.signalled:
            log.info("%s %s stopped after %d attempt(s) in %.1f s: the ApplicationMaster received %s; "
                     "the cluster records the final state", self.what, self.job_id, report.attempts,
                     report.timings.total_seconds, self.signalled)
        else:
            log.info("%s", self.summary(report))
        return report

    def _loop(self) -> None:
        """Rounds until every executor has left after the verdict (or the stop patience ran out)."""
        timeouts = self.timeouts
        deadline = time.monotonic() + timeouts.job_seconds if timeouts.job_seconds else None
        patience = timeouts.stop_grace_seconds + STOP_MARGIN_SECONDS
        next_snapshot, since, told = 0.0, None, set()
        last_round = time.monotonic()
        while True:
            self.forgive_stall(time.monotonic() - last_round)
            last_round = time.monotonic()
            if self.kill_requested:
                self.kill(self.kill_requested)
                self.kill_requested = None
                # YARN kills the AM's container 250 ms after this SIGTERM: say what became of
                # each task now, before stopping them.
                self.save_state()
            if self.snapshots and time.monotonic() >= next_snapshot:
                self.write_report()
                next_snapshot = time.monotonic() + SNAPSHOT_SECONDS
            self.look_at_dropped()
            self.round()
            with self.lock:
                if deadline and time.monotonic() > deadline and not self.finishing:
                    self.finish(JobState.FAILED, f"the {self.what} ran longer than timeouts.job_seconds "
                                                 f"({timeouts.job_seconds} s)")
                # After the verdict, executors get the stop grace (and a margin) to leave; one
                # that never registered polls no instructions, so it cannot hear "exit" (e.g.
                # after a gang timeout): its container is stopped at once.
                unheard: List[str] = []
                if self.finishing:
                    since = since or time.monotonic()
                    alive = self.live()
                    if not alive or time.monotonic() - since > patience:
                        return
                    unheard = [ex_id for ex_id, registered in alive if not registered and ex_id not in told]
            for ex_id in unheard:
                told.add(ex_id)
                self.containers.kill(ex_id)
                with self.lock:
                    self.stopped_unheard(ex_id)
            time.sleep(0.05)

    def connection_dropped(self, executor: str) -> None:
        """An executor's connection closed under its poll (an HTTP thread says): its process
        may have died; the next round looks at its container."""
        with self.lock:
            self.dropped.add(executor)

    def look_at_dropped(self) -> None:
        """Have the containers look at once at those of registered executors whose connection
        dropped (:meth:`Containers.suspect`): a dead one is replaced without waiting for the
        cluster's word."""
        with self.lock:
            dropped, self.dropped = self.dropped, set()
            # After the verdict every executor leaves, closing its connection: nothing to look at.
            live = {ex_id for ex_id, registered in self.live() if registered} if dropped and not self.finishing else set()
        for ex_id in sorted(dropped & live):
            self.containers.suspect(ex_id)

    def forgive_stall(self, gap: float) -> None:
        """The AM itself was not running (suspended, starved of CPU, a long GC) for ``gap``
        seconds since its last round: the silences it would see are its own, not its executors'."""
        if gap > STALL_SECONDS:
            with self.lock:
                for rec in self.watched():
                    rec.last_seen += gap

    # -- the report file -----------------------------------------------------------------------
    def write_report(self, report: Optional[JobReport] = None) -> None:
        """Write the report file, if the AM has one (see :mod:`.reporting`)."""
        if self.report_path:
            write_report(self.report_path, report or self.report(), self.plan)

    def save_state(self) -> None:
        """Write the report file now where it is rewritten while running (YARN), so that an AM
        of a later YARN attempt goes on from here."""
        if self.snapshots:
            self.write_report()
