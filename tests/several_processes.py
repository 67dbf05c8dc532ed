"""Running a job whose tasks have several processes each, for the tests of that behaviour.

Two ways: :func:`run_in_process` drives a real ApplicationMaster in this process, with the local
backend's real executors (processes, or Docker containers), on a plan whose tasks are given
``processes`` here; :func:`job_file_has_processes` says whether job files can say it themselves
(the role field ``processes``), which the end-to-end tests through ``subm run`` need.

Where :meth:`Plan.process_envs` gives fewer environments than a task has processes (before
torchrun's variables per process are planned), :func:`torchrun_like_envs` stands in for it: the
task's environment once per local rank, with torchrun's rank variables.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from submarine_py.am.master import ApplicationMaster
from submarine_py.am.server import serve
from submarine_py.backends.local.containers import LocalContainers
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import Plan, TaskPlan, make_plan
from submarine_py.report import JobReport


def job_file_has_processes() -> bool:
    """Whether a job file's role may say ``processes`` (and its tasks get that many)."""
    try:
        plan = make_plan(spec_from_dict({"name": "p", "roles": {"worker": {"command": "true", "processes": 2}}}))
    except Exception:
        return False
    return plan.tasks[0].processes == 2


def torchrun_like_envs(plan: Plan, task: TaskPlan, envs: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """``envs`` as they are when they hold one per process; else the one task environment
    repeated per local rank with what torchrun gives its workers: ``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (every task has ``task.processes``)."""
    if len(envs) == task.processes:
        return envs
    base, n = envs[0], task.processes
    out = []
    for local in range(n):
        env = dict(base, LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(n))
        if "RANK" in base:
            env.update(RANK=str(int(base["RANK"]) * n + local), WORLD_SIZE=str(int(base["WORLD_SIZE"]) * n),
                       GROUP_RANK=base["RANK"])
        out.append(env)
    return out


def stand_in_for_process_envs(monkeypatch: Any) -> None:
    """Make :meth:`Plan.process_envs` give one environment per process (in this process)."""
    planned = Plan.process_envs

    def process_envs(self: Plan, task: TaskPlan, *args: Any, **kw: Any) -> List[Dict[str, str]]:
        return torchrun_like_envs(self, task, planned(self, task, *args, **kw))

    monkeypatch.setattr(Plan, "process_envs", process_envs)


def plan_with_processes(spec: Dict[str, Any], processes: int, tmp_path: Path) -> Plan:
    """The plan of ``spec`` (files relative to ``tmp_path``), each task with ``processes``."""
    spec = dict(spec)
    spec["files"] = {dest: str(tmp_path / src) for dest, src in spec.get("files", {}).items()}
    plan = make_plan(spec_from_dict(spec))
    return dataclasses.replace(plan, tasks=tuple(dataclasses.replace(t, processes=processes) for t in plan.tasks))


class InProcessJob:
    """One job: its AM in this process (its HTTP endpoint on a thread), its executors real."""

    def __init__(self, plan: Plan, home: Path):
        self.plan = plan
        self.job_id = f"local_{secrets.token_hex(4)}"
        self.job_dir = home / "local" / self.job_id
        self.shared = self.job_dir / "shared"
        self.shared.mkdir(parents=True)
        self.containers = LocalContainers(str(self.job_dir), self.job_id, dict(plan.job.files),
                                          shared_dir=str(self.shared))
        self.am = ApplicationMaster(plan, self.job_id, self.containers, report_path=str(self.job_dir / "report.json"),
                                    shared_dir=str(self.shared))

    def log(self, task: str, stream: str = "stdout") -> str:
        role, index = task.split(":")
        path = self.job_dir / "logs" / f"{role}-{index}.{stream}"
        return path.read_text() if path.exists() else ""

    def run(self, during: Optional[Callable[["InProcessJob"], None]] = None) -> JobReport:
        """Run the job to its end; ``during(job)`` runs on a thread meanwhile (say, to kill it)."""
        server, port = serve(self.am, host="127.0.0.1")
        self.am.url = f"http://127.0.0.1:{port}"
        self.containers.set_status_url(self.am.url)
        errors: List[BaseException] = []
        if during is not None:
            def guarded() -> None:
                try:
                    during(self)
                except BaseException as exc:  # reported once the job is over
                    errors.append(exc)
                    self.am.kill_requested = f"the test's thread failed: {exc!r}"
            threading.Thread(target=guarded, daemon=True).start()
        try:
            report = self.am.run()
        finally:
            server.shutdown()
        if errors:
            raise errors[0]
        return report


def tasks_by_id(report: JobReport) -> Dict[str, Any]:
    return {f"{t.role}:{t.index}": t for t in report.tasks}


def pids_with(marker: str) -> List[Tuple[int, str]]:
    """Live processes whose command line holds ``marker``: (pid, command line)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and int(entry) != os.getpid():
            found.append((int(entry), cmdline))
    return found
