"""The client side of the local backend: start the AM process, follow it, kill it.

Each job lives in ``$SUBM_HOME/local/<app_id>/`` (``SUBM_HOME`` defaults to
``~/.submarine``)::

    job.json      the validated spec and submission facts
    am.log        the ApplicationMaster's decisions
    am.json       the AM's pid, status URL and token (0600), once it is up
    report.json   the final report, written by the AM
    tasks/R-I/    each task's working directory, the spec's files copied in
    shared/       SUBM_SHARED_DIR: one folder every task of the job sees (checkpoints)
    logs/R-I.stdout, logs/R-I.stderr   each task's output, a header line per attempt
"""
from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, TextIO, Tuple

import requests

from ... import PACKAGE_PARENT, extras
from ...errors import BackendError, ClusterLimitError, JobNotFoundError, SpecError
from ...executor import protocol
from ...executor.proctree import dying_with_this_process
from ...gpus import describe_local_gpus, local_gpu_ids
from ...home import subm_home
from ...jobfile.files import source_problems
from ...jobfile.model import JobSpec
from ...plan import Plan
from ...procs import pid_alive
from ...report import JobReport, replace
from ...states import JobState, Phase
from ..base import KILLED_BY_USER, Backend, Problem
from ..logs import LogFile, LogOutput, missing_attempt, read_tail

AM_START_SECONDS = 30
#: The local ApplicationMaster's entry point (``am_main.py`` beside this module).
AM_MODULE = f"{__package__}.am_main"
#: The job's shared folder (SUBM_SHARED_DIR), inside its job folder.
SHARED_DIR = "shared"
#: How much of a log `subm logs` holds at once.
LOG_CHUNK = 1 << 20


@dataclass(frozen=True)
class LocalRequest:
    """What :meth:`LocalBackend.submit` does, decided before doing it (``--dry-run`` prints it)."""

    plan: Plan
    app_id: str
    #: ``$SUBM_HOME/local/<app_id>``: created at submission (see this module's docstring).
    job_dir: str
    #: ``job.json`` as written at submission (which adds ``submitted_at`` and ``detached``).
    job: Mapping[str, Any]
    #: The ApplicationMaster's command line, and what it gets on top of this environment.
    am_argv: Tuple[str, ...]
    am_env: Mapping[str, str]

    def to_dict(self) -> Dict[str, Any]:
        return {"backend": "local", "app_id": self.app_id, "job_dir": self.job_dir, "am_argv": list(self.am_argv),
                "am_env": dict(self.am_env),
                "tasks": [{"id": t.id, "image": t.docker.image if t.docker else None, "resources": t.resources.to_dict(),
                           "tracked": t.tracked, "command": t.command} for t in self.plan.tasks]}

    def describe(self) -> str:
        lines = [f"# local backend: the AM and {len(self.plan.tasks)} executor process(es) on this machine",
                 f"# job {self.app_id} in {self.job_dir}: job.json (the validated spec), am.log, am.json, "
                 "report.json, tasks/<role>-<index>/, logs/",
                 f"# AM: {' '.join(f'{k}={shlex.quote(v)}' for k, v in self.am_env.items())} "
                 f"{shlex.join(self.am_argv)}"]
        for t in self.plan.tasks:
            how = f"docker run {t.docker.image}" if t.docker else "process"
            lines.append(f"{t.id}: {how}, {t.resources.to_dict()}, "
                         f"{'tracked' if t.tracked else 'untracked'}: {t.command}")
        return "\n".join(lines)


class LocalBackend(Backend):
    name = "local"
    poll_seconds = queued_poll_seconds = steady_poll_seconds = 0.1
    #: The AM processes this process started, by job: reaped by whichever instance sees the job
    #: end (the Python API asks a new instance for each call).
    _children: Dict[str, subprocess.Popen] = {}

    def __init__(self, home: Optional[str] = None):
        self.root = os.path.join(home or subm_home(), "local")

    # -- paths ------------------------------------------------------------------
    def job_dir(self, app_id: str, must_exist: bool = True) -> str:
        if not app_id.startswith("local_") or "/" in app_id or app_id in (".", ".."):
            raise JobNotFoundError(f"{app_id!r} is not a local job id")
        path = os.path.join(self.root, app_id)
        if must_exist and not os.path.isfile(os.path.join(path, "job.json")):
            raise JobNotFoundError(f"no local job {app_id} under {self.root}")
        return path

    def shared_dir(self, plan: Plan, app_id: str) -> Optional[str]:
        """Always: ``shared/`` in the job's folder (whatever ``shared_dir`` says; that is YARN's)."""
        return os.path.join(self.root, app_id, SHARED_DIR)

    def check(self, spec: JobSpec) -> List[Problem]:
        """Its own rules: file sources it cannot copy (URLs are for YARN's localization); the
        job's features need their packages here (:mod:`submarine_py.extras`)."""
        problems = [(f"files.{dest}", f"the local backend copies files from this machine and cannot "
                                      f"fetch {src}; give a local path (or run on YARN)")
                    for dest, src in spec.files.items() if "://" in src]
        # Its AM and its tasks run with this interpreter.
        return problems + extras.missing(spec, am_here=True, tasks_here=True)

    def check_cluster(self, plan: Plan) -> None:
        """Like YARN, refuse GPUs this machine cannot give (all tasks run at once; an elastic
        role's ``min`` of them: it grows as far as the machine lets it)."""
        wanted = sum(spec.resources.gpus * spec.fewest for spec in plan.job.roles.values())
        if not wanted:
            return
        have = len(local_gpu_ids())
        if wanted <= have:
            return
        found = describe_local_gpus()
        problems = [(f"roles.{role}.resources.gpus", f"{spec.resources.gpus} asked per task, this machine "
                                                     f"has {have} ({found})")
                    for role, spec in plan.job.roles.items() if spec.resources.gpus > have]
        if not problems:
            problems.append(("roles", f"the job needs {wanted} GPUs at once, this machine has {have} ({found})"))
        problems.append(("", "set resources.gpus: 0 to run on CPU, or run on YARN (--backend yarn)"))
        raise ClusterLimitError(problems)

    def request(self, plan: Plan) -> LocalRequest:
        app_id = f"local_{time.strftime('%Y%m%d-%H%M%S')}_{secrets.token_hex(3)}"
        job_dir = self.job_dir(app_id, must_exist=False)
        path = os.environ.get("PYTHONPATH")
        return LocalRequest(
            plan=plan, app_id=app_id, job_dir=job_dir,
            job={"app_id": app_id, "name": plan.job.name, "spec": plan.job.to_dict()},
            am_argv=(sys.executable, "-m", AM_MODULE, job_dir),
            am_env={"PYTHONPATH": PACKAGE_PARENT + (os.pathsep + path if path else ""), "PYTHONUNBUFFERED": "1"},
        )

    # -- submit -------------------------------------------------------------------
    def submit(self, request: LocalRequest, *, detach: bool = False) -> str:
        app_id, job_dir = request.app_id, request.job_dir
        missing = source_problems(request.plan.job.files)  # gone since validation: the AM copies them
        if missing:
            raise SpecError(missing)
        os.makedirs(job_dir)
        meta = dict(request.job, submitted_at=time.time(), detached=detach)
        with open(os.path.join(job_dir, "job.json"), "w") as f:
            json.dump(meta, f, indent=2)
        env = dict(os.environ, **request.am_env)
        with open(os.path.join(job_dir, "am.log"), "ab") as am_log:
            proc = subprocess.Popen(
                list(request.am_argv),
                cwd=job_dir, env=env, stdin=subprocess.DEVNULL, stdout=am_log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=None if detach else dying_with_this_process(signal.SIGTERM),
            )
        with open(os.path.join(job_dir, "am.pid"), "w") as f:
            f.write(str(proc.pid))
        self._children[app_id] = proc
        deadline = time.monotonic() + AM_START_SECONDS
        while not os.path.exists(os.path.join(job_dir, "am.json")):
            if proc.poll() is not None and not os.path.exists(os.path.join(job_dir, "report.json")):
                raise BackendError(f"the ApplicationMaster of {app_id} exited with code {proc.returncode} "
                                   f"before starting:\n{_tail(os.path.join(job_dir, 'am.log'))}")
            if time.monotonic() > deadline:
                proc.kill()
                raise BackendError(f"the ApplicationMaster of {app_id} did not start within "
                                   f"{AM_START_SECONDS} s; see {job_dir}/am.log")
            time.sleep(0.02)
        return app_id

    # -- follow -------------------------------------------------------------------
    def _am_info(self, job_dir: str) -> Dict[str, Any]:
        try:
            with open(os.path.join(job_dir, "am.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def _am_pid(self, job_dir: str) -> Optional[int]:
        try:
            with open(os.path.join(job_dir, "am.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def status(self, app_id: str) -> JobReport:
        job_dir = self.job_dir(app_id)
        report_path = os.path.join(job_dir, "report.json")
        if os.path.exists(report_path):
            child = self._children.pop(app_id, None)
            if child is not None:
                child.wait()
            with open(report_path) as f:
                report = replace(JobReport.from_dict(json.load(f)), final=True)
            return _with_submission(job_dir, report)
        info, pid = self._am_info(job_dir), self._am_pid(job_dir)
        if info.get("url"):
            try:
                live = requests.get(info["url"] + protocol.PATH_STATUS, timeout=5).json()
                return replace(JobReport.from_dict(live), final=False)
            except (requests.RequestException, ValueError, KeyError, TypeError):
                pass
        if pid_alive(pid) and not _reaped(self._children.get(app_id)):
            with open(os.path.join(job_dir, "job.json")) as f:
                meta = json.load(f)
            return JobReport(app_id=app_id, name=meta["name"], state=JobState.ACCEPTED, phase=Phase.STARTING,
                             backend=self.name, final=False)
        if os.path.exists(report_path):
            return self.status(app_id)
        return _with_submission(job_dir, JobReport(
            app_id=app_id, state=JobState.FAILED, backend=self.name, final=True, attempts=1,
            diagnostics=f"the ApplicationMaster died without a report; see {job_dir}/am.log"))

    def kill(self, app_id: str, why: str = KILLED_BY_USER) -> JobReport:
        job_dir = self.job_dir(app_id)
        report = self.status(app_id)
        if report.final:
            return report
        pid = self._am_pid(job_dir)
        # Ask the AM, saying why (its report then names `subm kill`); a signal if it cannot hear.
        if not self._ask_am_to_kill(job_dir, why) and pid and pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
        report = self.wait_final(app_id, 40)
        if report.final:
            return report
        if pid and pid_alive(pid):
            os.killpg(pid, signal.SIGKILL)
        return self.status(app_id)

    def _ask_am_to_kill(self, job_dir: str, why: str) -> bool:
        info = self._am_info(job_dir)
        if not info.get("url") or not info.get("token"):
            return False
        try:
            requests.post(info["url"] + protocol.PATH_KILL, json={"why": why}, timeout=5,
                          headers={"Authorization": f"Bearer {info['token']}"}).raise_for_status()
        except requests.RequestException:
            return False
        return True

    def list(self, include_finished: bool = False) -> List[JobReport]:
        out = []
        for path in sorted(glob.glob(os.path.join(self.root, "local_*", "job.json"))):
            app_id = os.path.basename(os.path.dirname(path))
            try:
                report = self.status(app_id)
            except (JobNotFoundError, OSError, ValueError):
                continue
            if include_finished or not report.state.is_terminal():
                out.append(report)
        return out

    def finished_reports(self, known: Set[str]) -> Iterator[JobReport]:
        for path in sorted(glob.glob(os.path.join(self.root, "local_*", "job.json"))):
            app_id = os.path.basename(os.path.dirname(path))
            if app_id in known:
                continue
            try:
                report = self.status(app_id)
            except (JobNotFoundError, OSError, ValueError):
                continue
            if report.final:
                yield report

    def cluster(self) -> Dict[str, Any]:
        from ...cluster import local_machine

        return local_machine()

    def logs(self, app_id: str, out: TextIO, role: Optional[str] = None, index: Optional[int] = None,
             follow: bool = False, attempt: Optional[int] = None, tail: Optional[int] = None) -> None:
        """Every attempt of a task is in one file (``logs/R-I.stdout``, ``.stderr``), each begun by
        its header line: ``attempt`` keeps that attempt's part (see ``backends/logs.py``)."""
        job_dir = self.job_dir(app_id)
        # Matched exactly: role names may contain '-', and "worker-*" would also match "worker-eval".
        exact = re.compile(rf"^{re.escape(role) if role else '.+'}-{index if index is not None else r'[0-9]+'}"
                           r"\.(stdout|stderr)$")
        files = sorted(p for p in glob.glob(os.path.join(job_dir, "logs", "*")) if exact.match(os.path.basename(p)))
        if not files:
            raise JobNotFoundError(f"no logs for {role or 'any role'}{'' if index is None else ':' + str(index)} "
                                   f"in {app_id}; roles: {', '.join(_roles(job_dir)) or 'none yet'}")
        output = LogOutput(out)
        views = [(p, LogFile(output, os.path.relpath(p, job_dir), attempt=attempt, tail=tail)) for p in files]
        if role is None and index is None:  # the AM's decisions, whole: they span every attempt
            views.insert(0, (os.path.join(job_dir, "am.log"), LogFile(output, "am.log", tail=tail)))
        while True:
            # Asked before reading: once the job is final, this read is the last and gets everything.
            last = not follow or self.status(app_id).final
            for path, view in views:
                _read_log(path, view)
            if last:
                for _, view in views:
                    view.close()
                missing_attempt([view for _, view in views], attempt, app_id)
                return
            time.sleep(0.5)


def _read_log(path: str, view: LogFile) -> None:
    """Hand ``view`` what ``path`` gained since its last read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if view.tail_from_end:
                def read(start: int, end: int) -> bytes:
                    f.seek(start)
                    return f.read(end - start)

                data, reached = read_tail(size, view.tail_lines, read)
                view.feed(data, offset=reached)
            else:
                f.seek(view.offset)
                # In pieces: memory stays flat whatever the log's size.
                for data in iter(lambda: f.read(LOG_CHUNK), b""):
                    view.feed(data)
    except OSError:
        pass
    view.read_done()


def _with_submission(job_dir: str, report: JobReport) -> JobReport:
    """A final report completed from ``job.json`` (what an older or a dead AM left out)."""
    try:
        with open(os.path.join(job_dir, "job.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return report
    missing = {k: meta[k] for k in ("name", "submitted_at", "spec")
               if getattr(report, k) is None and meta.get(k) is not None}
    return replace(report, **missing) if missing else report


def _roles(job_dir: str) -> List[str]:
    """The job's roles (not its tasks): from the spec, else from the log files' names."""
    try:
        with open(os.path.join(job_dir, "job.json")) as f:
            return sorted(json.load(f)["spec"]["roles"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    names = {re.sub(r"-[0-9]+$", "", os.path.basename(p).rsplit(".", 1)[0])
             for p in glob.glob(os.path.join(job_dir, "logs", "*.std*"))}
    return sorted(names)


def _reaped(proc: Optional[subprocess.Popen]) -> bool:
    return proc is not None and proc.poll() is not None


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
