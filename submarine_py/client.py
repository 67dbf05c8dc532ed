"""The Python API: what ``subm`` does, for notebooks and schedulers (Airflow, CI scripts).

::

    from submarine_py import load, submit, wait, logs

    job = load("job.yaml", {"epochs": 3})      # the job file, its --set variables as a dict
    app_id = submit(job)                        # detached: returns once submitted
    report = wait(app_id, timeout=3600)         # the JobReport `subm status` prints
    print(logs(app_id, role="worker", tail=20))

Every command of the CLI is one call here (``cli.py`` parses options, calls, prints), and
every answer is the typed :class:`~submarine_py.report.JobReport` the CLI prints. Errors are
the package's own (:class:`~submarine_py.errors.SubmarineError` and its subclasses): what
the cluster's client libraries (skein, requests) or the file system raise is turned into a
:class:`~submarine_py.errors.BackendError` here, at the boundary.
"""
from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, TextIO, TypeVar, Union

from .backends import registry
from .errors import BackendError, SpecError, SubmarineError
from .report import JobReport, replace

if TYPE_CHECKING:
    from .backends.base import Backend, Request
    from .queue_view import QueueView
    from .jobfile.model import JobSpec
    from .plan import Plan

__all__ = ["Job", "Prepared", "cluster", "jobs", "kill", "load", "logs", "prepare", "queue", "run", "status", "submit",
           "wait", "write_logs"]

#: What a report callback gets: each new status while a job is followed.
OnUpdate = Callable[[JobReport], None]
_F = TypeVar("_F", bound=Callable[..., Any])
#: Libraries whose exceptions never reach a caller as they are.
_FOREIGN = ("skein", "requests", "urllib3", "grpc", "google")


def _boundary(fn: _F) -> _F:
    """Errors leave the API as :class:`SubmarineError`: a client library's or the file
    system's become :class:`BackendError` (``from None``: their traceback is not the caller's)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SubmarineError:
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] in _FOREIGN:  # requests' errors are OSErrors too
                raise BackendError(f"{type(exc).__name__}: {exc}") from None
            if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # a broken pipe: the
                where = f": {exc.filename}" if exc.filename else ""  # caller's own stream (write_logs)
                raise BackendError(f"{exc.strerror or exc}{where}") from None
            raise  # a bug of ours: its own traceback

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class Job:
    """A job file read, checked and planned for one backend: what :func:`submit` sends.

    Made by :func:`load`; its problems (and the backend's own rules) were refused there.
    """

    plan: "Plan"
    #: The backend it is for (``local``, ``yarn``), and why, when it was not named: what
    #: ``subm run`` prints after ``Backend: NAME``.
    backend: str
    why_backend: str = ""

    @property
    def name(self) -> str:
        return self.plan.job.name

    @property
    def spec(self) -> "JobSpec":
        return self.plan.job

    def environments(self) -> Dict[str, List[Dict[str, str]]]:
        """Each task's processes' environments as the backend will give them (``subm validate``
        prints them); the job's id, not known yet, reads ``<app_id>``."""
        be = _backend(self.backend)
        return self.plan.preview_envs(shared_dir=be.shared_dir(self.plan, "<app_id>"))


def _backend(name: str) -> "Backend":
    return registry.get_backend(name)


def _backend_for(app_id: str) -> "Backend":
    """The backend an id belongs to (a malformed id: SpecError, exit 2)."""
    return registry.get_backend(registry.backend_for_app(app_id))


def _template_variables(variables: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``variables`` as ``--set`` gives them: a string is read as ``--set KEY=STRING`` reads it
    (``"3"`` is the number 3, and a string stays one YAML scalar whatever it holds); numbers
    and booleans as they are."""
    from .jobfile import parse_set_options

    problems, texts, typed = [], [], {}
    for key, value in (variables or {}).items():
        if not isinstance(key, str) or not key.isidentifier():
            problems.append(("variables", f"expected identifiers as keys (template variables), got {key!r}"))
        elif isinstance(value, str):
            texts.append(f"{key}={value}")
        elif isinstance(value, (bool, int, float)):
            typed[key] = value
        else:
            problems.append((f"variables.{key}", f"expected a string, a number or a boolean (what --set "
                                                 f"gives), got {type(value).__name__}"))
    if problems:
        raise SpecError(problems)
    return {**parse_set_options(texts), **typed}


@_boundary
def load(job_file: str, variables: Optional[Mapping[str, Any]] = None, *, backend: Optional[str] = None) -> Job:
    """Read, render and check a job file, and plan its tasks, for ``backend`` (else the
    default: ``yarn`` where ``HADOOP_CONF_DIR`` is set, else ``local``).

    ``variables`` are the template's ``--set`` values, as a dict. Every problem of the file and
    of the backend's own rules is refused at once: :class:`SpecError`, naming each field.
    """
    from .jobfile import load_job
    from .plan import make_plan

    name = registry.choose_backend(backend)
    be = _backend(name)
    spec = load_job(job_file, _template_variables(variables), rules=be.check)
    return Job(plan=make_plan(spec), backend=name, why_backend=registry.why_chosen(name, named=bool(backend)))


@dataclass(frozen=True)
class Prepared:
    """A job checked against its cluster and turned into its backend's request, submitted by
    :func:`submit`; :meth:`describe` says what that will do (``subm run --dry-run``)."""

    job: Job
    #: The backend's own request (``Backend.request``: skein's application spec for YARN).
    request: "Request"

    def describe(self) -> str:
        return self.request.describe()


@_boundary
def prepare(job: Job) -> Prepared:
    """Ask the cluster what it offers, refuse what it can never run (``ClusterLimitError``,
    naming the field), and build the backend's request; submits nothing."""
    be = _backend(job.backend)
    be.check_cluster(job.plan)
    return Prepared(job=job, request=be.request(job.plan))


@_boundary
def submit(job: Union[Job, Prepared], *, detach: bool = True) -> str:
    """Submit a job (through :func:`prepare` when it was not prepared); returns its application
    id once the cluster has it.

    ``detach`` (the default): the job lives on its own, as with ``subm run --detach``. Without,
    it is tied to this process as under ``subm run``: locally its AM ends when the thread
    that submitted ends; :func:`run` submits so and waits.
    """
    prepared = job if isinstance(job, Prepared) else prepare(job)
    return _backend(prepared.job.backend).submit(prepared.request, detach=detach)


@_boundary
def wait(app_id: str, *, timeout: Optional[float] = None, on_update: Optional[OnUpdate] = None) -> JobReport:
    """Block until the job ends; returns its final report (look at ``report.state``).

    ``timeout``: seconds, after which :class:`~submarine_py.errors.WaitTimeout` (its
    ``report``: the last status seen); the job goes on. ``on_update`` sees each new status.
    """
    if timeout is not None and timeout < 0:
        raise SpecError([("timeout", f"expected seconds >= 0, got {timeout}")])
    return _backend_for(app_id).wait(app_id, on_update=on_update, timeout=timeout)


@_boundary
def run(job: Job, *, on_update: Optional[OnUpdate] = None) -> JobReport:
    """Submit ``job`` and wait for it (``subm run``): an interrupt (Ctrl-C, ``KeyboardInterrupt``)
    kills the job and returns its report."""
    from .backends.base import KILLED_BY_INTERRUPT

    app_id = submit(job, detach=False)
    try:
        return wait(app_id, on_update=on_update)
    except KeyboardInterrupt:
        return kill(app_id, why=KILLED_BY_INTERRUPT)


@_boundary
def status(app_id: str) -> JobReport:
    """The job's report now: state, tasks, diagnostics (``subm status``); a job waiting for its
    gang, its place in its queue's line and when it is expected to start (``report.place``:
    read only then, where the backend keeps a shared line)."""
    be = _backend_for(app_id)
    report = be.status(app_id)
    if not report.waiting_for or report.final:
        return report
    try:
        view = be.line()
    except SubmarineError:  # the report stands without its place
        return report
    from .queue_view import place_of

    place = place_of(view, app_id) if view is not None else None
    return replace(report, place=place) if place is not None else report


@_boundary
def queue(queue: Optional[str] = None, *, backend: Optional[str] = None) -> "QueueView":
    """The line of gangs waiting for room (of ``queue``, else every queue) in admission's order,
    each with its expected start and its basis, and the running jobs holding GPUs (``subm
    queue``). A backend with no line shared between users (local): :class:`SpecError`."""
    name = registry.choose_backend(backend)
    view = _backend(name).line()
    if view is None:
        raise SpecError([("--backend", f"the {name} backend keeps no line shared between users: a local job "
                                       f"waits on this machine's GPU ledger alone, and `subm status` says "
                                       f"what it waits for")])
    return view.of_queue(queue)


@_boundary
def kill(app_id: str, *, why: Optional[str] = None) -> JobReport:
    """Stop the job and every one of its tasks; returns its final report, whose diagnostics
    say ``why`` (by default, killed by ``subm kill``)."""
    be = _backend_for(app_id)
    return be.kill(app_id) if why is None else be.kill(app_id, why=why)


@_boundary
def jobs(*, include_finished: bool = False, backend: Optional[str] = None) -> List[JobReport]:
    """The backend's jobs: running ones, or every one it still knows (``subm list``)."""
    return _backend(registry.choose_backend(backend)).list(include_finished=include_finished)


@_boundary
def cluster(*, backend: Optional[str] = None) -> Dict[str, Any]:
    """What the backend's cluster offers and uses now (``subm cluster``; shapes in ``cluster.py``)."""
    return _backend(registry.choose_backend(backend)).cluster()


def _check_log_options(role: Optional[str], index: Optional[int], attempt: Optional[int],
                       tail: Optional[int]) -> None:
    from .jobfile.fields import ROLE_NAME

    problems = []
    if role is not None and not ROLE_NAME.match(role):
        problems.append(("role", f"expected a role name (a letter, then letters, digits or '-'), got {role!r}"))
    for name, value, least in (("index", index, 0), ("attempt", attempt, 1), ("tail", tail, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            problems.append((name, f"expected a whole number >= {least}, got {value!r}"))
    if problems:
        raise SpecError(problems)


@_boundary
def write_logs(app_id: str, out: TextIO, *, role: Optional[str] = None, index: Optional[int] = None,
               attempt: Optional[int] = None, tail: Optional[int] = None, follow: bool = False) -> None:
    """Write the job's logs to ``out`` (``subm logs``): its tasks' stdout and stderr, of
    ``role`` and ``index`` where given, each file titled ``==> NAME <==``; with neither, first
    the ApplicationMaster's log, of every AM attempt.

    ``attempt``: only that attempt of each task (counted from 1, as reports count); ``tail``:
    the last lines of each file; ``follow``: go on writing until the job ends.
    """
    _check_log_options(role, index, attempt, tail)
    _backend_for(app_id).logs(app_id, out, role=role, index=index, follow=follow, attempt=attempt, tail=tail)


def logs(app_id: str, *, role: Optional[str] = None, index: Optional[int] = None,
         attempt: Optional[int] = None, tail: Optional[int] = None) -> str:
    """The job's logs now, as one string (see :func:`write_logs`, which streams them)."""
    out = io.StringIO()
    write_logs(app_id, out, role=role, index=index, attempt=attempt, tail=tail)
    return out.getvalue()
