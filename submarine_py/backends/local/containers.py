"""The AM side of the local backend: executors as local processes or Docker containers (see ``am_main``)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

from ... import interpreters
from ...plan import TaskPlan
from ...gpus import local_gpu_ids
from ...procs import die_with_parent, signal_group
from ...executor import main as executor_module
from ...am.containers import Containers, Ended
from ...refusals import refusal
from . import docker as local_docker

EXECUTOR_PATH = os.path.abspath(executor_module.__file__)
#: Beyond the job's stop grace: time for an executor to report its task's end and exit.
KILL_MARGIN_SECONDS = 1.0


class LocalContainers(Containers):
    name = "local"

    def __init__(self, job_dir: str, job_id: str, files: Dict[str, str], host: str = "127.0.0.1", *,
                 shared_dir: Optional[str] = None):
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
        self.free_gpus: List[str] = local_gpu_ids()
        self.has_gpus = bool(self.free_gpus)
        self.gpus: Dict[str, List[str]] = {}
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
    def launch(self, task: TaskPlan, env: Dict[str, str]) -> str:
        self.launches += 1
        ex_id = f"{task.role}-{task.index}-e{self.launches}"
        wd = self._prepare_workdir(task)
        os.makedirs(os.path.dirname(self.log_path(task)), exist_ok=True)
        full_env = dict(env, SUBM_EXECUTOR_ID=ex_id, SUBM_ADVERTISE_HOST=self.host, SUBM_WORKDIR=wd)
        gpus = self._take_gpus(ex_id, task.resources.gpus)
        if self.has_gpus and not task.docker:
            full_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # isolation, as YARN gives it
        out = open(self.log_path(task, "stdout"), "ab")
        err = open(self.log_path(task, "stderr"), "ab")
        try:
            if task.docker:
                name = f"subm-{self.job_id}-{ex_id}".replace("_", "-")
                argv = local_docker.run_argv(task, full_env, wd, EXECUTOR_PATH, self.job_id, name, gpus,
                                             shared_dir=self.shared_dir)
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
                                    stderr=err, start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
        finally:
            out.close()
            err.close()
        self.procs[ex_id] = proc
        self.tasks[ex_id] = task
        self.stop_grace[ex_id] = float(env["SUBM_STOP_GRACE"])
        return ex_id

    def _python_path(self, rest: str) -> str:
        """``PATH`` where ``python``/``python3`` run this interpreter as started (its venv holds)."""
        bin_dir = os.path.join(self.job_dir, "bin")
        if not os.path.isfile(os.path.join(bin_dir, "python3")):
            interpreters.write_wrappers(sys.executable, bin_dir)
        return interpreters.search_path(sys.executable, bin_dir, rest)

    def _take_gpus(self, ex_id: str, n: int) -> List[str]:
        if n <= 0 or not self.has_gpus:
            return []
        if len(self.free_gpus) < n:
            raise RuntimeError(f"{n} GPU(s) asked, {len(self.free_gpus)} free on this machine")
        taken, self.free_gpus = self.free_gpus[:n], self.free_gpus[n:]
        self.gpus[ex_id] = taken
        return taken

    def _release(self, ex_id: str) -> None:
        self.free_gpus.extend(self.gpus.pop(ex_id, []))
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
        if self.used_docker:
            local_docker.remove_job_containers(self.job_id)

    def _remove_container(self, ex_id: str) -> None:
        name = self.containers.pop(ex_id, None)
        if name:
            local_docker.remove_container(name)
