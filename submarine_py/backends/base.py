"""The backend interface (the registry of backends is ``registry.py``).

A backend checks a spec against its own rules (:meth:`Backend.check`, pure) and the plan
against its cluster (:meth:`Backend.check_cluster`), then turns the plan into its own
request once (:meth:`Backend.request`):
``subm run --dry-run`` prints that request, ``subm run`` submits that same
object (:meth:`Backend.submit`). Afterwards every answer about a job is a
:class:`JobReport`.

``Backend`` is an abstract base class: what every backend must do is abstract, so a backend
that misses a method cannot even be made (``TypeError`` naming it), long before a job needs it.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Protocol, Set, TextIO, Tuple

from ..errors import WaitTimeout
from ..jobfile.model import JobSpec
from ..plan import Plan
from ..report import JobReport
from ..states import Phase

if TYPE_CHECKING:
    from ..queue_view import QueueView


class Request(Protocol):
    """A backend-native request: everything a submission will do, built before doing it."""

    plan: Plan

    def describe(self) -> str:
        """The request as text (what ``--dry-run`` prints)."""
        ...

    def to_dict(self) -> Dict[str, Any]:
        """The same as data (what ``--dry-run --output json`` prints), secrets left out."""
        ...


#: A problem a backend finds in a spec: (field path, message), as in :class:`SpecError`.
Problem = Tuple[str, str]

#: What a job stopped by `subm kill` says it was stopped by.
KILLED_BY_USER = "killed by `subm kill`"
#: ... and one whose `subm run` was interrupted (Ctrl-C, or SIGTERM to subm).
KILLED_BY_INTERRUPT = "killed: `subm run` was interrupted (Ctrl-C or SIGTERM)"


class Backend(ABC):
    """Submits planned jobs and answers for them afterwards."""

    name = "abstract"
    #: How often :meth:`wait` asks for the job's state.
    poll_seconds = 0.25
    #: How often while the gang starts (the AM's phase STARTING), when a report changes with
    #: every task that registers: no outcome is waited for then, and every ask costs the
    #: cluster what the backend's status costs (on YARN, a request through the RM's web proxy
    #: and skein's, and the AM's whole report).
    starting_poll_seconds = 0.25
    #: How often while the job waits for its gang (queued: its AM says what for), and the most
    #: a following client waits between asks while nothing changes (it reaches that pace after
    #: ``SETTLE_SECONDS`` of the same report): a job followed by many clients, or for days,
    #: costs the cluster a few asks a minute, not two a second (issue 44).
    queued_poll_seconds = 0.25
    steady_poll_seconds = 0.25

    def shared_dir(self, plan: Plan, app_id: str) -> Optional[str]:
        """``SUBM_SHARED_DIR`` of job ``app_id``: a folder every task sees; None where there is none."""
        return None

    def check(self, spec: JobSpec) -> List[Problem]:
        """What this backend can never run, whatever its cluster holds, as ``(field path,
        message)`` pairs (none: it runs the spec). Pure: reads the spec only, never a cluster,
        a driver or a file, so ``subm validate`` asks it offline; ``subm validate`` and ``subm
        run`` report these with the job file's own problems, at once (exit 2)."""
        return []

    def check_cluster(self, plan: Plan) -> None:
        """Ask the target what it offers now, and refuse (``ClusterLimitError``, exit 2) what it
        can never give (more memory, GPUs... than any of its machines has). Default: accept."""

    @abstractmethod
    def request(self, plan: Plan) -> Request:
        """The backend-native request for ``plan``; builds it, submits nothing."""

    @abstractmethod
    def submit(self, request: Request, *, detach: bool = False) -> str:
        """Submit a request made by :meth:`request`, as it is; returns the job's application id."""

    @abstractmethod
    def status(self, app_id: str) -> JobReport:
        """The job's report now (``final`` once it has ended and nothing more will change)."""

    @abstractmethod
    def kill(self, app_id: str, why: str = KILLED_BY_USER) -> JobReport:
        """Stop the job and every task; ``why`` becomes its diagnostics."""

    @abstractmethod
    def list(self, include_finished: bool = False) -> List[JobReport]:
        """This backend's jobs (running ones; finished ones too with ``include_finished``)."""

    @abstractmethod
    def logs(self, app_id: str, out: TextIO, role: Optional[str] = None, index: Optional[int] = None,
             follow: bool = False, attempt: Optional[int] = None, tail: Optional[int] = None) -> None:
        """Write the job's logs to ``out``: its tasks' stdout and stderr (of ``role``, ``index``),
        every attempt they ran (or only ``attempt``, counted from 1), and, when neither role nor
        index is given, the AM's log (of every AM attempt), whole; ``tail``: the last lines of
        each file; ``follow``: on until the job ends (see ``logs.py``)."""

    def finished_reports(self, known: Set[str]) -> Iterator[JobReport]:
        """The final reports of finished jobs whose ids are not in ``known`` (for history)."""
        return iter(())

    def line(self) -> Optional["QueueView"]:
        """The gangs waiting for room in every queue, in admission's order, with their expected
        starts, and the running jobs holding GPUs (``subm queue``, ``subm status`` of a waiting
        job: read once, never by what polls). None: this backend keeps no line shared between
        users (locally a job waits on this machine's GPU ledger alone; ``subm status`` says for what)."""
        return None

    @abstractmethod
    def cluster(self) -> Dict[str, Any]:
        """What the target offers and uses now (``subm cluster``; shapes in ``cluster.py``)."""

    def wait_final(self, app_id: str, seconds: float) -> JobReport:
        """The job's status once final, or the last one seen after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            report = self.status(app_id)
            if report.final or time.monotonic() > deadline:
                return report
            time.sleep(self.poll_seconds)

    def wait(self, app_id: str, on_update: Optional[Callable[[JobReport], None]] = None,
             timeout: Optional[float] = None) -> JobReport:
        """Block until the job ends; ``on_update`` sees each new status. After ``timeout`` seconds
        :class:`WaitTimeout` (with the last status seen); the job goes on."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = seen = None
        since = time.monotonic()
        while True:
            report = self.status(app_id)
            key = _progress_key(report)
            if on_update and key != last:
                on_update(report)
                last = key
            if report.state.is_terminal() and report.final:
                return report
            if key != seen:
                seen, since = key, time.monotonic()
            pause = self.pace(report, time.monotonic() - since)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(f"{app_id} is still {report.state.value} after {timeout:g} s of waiting; "
                                      f"it goes on (subm kill {app_id} stops it)", report)
                pause = min(pause, left)
            time.sleep(pause)

    def pace(self, report: JobReport, unchanged_for: float) -> float:
        """The pause before :meth:`wait` asks again: ``starting_poll_seconds`` while the gang
        starts, ``queued_poll_seconds`` while it waits for room, else ``poll_seconds`` for the
        first ``BRISK_SECONDS`` of a report, slowing to ``steady_poll_seconds`` as it stays the
        same for ``SETTLE_SECONDS``."""
        if report.phase == Phase.STARTING:
            return self.starting_poll_seconds
        if report.waiting_for:
            return self.queued_poll_seconds
        settled = min(1.0, max(0.0, unchanged_for - BRISK_SECONDS) / (SETTLE_SECONDS - BRISK_SECONDS))
        return self.poll_seconds + settled * max(0.0, self.steady_poll_seconds - self.poll_seconds)


#: How long a report stays the same before :meth:`Backend.wait` slows down, and before it asks
#: at its steadiest pace.
BRISK_SECONDS, SETTLE_SECONDS = 10.0, 60.0


def _progress_key(report: JobReport) -> Any:
    return (report.state, report.phase, report.attempts, report.running, len(report.events),
            tuple((t.role, t.index, t.state) for t in report.tasks))
