"""Job history: every finished job's report, kept as a Parquet dataset.

Where: ``SUBM_HISTORY`` (a path, or a URI of any filesystem pyarrow opens with
``pyarrow.fs.FileSystem.from_uri``: ``hdfs://nn/user/me/subm-history``,
``s3://bucket/history``...; or ``webhdfs://nn:9870/user/me/subm-history``, HDFS through its
NameNode's web address with fsspec, for machines without ``libhdfs.so`` and a Hadoop client,
which pyarrow's ``hdfs://`` needs), else ``$SUBM_HOME/history``.

Layout: each job is first written as its own file, ``<app_id>.parquet`` (one
row), under a hidden temporary name and then moved into place. So writers never
share a file, a job already held is recognised by its file name, and readers
see only whole files (pyarrow's dataset discovery skips names starting with
``.``). ``subm history`` merges them into ``part-<time>-<random>.parquet`` files
once there are ``COMPACT_AT`` of them, since reading many one-row files is slow.

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
from .home import subm_home
from .report import JobReport, restart_counts
from .states import JOB_ENDED, Cause

HISTORY_ENV = "SUBM_HISTORY"
SUFFIX = ".parquet"
PART_PREFIX = "part-"
#: One-job files merged into a part file once there are this many (``History.compact``).
COMPACT_AT = 64
#: Part files merged into one once there are this many.
MAX_PARTS = 16
#: The states a job in the history ended in (its rows spell them as plain strings).
FINISHED = tuple(s.value for s in JOB_ENDED)


def _schema():
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    gpu = pa.struct([("devices", pa.list_(pa.string())), ("samples", pa.int64()),
                     ("mean_utilization", pa.float64()), ("peak_utilization", pa.int64()),
                     ("peak_memory_mb", pa.int64()), ("memory_total_mb", pa.int64()),
                     ("idle_seconds", pa.float64()), ("idle", pa.bool_())])
    # Fields added later go last: files written before them read with nulls there.
    task = pa.struct([("role", pa.string()), ("index", pa.int64()), ("host", pa.string()),
                      ("state", pa.string()), ("exit_code", pa.int64()), ("restarts", pa.int64()),
                      ("tracked", pa.bool_()), ("gpu", gpu), ("cause", pa.string())])
    restarts = pa.struct([(cause.value, pa.int64()) for cause in Cause])
    # A sweep's trials, one row each (params as JSON text: their names and types are the job's).
    trial = pa.struct([("number", pa.int64()), ("params", pa.string()), ("state", pa.string()),
                       ("value", pa.float64()), ("step", pa.int64()), ("container", pa.string()),
                       ("host", pa.string()), ("duration_seconds", pa.float64()), ("diagnostics", pa.string())])
    return pa.schema([
        ("app_id", pa.string()), ("name", pa.string()), ("user", pa.string()), ("queue", pa.string()),
        ("framework", pa.string()), ("backend", pa.string()), ("state", pa.string()),
        ("attempts", pa.int64()), ("submitted_at", ts), ("started_at", ts), ("finished_at", ts),
        ("gang_ready_seconds", pa.float64()), ("total_seconds", pa.float64()),
        ("diagnostics", pa.string()), ("tasks", pa.list_(task)),
        # The job spec as submitted (validated), as JSON text.
        ("spec", pa.string()), ("recorded_at", ts),
        # Its restarts by cause: the program's (failed, hung), the cluster's (preempted, node_lost).
        ("restarts_by_cause", restarts),
        # A sweep's trials (null for other jobs) and its metric.
        ("trials", pa.list_(trial)), ("metric", pa.string()),
    ])


def history_location() -> str:
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
                   "gpu": _gpu_row(task.gpu.to_dict()) if task.gpu else None,
                   "cause": task.cause.value if task.cause else None}
                  for task in report.tasks],
        "spec": None if report.spec is None else json.dumps(report.spec, sort_keys=True),
        "recorded_at": dt.datetime.now(dt.timezone.utc),
        "restarts_by_cause": restart_counts(report.restarts_by_cause),
        "trials": None if report.sweep is None else [
            {"number": t.number, "params": json.dumps(dict(t.params), sort_keys=True), "state": t.state.value,
             "value": t.value, "step": t.step, "container": t.container, "host": t.host,
             "duration_seconds": t.duration_seconds, "diagnostics": t.diagnostics or None}
            for t in report.sweep.trials],
        "metric": report.sweep.metric if report.sweep is not None else None,
    }


def parse_since(text: str, now: Optional[dt.datetime] = None) -> dt.datetime:
    """``7d``, ``12h``, ``30m``, ``2w`` ago, or a date/time (``2026-11-01``, ``2026-11-01T08:00``;
    UTC unless it names a zone)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text or "")
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        try:
            return now - dt.timedelta(**{unit: int(m.group(1))})
        except OverflowError:  # before year 1: every job is newer
            return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise SpecError([("--since", f"expected a duration like 7d, 12h, 30m or a date like 2026-11-01, "
                                     f"got {text!r}")]) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


#: HDFS through the NameNode's WebHDFS (fsspec): no libhdfs.so, no Hadoop client.
WEBHDFS = ("webhdfs://", "swebhdfs://")


def _webhdfs(location: str) -> Tuple[Any, str]:
    """pyarrow's view of fsspec's WebHDFS at ``location``, as HADOOP_USER_NAME or the login
    name (simple authentication: a Kerberized NameNode is not answered, docs/history.md)."""
    import getpass
    from urllib.parse import urlparse

    import fsspec
    import pyarrow.fs as pafs

    url = urlparse(location)
    secure = url.scheme == "swebhdfs"
    fs = fsspec.filesystem("webhdfs", host=url.hostname, port=url.port or (9871 if secure else 9870),
                           use_https=secure, user=os.environ.get("HADOOP_USER_NAME") or getpass.getuser(),
                           skip_instance_cache=True)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), url.path or "/"


# ----------------------------------------------------------------------- store
class History:
    """The Parquet dataset of finished jobs at ``location`` (a path or a filesystem URI)."""

    def __init__(self, location: Optional[str] = None):
        import pyarrow.fs as pafs

        self.location = location or history_location()
        try:
            if self.location.startswith(WEBHDFS):
                self.fs, self.root = _webhdfs(self.location)
            elif "://" in self.location:
                self.fs, self.root = pafs.FileSystem.from_uri(self.location)
            else:
                self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(self.location))
        except Exception as exc:  # ArrowInvalid, OSError: an unknown scheme, an unreachable filesystem
            hint = ""
            if self.location.startswith("hdfs://") and "libhdfs" in str(exc).lower():
                hint = ("; without libhdfs.so and a Hadoop client here, use HDFS through the NameNode's web "
                        "address: webhdfs://<namenode>:9870/<path>")
            raise BackendError(f"cannot open the job history at {self.location} ({HISTORY_ENV}): {exc}{hint}") from None
        self.root = self.root.rstrip("/") or "/"
        #: Files skipped while reading (not Parquet, another schema): the CLI warns about them.
        self.problems: List[str] = []
        self.unreadable: Set[str] = set()

    def _path(self, app_id: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", app_id) or app_id.startswith("."):
            raise SpecError([("APP_ID", f"{app_id!r} is not a job id")])
        return f"{self.root}/{app_id}{SUFFIX}"

    def _files(self) -> Tuple[Dict[str, str], List[str]]:
        """The history's files: one-job files by app id, and compacted parts."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        except Exception as exc:
            raise BackendError(f"cannot list the job history at {self.location}: {exc}") from None
        singles, parts = {}, []
        for i in infos:
            if i.type != pafs.FileType.File or not i.base_name.endswith(SUFFIX) or i.base_name.startswith((".", "_")):
                continue
            if i.base_name.startswith(PART_PREFIX):
                parts.append(i.path)
            else:
                singles[i.base_name[:-len(SUFFIX)]] = i.path
        return singles, sorted(parts)

    def held(self) -> Set[str]:
        """Ids of the jobs the history holds."""
        import pyarrow.parquet as pq

        singles, parts = self._files()
        ids = set(singles)
        for path in parts:  # a few files: their app_id column only
            try:
                ids.update(pq.read_table(path, columns=["app_id"], filesystem=self.fs).column(0).to_pylist())
            except Exception as exc:
                self.problems.append(f"{path}: {exc}")
        return ids

    def add(self, record: Dict[str, Any], held: Optional[Set[str]] = None) -> bool:
        """Write one finished job's row unless the history holds it; True when written."""
        import pyarrow as pa

        app_id = record["app_id"]
        if record.get("state") not in FINISHED:
            return False
        if app_id in (self.held() if held is None else held):
            return False
        self._write(pa.Table.from_pylist([record], schema=_schema()), self._path(app_id), app_id)
        if held is not None:
            held.add(app_id)
        return True

    def _write(self, table: Any, final: str, what: str) -> None:
        """Write under a hidden name, then move into place: readers never see half a file."""
        import pyarrow.parquet as pq

        tmp = f"{self.root}/.{os.path.basename(final)}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            self.fs.create_dir(self.root, recursive=True)
            pq.write_table(table, tmp, filesystem=self.fs)
            self.fs.move(tmp, final)
        except Exception as exc:
            try:
                self.fs.delete_file(tmp)
            except Exception:
                pass
            raise BackendError(f"cannot write {what} to the job history at {self.location}: {exc}") from None

    def compact(self, at_least: int = COMPACT_AT, max_parts: int = MAX_PARTS) -> int:
        """Merge the one-job files into one part file once there are ``at_least`` of them,
        and every part into one once there are ``max_parts``; returns how many jobs the
        new part holds. Reading one file per job costs milliseconds each; a part file of
        thousands of rows reads in about the time of one.

        The new part is in place before its sources go, so a reader meanwhile sees a job
        twice at most, and keeps one; two compactions at once only write a job twice.
        """
        import pyarrow as pa

        singles, parts = self._files()
        if len(singles) < at_least and len(parts) < max_parts:
            return 0
        sources = list(singles.values()) + (parts if len(parts) >= max_parts else [])
        table = self._read(sources, None)
        if table is None or not table.num_rows:
            return 0
        rows = {r["app_id"]: r for r in table.to_pylist()}  # one row per job
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        self._write(pa.Table.from_pylist(list(rows.values()), schema=_schema()),
                    f"{self.root}/{PART_PREFIX}{stamp}-{secrets.token_hex(4)}{SUFFIX}", f"{len(rows)} jobs")
        for path in sources:
            if path in self.unreadable:
                continue  # not merged: left for a person to look at
            try:
                self.fs.delete_file(path)
            except Exception:  # another compaction took it first
                pass
        return len(rows)

    def _read(self, paths: List[str], expr: Any) -> Any:
        """One table of ``paths`` (filtered); files that cannot be read are skipped and noted."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        if not paths:
            return None
        try:
            return ds.dataset(paths, schema=_schema(), filesystem=self.fs, format="parquet").to_table(filter=expr)
        except Exception:  # one bad file fails the whole scan: read them one by one, skipping it
            tables = []
            for path in paths:
                try:
                    tables.append(ds.dataset([path], schema=_schema(), filesystem=self.fs,
                                             format="parquet").to_table(filter=expr))
                except Exception as exc:
                    self.problems.append(f"{path}: {exc}")
                    self.unreadable.add(path)
            return pa.concat_tables(tables) if tables else None

    def rows(self, *, name: Optional[str] = None, state: Optional[str] = None,
             since: Optional[dt.datetime] = None, app_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The jobs held, oldest submission first, filtered: ``name`` exact or a glob
        (``mnist-*``), ``state``, submitted at or after ``since``."""
        import pyarrow.dataset as ds

        singles, parts = self._files()
        expr = None

        def both(e: Any) -> None:
            nonlocal expr
            expr = e if expr is None else expr & e

        if app_id:
            self._path(app_id)  # refuses what is no job id
            both(ds.field("app_id") == app_id)
            paths = ([singles[app_id]] if app_id in singles else []) + parts
        else:
            paths = list(singles.values()) + parts
        if state:
            both(ds.field("state") == state.upper())
        if since is not None:
            both(ds.field("submitted_at") >= since)
        globbing = bool(name and any(c in name for c in "*?["))
        if name and not globbing:
            both(ds.field("name") == name)
        table = self._read(paths, expr)
        out: Dict[str, Dict[str, Any]] = {}
        for row in table.to_pylist() if table is not None else ():
            if globbing and not fnmatch.fnmatchcase(row.get("name") or "", name or ""):
                continue
            out[row["app_id"]] = row  # a job twice (compaction under way) is the same job
        epoch = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return sorted(out.values(), key=lambda r: (r.get("submitted_at") or epoch, r["app_id"]))


# --------------------------------------------------------------------- collect
def remember(report: JobReport, history: Optional[History] = None) -> bool:
    """Keep a job the client saw end; failures to write are the caller's to report."""
    if not report.state.is_terminal() or not report.final:
        return False
    return (history or History()).add(record_of(report))


def collected_backends() -> List[Tuple[str, Any]]:
    """The backends whose finished jobs :func:`collect` looks for, as the registry says
    (the local one always, YARN where HADOOP_CONF_DIR or SUBM_YARN_RM_URL names a cluster)."""
    from .backends.registry import collected, get_backend

    return [(name, get_backend(name)) for name in collected()]


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
