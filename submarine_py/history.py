"""Job history: every finished job's report, kept as a Parquet dataset.

Where: ``SUBM_HISTORY`` (a path, or a URI of any filesystem pyarrow opens with
``pyarrow.fs.FileSystem.from_uri``: ``hdfs://nn/user/me/subm-history``,
``s3://bucket/history``...), else ``$SUBM_HOME/history``.

Layout: one file per job, ``<app_id>.parquet`` (one row), written under a
hidden temporary name and then moved into place. So writers never share a
file, a job already held is recognised by its file name, and readers see only
whole files (pyarrow's dataset discovery skips names starting with ``.``).

Jobs get there when the client sees them end (``subm run``, ``status``,
``kill``) and, for the rest (detached jobs nobody waited for), when ``subm
history`` collects the reports the ApplicationMaster left behind:
``report.json`` of each local job, ``subm-report.json`` of each finished YARN
application the ResourceManager still lists.
"""
from __future__ import annotations

import datetime as dt
import fnmatch
import json
import os
import re
import secrets
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .errors import BackendError, SpecError
from .report import JobReport

HISTORY_ENV = "SUBM_HISTORY"
SUFFIX = ".parquet"
FINISHED = ("SUCCEEDED", "FAILED", "KILLED")


def _schema():
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    gpu = pa.struct([("devices", pa.list_(pa.string())), ("samples", pa.int64()),
                     ("mean_utilization", pa.float64()), ("peak_utilization", pa.int64()),
                     ("peak_memory_mb", pa.int64()), ("memory_total_mb", pa.int64()),
                     ("idle_seconds", pa.float64()), ("idle", pa.bool_())])
    task = pa.struct([("role", pa.string()), ("index", pa.int64()), ("host", pa.string()),
                      ("state", pa.string()), ("exit_code", pa.int64()), ("restarts", pa.int64()),
                      ("tracked", pa.bool_()), ("gpu", gpu)])
    return pa.schema([
        ("app_id", pa.string()), ("name", pa.string()), ("user", pa.string()), ("queue", pa.string()),
        ("framework", pa.string()), ("backend", pa.string()), ("state", pa.string()),
        ("attempts", pa.int64()), ("submitted_at", ts), ("started_at", ts), ("finished_at", ts),
        ("gang_ready_seconds", pa.float64()), ("total_seconds", pa.float64()),
        ("diagnostics", pa.string()), ("tasks", pa.list_(task)),
        # The job spec as submitted (validated), as JSON text.
        ("spec", pa.string()), ("recorded_at", ts),
    ])


def history_location() -> str:
    from .backends.local.backend import subm_home

    return os.environ.get(HISTORY_ENV) or os.path.join(subm_home(), "history")


# --------------------------------------------------------------------- records
def _time(value: Any) -> Optional[dt.datetime]:
    """Epoch seconds (or milliseconds, as YARN gives them) as an aware UTC datetime."""
    if value in (None, "", 0):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if x > 1e11:  # milliseconds
        x /= 1000.0
    return dt.datetime.fromtimestamp(x, tz=dt.timezone.utc)


def _gpu_row(gpu: Dict[str, Any]) -> Dict[str, Any]:
    gpu.pop("idle_now_seconds", None)  # a live figure: at the end, idle_seconds says it all
    return gpu


def record_of(report: JobReport) -> Dict[str, Any]:
    """A finished job's report (as the AM wrote it, completed by its backend) as a history row."""
    t = report.timings
    submitted, finished = _time(report.submitted_at), _time(report.finished_at)
    if finished is None and submitted is not None and t.total_seconds is not None:
        finished = submitted + dt.timedelta(seconds=float(t.total_seconds))
    return {
        "app_id": report.app_id, "name": report.name, "user": report.user, "queue": report.queue,
        "framework": report.framework, "backend": report.backend, "state": report.state.value,
        "attempts": report.attempts, "submitted_at": submitted, "started_at": _time(report.started_at),
        "finished_at": finished, "gang_ready_seconds": t.gang_ready_seconds, "total_seconds": t.total_seconds,
        "diagnostics": report.diagnostics,
        "tasks": [{"role": task.role, "index": task.index, "host": task.host, "state": task.state.value,
                   "exit_code": task.exit_code, "restarts": task.restarts, "tracked": task.tracked,
                   "gpu": _gpu_row(task.gpu.to_dict()) if task.gpu else None}
                  for task in report.tasks],
        "spec": None if report.spec is None else json.dumps(report.spec, sort_keys=True),
        "recorded_at": dt.datetime.now(dt.timezone.utc),
    }


def parse_since(text: str, now: Optional[dt.datetime] = None) -> dt.datetime:
    """``7d``, ``12h``, ``30m``, ``2w`` ago, or a date/time (``2026-11-01``, ``2026-11-01T08:00``;
    UTC unless it names a zone)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text or "")
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now - dt.timedelta(**{unit: int(m.group(1))})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise SpecError([("--since", f"expected a duration like 7d, 12h, 30m or a date like 2026-11-01, "
                                     f"got {text!r}")]) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


# ----------------------------------------------------------------------- store
class History:
    """The Parquet dataset of finished jobs at ``location`` (a path or a filesystem URI)."""

    def __init__(self, location: Optional[str] = None):
        import pyarrow.fs as pafs

        self.location = location or history_location()
        try:
            if "://" in self.location:
                self.fs, self.root = pafs.FileSystem.from_uri(self.location)
            else:
                self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(self.location))
        except Exception as exc:  # ArrowInvalid, OSError: an unknown scheme, an unreachable filesystem
            raise BackendError(f"cannot open the job history at {self.location} ({HISTORY_ENV}): {exc}") from None
        self.root = self.root.rstrip("/") or "/"
        #: Files skipped while reading (not Parquet, another schema): the CLI warns about them.
        self.problems: List[str] = []

    def _path(self, app_id: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", app_id) or app_id.startswith("."):
            raise SpecError([("APP_ID", f"{app_id!r} is not a job id")])
        return f"{self.root}/{app_id}{SUFFIX}"

    def held(self) -> Set[str]:
        """Ids of the jobs the history holds."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        except Exception as exc:
            raise BackendError(f"cannot list the job history at {self.location}: {exc}") from None
        return {i.base_name[:-len(SUFFIX)] for i in infos
                if i.type == pafs.FileType.File and i.base_name.endswith(SUFFIX) and not i.base_name.startswith(".")}

    def add(self, record: Dict[str, Any], held: Optional[Set[str]] = None) -> bool:
        """Write one finished job's row unless the history holds it; True when written."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        app_id = record["app_id"]
        if record.get("state") not in FINISHED:
            return False
        if app_id in (self.held() if held is None else held):
            return False
        final = self._path(app_id)
        tmp = f"{self.root}/.{app_id}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            self.fs.create_dir(self.root, recursive=True)
            pq.write_table(pa.Table.from_pylist([record], schema=_schema()), tmp, filesystem=self.fs)
            self.fs.move(tmp, final)
        except Exception as exc:
            try:
                self.fs.delete_file(tmp)
            except Exception:
                pass
            raise BackendError(f"cannot write {app_id} to the job history at {self.location}: {exc}") from None
        if held is not None:
            held.add(app_id)
        return True

    def rows(self, *, name: Optional[str] = None, state: Optional[str] = None,
             since: Optional[dt.datetime] = None, app_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The jobs held, oldest submission first, filtered: ``name`` exact or a glob
        (``mnist-*``), ``state``, submitted at or after ``since``."""
        import pyarrow.dataset as ds

        paths = ([self._path(app_id)] if app_id else
                 [f"{self.root}/{a}{SUFFIX}" for a in sorted(self.held())])
        if app_id and app_id not in self.held():
            return []
        if not paths:
            return []
        expr = None

        def both(e: Any) -> None:
            nonlocal expr
            expr = e if expr is None else expr & e

        if state:
            both(ds.field("state") == state.upper())
        if since is not None:
            both(ds.field("submitted_at") >= since)
        globbing = bool(name and any(c in name for c in "*?["))
        if name and not globbing:
            both(ds.field("name") == name)
        try:
            tables = [ds.dataset(paths, schema=_schema(), filesystem=self.fs, format="parquet").to_table(filter=expr)]
        except Exception:  # one bad file fails the whole scan: read them one by one, skipping it
            tables = []
            for path in paths:
                try:
                    tables.append(ds.dataset([path], schema=_schema(), filesystem=self.fs,
                                             format="parquet").to_table(filter=expr))
                except Exception as exc:
                    self.problems.append(f"{path}: {exc}")
        out: Dict[str, Dict[str, Any]] = {}
        for row in (r for table in tables for r in table.to_pylist()):
            if globbing and not fnmatch.fnmatchcase(row.get("name") or "", name or ""):
                continue
            out[row["app_id"]] = row  # one file per job: a duplicate can only be a re-written same job
        epoch = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return sorted(out.values(), key=lambda r: (r.get("submitted_at") or epoch, r["app_id"]))


# --------------------------------------------------------------------- collect
def remember(report: JobReport, history: Optional[History] = None) -> bool:
    """Keep a job the client saw end; failures to write are the caller's to report."""
    if not report.state.is_terminal() or not report.final:
        return False
    return (history or History()).add(record_of(report))


def collect(history: History, backends: Iterable[Tuple[str, Any]]) -> Tuple[int, List[str]]:
    """Add every finished job the backends still know and the history lacks.

    Returns how many were added and the problems met (a backend unreachable, a
    report unreadable): the history still lists what it holds.
    """
    held = history.held()
    added, problems = 0, []
    for name, backend in backends:
        try:
            reports = backend.finished_reports(held)
        except Exception as exc:  # a backend down must not hide the history
            problems.append(f"{name}: {exc}")
            continue
        for report in reports:
            try:
                added += history.add(record_of(report), held)
            except Exception as exc:
                problems.append(f"{report.app_id}: {exc}")
    return added, problems
