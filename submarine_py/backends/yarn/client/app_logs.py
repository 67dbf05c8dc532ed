"""A YARN application's logs, read from its NodeManagers' REST API (``subm logs``).

* The AM's log: ``application.driver.log`` in the AM container of **every** AM attempt (the
  RM's ``/appattempts`` lists them, each with its container and node), oldest first.
* Each task's ``stdout`` and ``stderr``: in its container now (the AM's report names it), and
  in the containers of earlier AM attempts, named in the report file each AM attempt left in
  its own log directory (``subm-report.json``). Those containers are gone with their attempt;
  their logs stay on the NodeManager until log aggregation (or retention) takes them.

A task's container holds every attempt it ran there (the executor outlives gang restarts),
each begun by its header line: ``--attempt`` and ``--tail`` select as ``backends/logs.py`` says.
"""
from __future__ import annotations

import json
import time
from typing import Dict, List, Optional, Protocol, TextIO, Tuple

from ....errors import BackendError, JobNotFoundError
from ....report import JobReport
from ...logs import LogFile, LogOutput, missing_attempt, read_tail
from ..protocol import REPORT_FILE
from ..hadoop.nodemanager import LogRefused, node_log, node_log_sizes, stream_node_log


class _Reports(Protocol):
    """What the logs need of the YARN backend: a job's report (``YarnBackend.status``)."""

    def status(self, app_id: str) -> JobReport: ...


TASK_LOG_FILES = ("stdout", "stderr")
#: The master script's stdout and stderr in skein's AM container: the Python AM's log.
AM_LOG_FILE = "application.driver.log"
#: Seconds between two looks while following.
FOLLOW_SECONDS = 1.0

#: A place a log file lives: (NodeManager HTTP address, container id).
Place = Tuple[str, str]


def write_app_logs(backend: _Reports, app_id: str, out: TextIO, role: Optional[str] = None,
                   index: Optional[int] = None, follow: bool = False, attempt: Optional[int] = None,
                   tail: Optional[int] = None) -> None:
    """``subm logs APP``: the AM's log of every AM attempt first (when no role or index is
    given), then each selected task's logs from every container it ran in, oldest first."""
    copier = _LogCopier(out, attempt=attempt, tail=tail)
    with_am = role is None and index is None
    earlier: Dict[str, List[Tuple[str, Place]]] = {}  # AM attempt id -> its tasks' (task id, place)
    while True:
        report = backend.status(app_id)
        last = not follow or report.final  # asked before reading: then this read gets everything
        am_attempts = _am_attempts(backend, app_id)
        if with_am:  # like the local backend: the AM's decisions first
            for number, place in am_attempts:
                copier.copy(place, (AM_LOG_FILE,), f"ApplicationMaster attempt {number} ({place[1]})", whole=True)
        tasks = [t for t in report.tasks if (role is None or t.role == role) and (index is None or t.index == index)]
        if not report.tasks and report.final and am_attempts and not with_am:
            _served(am_attempts[-1][1], REPORT_FILE)  # no tasks known: the NM may refuse its files
        # Once the AM answers, it knows every task: an unknown role/index will never appear.
        if not tasks and (report.tasks or report.final) and not with_am:
            known = sorted({t.role for t in report.tasks})
            raise JobNotFoundError(f"no task {role or ''}{'' if index is None else ':' + str(index)} in "
                                   f"{app_id}; roles: {', '.join(known) or 'none'}")
        for number, place in am_attempts[:-1]:  # ended: what they saved last stays as it is
            if number not in earlier:
                earlier[number] = _saved_containers(place)
        for t in tasks:
            places = [p for saved in earlier.values() for tid, p in saved if tid == t.id]
            if t.node_http and t.container_id:
                places.append((t.node_http, t.container_id))
            for place in dict.fromkeys(places):  # oldest first, each container once
                copier.copy(place, TASK_LOG_FILES, f"{t.id} {{name}} ({place[1]})")
        if copier.refused:  # what could be read is out; one line on what could not
            copier.close()
            more = len(copier.refused) - 1
            raise BackendError(f"{copier.refused[0]}" + (f" (and {more} more log file{'s' if more > 1 else ''})"
                                                          if more else ""))
        if last:
            copier.close()
            if tasks:
                missing_attempt(copier.task_views(), attempt, app_id)
            return
        time.sleep(FOLLOW_SECONDS)


def _am_attempts(backend: _Reports, app_id: str) -> List[Tuple[str, Place]]:
    """The application's AM attempts that got a container, oldest first: (attempt id, place)."""
    try:
        attempts = backend.rm.app_attempts(app_id)
    except (BackendError, JobNotFoundError):
        return []
    out = [(str(a.get("id")), (a["nodeHttpAddress"], a["containerId"]))
           for a in attempts if a.get("nodeHttpAddress") and a.get("containerId")]
    return sorted(out, key=lambda a: int(a[0]) if a[0].isdigit() else 0)


def _served(place: Place, name: str) -> None:
    """Raise :class:`LogRefused` where the NodeManager answers an error for the file (a finished
    job's report then comes from YARN alone, without its tasks)."""
    stream_node_log(*place, name, 0, lambda piece: None, timeout=10.0)


def _saved_containers(am_place: Place) -> List[Tuple[str, Place]]:
    """The tasks' containers an AM attempt last saved in its report file: (task id, place)."""
    data = node_log(*am_place, REPORT_FILE)
    try:
        saved = JobReport.from_dict(json.loads(data)) if data else None
    except (KeyError, TypeError, ValueError):
        saved = None
    return [(t.id, (t.node_http, t.container_id)) for t in (saved.tasks if saved else ())
            if t.node_http and t.container_id]


class _LogCopier:
    """Copies what container log files gained since the last call, streamed from their
    NodeManager from the offset reached, each through its :class:`LogFile`."""

    def __init__(self, out: TextIO, attempt: Optional[int] = None, tail: Optional[int] = None):
        self.output = LogOutput(out)
        self.attempt, self.tail = attempt, tail
        self.views: Dict[str, LogFile] = {}
        #: Why a NodeManager would not serve a log file, one per file (see ``nodemanager.LogRefused``).
        self.refused: List[str] = []

    def copy(self, place: Place, names: Tuple[str, ...], title: str, whole: bool = False) -> None:
        """``whole``: a log not split by attempts (the AM's)."""
        node, cid = place
        sizes = node_log_sizes(node, cid)
        if not sizes:
            return
        for name in names:
            key = f"{cid}/{name}"
            view = self.views.get(key)
            if view is None:
                view = self.views[key] = LogFile(self.output, title.format(name=name),
                                                 attempt=None if whole else self.attempt, tail=self.tail)
            size = sizes.get(name)
            try:
                if size is not None and size > view.offset:
                    self._feed(view, node, cid, name, size)
            except LogRefused as exc:
                self.refused.append(str(exc))
            view.read_done()

    def _feed(self, view: LogFile, node: str, cid: str, name: str, size: int) -> None:
        """What the file gained since ``view.offset``, or its last lines (``--tail``)."""
        if view.tail_from_end:
            def read(start: int, end: int) -> bytes:
                chunks: List[bytes] = []
                stream_node_log(node, cid, name, start, chunks.append, known_size=end)
                return b"".join(chunks)

            data, reached = read_tail(size, view.tail_lines, read)
            view.feed(data, offset=reached)
        else:
            stream_node_log(node, cid, name, view.offset, view.feed, known_size=size)

    def task_views(self) -> List[LogFile]:
        return [v for v in self.views.values() if v.attempt is not None]

    def close(self) -> None:
        for view in self.views.values():
            view.close()
