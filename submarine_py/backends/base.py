"""The backend interface and registry.

A backend turns a plan into its own request once (:meth:`Backend.request`):
``subm run --dry-run`` prints that request, ``subm run`` submits that same
object (:meth:`Backend.submit`). Afterwards every answer about a job is a
:class:`JobReport`.
"""
from __future__ import annotations

import importlib
import os
import re
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Set, TextIO

from ..errors import SpecError
from ..plan import Plan
from ..report import JobReport
from ..states import Phase

_REGISTRY = {
    "local": "submarine_py.backends.local:LocalBackend",
    "yarn": "submarine_py.backends.yarn:YarnBackend",
}


class Request(Protocol):
    """A backend-native request: everything a submission will do, built before doing it."""

    plan: Plan

    def describe(self) -> str:
        """The request as text (what ``--dry-run`` prints)."""
        ...


#: What a job stopped by `subm kill` says it was stopped by.
KILLED_BY_USER = "killed by `subm kill`"
#: ... and one whose `subm run` was interrupted (Ctrl-C, or SIGTERM to subm).
KILLED_BY_INTERRUPT = "killed: `subm run` was interrupted (Ctrl-C or SIGTERM)"


class Backend:
    """Submits planned jobs and answers for them afterwards."""

    name = "abstract"
    #: How often :meth:`wait` asks for the job's state.
    poll_seconds = 0.25
    #: How often while the gang starts (the AM's phase STARTING), when a report changes with
    #: every task that registers: no outcome is waited for then, and every ask costs the
    #: cluster what the backend's status costs (on YARN, a request through the RM's web proxy
    #: and skein's, and the AM's whole report).
    starting_poll_seconds = 0.25
    #: Whether every task runs on one host (so local ranks are known before placement).
    one_host = False

    def shared_dir(self, plan: Plan, app_id: str) -> Optional[str]:
        """``SUBM_SHARED_DIR`` of job ``app_id``: a folder every task sees; None where there is none."""
        return None

    def check(self, plan: Plan) -> None:
        """Refuse (``SpecError``) what the target can never run. Default: accept."""

    def request(self, plan: Plan) -> Request:
        """The backend-native request for ``plan``; builds it, submits nothing."""
        raise NotImplementedError

    def submit(self, request: Request, *, detach: bool = False) -> str:
        """Submit a request made by :meth:`request`; returns the job's application id."""
        raise NotImplementedError

    def status(self, app_id: str) -> JobReport:
        raise NotImplementedError

    def kill(self, app_id: str, why: str = KILLED_BY_USER) -> JobReport:
        """Stop the job and every task; ``why`` becomes its diagnostics."""
        raise NotImplementedError

    def list(self, include_finished: bool = False) -> List[JobReport]:
        raise NotImplementedError

    def logs(self, app_id: str, out: TextIO, role: Optional[str] = None, index: Optional[int] = None,
             follow: bool = False) -> None:
        raise NotImplementedError

    def finished_reports(self, known: Set[str]) -> Iterator[JobReport]:
        """The final reports of finished jobs whose ids are not in ``known`` (for history)."""
        return iter(())

    def cluster(self) -> Dict[str, Any]:
        """What the target offers and uses now (``subm cluster``; shapes in ``cluster.py``)."""
        raise NotImplementedError

    def wait_final(self, app_id: str, seconds: float) -> JobReport:
        """The job's status once final, or the last one seen after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            report = self.status(app_id)
            if report.final or time.monotonic() > deadline:
                return report
            time.sleep(self.poll_seconds)

    def wait(self, app_id: str, on_update: Optional[Callable[[JobReport], None]] = None) -> JobReport:
        """Block until the job ends; ``on_update`` sees each new status."""
        last = None
        while True:
            report = self.status(app_id)
            key = _progress_key(report)
            if on_update and key != last:
                on_update(report)
                last = key
            if report.state.is_terminal() and report.final:
                return report
            time.sleep(self.starting_poll_seconds if report.phase == Phase.STARTING else self.poll_seconds)


def _progress_key(report: JobReport) -> Any:
    return (report.state, report.phase, report.attempts, report.running, len(report.events),
            tuple((t.role, t.index, t.state) for t in report.tasks))


def get_backend(name: str, **options: Any) -> Backend:
    try:
        module, _, cls = _REGISTRY[name].partition(":")
    except KeyError:
        raise SpecError([("--backend", f"expected one of {', '.join(_REGISTRY)}, got {name!r}")]) from None
    return getattr(importlib.import_module(module), cls)(**options)


def choose_backend(name: Optional[str]) -> str:
    """The backend to use: the one named, else YARN where HADOOP_CONF_DIR is set, else local."""
    if name:
        return name
    return "yarn" if os.environ.get("HADOOP_CONF_DIR") else "local"


#: YARN's ApplicationId, and the local backend's ids (one safe path component).
_APP_IDS = (("yarn", re.compile(r"^application_[0-9]{1,19}_[0-9]{1,10}$")),
            ("local", re.compile(r"^local_[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")))


def backend_for_app(app_id: str) -> str:
    """The backend an application id belongs to; a malformed id is bad input (exit 2),
    before any backend is asked (YARN's RM would answer 400, the local one read a path)."""
    for name, form in _APP_IDS:
        if form.match(app_id) and ".." not in app_id:
            return name
    raise SpecError([("APP_ID", f"{app_id!r} is not a job id: YARN ids look like application_1700000000000_0001, "
                                "local ones like local_20260101-120000_ab12")])
