"""The AM side of the local backend: executors as local processes or Docker containers (see ``am_main``)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Set

from ... import interpreters
from ...plan import TaskPlan
from ...gpus import local_gpu_ids
from ...procs import signal_group
from ...executor import main as executor_module, protocol
from ...executor.proctree import dying_with_this_process
from ...admission import Verdict
from ...am.containers import Containers, Ended
from ...refusals import refusal
from ...states import Placement
from . import docker as local_docker
from .gpu_ledger import GpuLedger, ledger_path

EXECUTOR_PATH = os.path.abspath(executor_module.__file__)
#: Beyond the job's stop grace: time for an executor to report its task's end and exit.
KILL_MARGIN_SECONDS = 1.0


class LocalContainers(Containers):
    name = "local"

    def __init__(self, job_dir: str, job_id: str, files: Dict[str, str], host: str = "127.0.0.1", *,
                 shared_dir: Optional[str] = None, submitted_at: Optional[float] = None,
                 ledger: Optional[str] = None):
        self.job_dir = job_dir
        #: SIGTERM -> SIGKILL for an executor's process group: the grace the executor gives its
        #: task (its SUBM_STOP_GRACE, the one route of timeouts.stop_grace_seconds), per executor.
        self.stop_grace: Dict[str, float] = {}
        self.shared_dir = shared_dir
        self.job_id = job_id
        self.files = files
        self.host = host
        self.procs: Dict[str, subprocess.Popen] = {}
        self.tasks: Dict[str, TaskPlan] = {}
        self.containers: Dict[str, str] = {}
        self.launches = 0
        self.stopping: Dict[str, float] = {}
        self.used_docker = False
        devices = local_gpu_ids()
        self.has_gpus = bool(devices)
        #: The machine's GPUs, shared with every other local job (see ``gpu_ledger``).
        self.ledger = GpuLedger(ledger or ledger_path(), devices, job_id)
        self.submitted_at = time.time() if submitted_at is None else submitted_at
        #: The devices each executor was started on.
        self.gpus: Dict[str, List[str]] = {}
        #: Executors killed while holding GPUs: their GPUs go back once they have ended.
        self.giving_back: Set[str] = set()
        #: Whether this job ever asked the ledger (a CPU-only job never touches it).
        self.in_ledger = False
        #: Where each Docker executor's stderr began (its log's size at launch): what
        #: ``docker run`` said there tells a refused launch (refusals.py).
        self.stderr_at: Dict[str, int] = {}

    # -- layout -------------------------------------------------------------
    def workdir(self, task: TaskPlan) -> str:
        return os.path.join(self.job_dir, "tasks", f"{task.role}-{task.index}")

    def log_path(self, task: TaskPlan, stream: str = "stdout") -> str:
        return os.path.join(self.job_dir, "logs", f"{task.role}-{task.index}.{stream}")

    def _prepare_workdir(self, task: TaskPlan) -> str:
        wd = self.workdir(task)
        if not os.path.isdir(wd):
            os.makedirs(wd)
            for dest, src in self.files.items():
                target = os.path.join(wd, dest)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if os.path.isdir(src):
                    shutil.copytree(src, target, symlinks=True)
                else:
                    shutil.copy2(src, target)
        return wd

    # -- Containers -----------------------------------------------------------
    def admit(self, tasks: Sequence[TaskPlan], placement: Placement) -> Verdict:
        """Every GPU of the gang from the machine's ledger, at once, or none (and why)."""
        want = {t.id: t.resources.gpus for t in tasks if t.resources.gpus > 0}
        if not want or not self.has_gpus:
            return Verdict(True)
        self.in_ledger = True
        got = self.ledger.reserve(want, self.submitted_at)
        return Verdict(True) if got.granted else Verdict(False, got.why)

    def admit_extra(self, task: TaskPlan, placement: Placement, asking: Sequence[TaskPlan] = ()) -> Verdict:
        """The task's GPUs if that many are free now, without joining the waiting jobs (what
        ``asking`` needs is reserved already: the ledger is exact)."""
        if task.resources.gpus <= 0 or not self.has_gpus:
            return Verdict(True)
        self.in_ledger = True
        got = self.ledger.reserve({task.id: task.resources.gpus}, self.submitted_at, queue=False)
        return Verdict(True) if got.granted else Verdict(False, got.why)

    def launch(self, task: TaskPlan, env: Dict[str, str]) -> str:
        self.launches += 1
        ex_id = f"{task.role}-{task.index}-e{self.launches}"
        wd = self._prepare_workdir(task)
        os.makedirs(os.path.dirname(self.log_path(task)), exist_ok=True)
        full_env = dict(env, **{protocol.EXECUTOR_ID: ex_id, protocol.ADVERTISE_HOST: self.host, protocol.WORKDIR: wd})
        gpus = self._take_gpus(task, ex_id)
        if self.has_gpus and not task.docker:
            full_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # isolation, as YARN gives it
        out = open(self.log_path(task, "stdout"), "ab")
        err = open(self.log_path(task, "stderr"), "ab")
        try:
            if task.docker:
                name = f"subm-{self.job_id}-{ex_id}".replace("_", "-")
                argv = local_docker.run_argv(task, full_env, wd, EXECUTOR_PATH, self.job_id, name, gpus,
                                             shared_dir=self.shared_dir,
                                             logs=(self.log_path(task, "stdout"), self.log_path(task, "stderr")))
                self.containers[ex_id] = name
                self.used_docker = True
                self.stderr_at[ex_id] = os.fstat(err.fileno()).st_size
                proc_env = dict(os.environ, **{k: v for k, v in full_env.items()
                                               if k in local_docker.SECRET_VARIABLES})
            else:
                argv = [sys.executable, EXECUTOR_PATH]
                proc_env = dict(os.environ)
                # `python` in a task's command is the environment that runs subm (venv included).
                proc_env["PATH"] = self._python_path(proc_env.get("PATH", ""))
                proc_env.update(full_env)
            proc = subprocess.Popen(argv, cwd=wd, env=proc_env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True, preexec_fn=dying_with_this_process(signal.SIGTERM))
        finally:
            out.close()
            err.close()
        self.procs[ex_id] = proc
        self.tasks[ex_id] = task
        self.stop_grace[ex_id] = float(env[protocol.STOP_GRACE])
        return ex_id

    def _python_path(self, rest: str) -> str:
        """``PATH`` where ``python``/``python3`` run this interpreter as started (its venv holds)."""
        bin_dir = os.path.join(self.job_dir, "bin")
        if not os.path.isfile(os.path.join(bin_dir, "python3")):
            interpreters.write_wrappers(sys.executable, bin_dir)
        return interpreters.search_path(sys.executable, bin_dir, rest)

    def _take_gpus(self, task: TaskPlan, ex_id: str) -> List[str]:
        """The devices admission reserved for ``task`` (or, for a replacement started under a
        gang that is up, free ones now), bound to ``ex_id`` in the ledger."""
        n = task.resources.gpus
        if n <= 0 or not self.has_gpus:
            return []
        self.in_ledger = True
        taken = self.ledger.bind(task.id, ex_id)
        if len(taken) < n:
            got = self.ledger.reserve({task.id: n}, self.submitted_at, queue=False)
            if not got.granted:
                raise RuntimeError(f"{task.id} asks {n} GPU(s): {got.why}")
            taken = self.ledger.bind(task.id, ex_id)
        self.gpus[ex_id] = taken
        return taken

    def _release(self, ex_id: str) -> None:
        """``ex_id`` has ended: its GPUs go back if the AM gave its container back (:meth:`kill`);
        an executor that ended by itself leaves them to its task's replacement (or to close)."""
        if ex_id in self.giving_back:
            self.giving_back.discard(ex_id)
            self.ledger.release(ex_id)
            self.gpus.pop(ex_id, None)
        self._remove_container(ex_id)

    def poll(self) -> List[Ended]:
        ended = []
        for ex_id, proc in list(self.procs.items()):
            code = proc.poll()
            if code is not None:
                # The executor's group also holds its task's processes: none may outlive it.
                signal_group(proc.pid, signal.SIGKILL)
                del self.procs[ex_id]
                self.stopping.pop(ex_id, None)
                self._release(ex_id)
                code = code if code >= 0 else 128 - code
                refused = refusal(code, self._docker_said(ex_id)) if code else ""
                ended.append(Ended(ex_id, code, refused, refusal=refused))
            elif ex_id in self.stopping and time.monotonic() > self.stopping[ex_id]:
                signal_group(proc.pid, signal.SIGKILL)
        return ended

    def _docker_said(self, ex_id: str) -> str:
        """What a Docker executor's launch wrote to stderr (``docker run``'s errors, the launch
        line's), up to 4 KiB; "" for processes."""
        start = self.stderr_at.pop(ex_id, None)
        task = self.tasks.get(ex_id)
        if start is None or task is None:
            return ""
        try:
            with open(self.log_path(task, "stderr"), "rb") as f:
                f.seek(start)
                return f.read(4096).decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def kill(self, executor: str) -> None:
        if executor in self.gpus:
            if executor in self.procs:
                self.giving_back.add(executor)  # once it has ended (poll)
            else:
                self.ledger.release(executor)
                del self.gpus[executor]
        proc = self.procs.get(executor)
        if proc is not None and proc.poll() is None:
            signal_group(proc.pid, signal.SIGTERM)
            self.stopping.setdefault(executor, time.monotonic() + self.stop_grace[executor] + KILL_MARGIN_SECONDS)

    def describe(self, executor: str) -> str:
        proc = self.procs.get(executor)
        if proc is None:
            return "its executor has exited"
        return f"executor process {proc.pid} started but not registered"

    def log_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        return self.log_path(task)

    def stderr_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        return self.log_path(task, "stderr")

    def stderr_tail(self, task: TaskPlan, executor: Optional[str]) -> str:
        """What the last attempt wrote to stderr (after its header line), from the file this
        backend writes; needed in Docker, where the executor's stderr is a pipe."""
        try:
            with open(self.log_path(task, "stderr"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 65536))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        header = text.rfind("[subm] job=")
        return text[text.index("\n", header) + 1 if header >= 0 and "\n" in text[header:] else 0:]

    def close(self) -> None:
        for ex_id in list(self.procs):
            self.kill(ex_id)
        deadline = time.monotonic() + max(self.stop_grace.values(), default=0.0) + 2 * KILL_MARGIN_SECONDS
        while self.procs and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        for ex_id, proc in list(self.procs.items()):
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            self._release(ex_id)
        self.procs.clear()
        if self.in_ledger:
            self.ledger.release()  # every GPU of the job, and its place among waiting jobs
        if self.used_docker:
            local_docker.remove_job_containers(self.job_id)

    def _remove_container(self, ex_id: str) -> None:
        name = self.containers.pop(ex_id, None)
        if name:
            local_docker.remove_container(name)
