"""Running a job whose tasks have several processes each, for the tests of that behaviour.

:class:`InProcessJob` drives a real ApplicationMaster in this process, with the local
backend's real executors (processes, or Docker containers), on a plan whose tasks are given
``processes`` here (:func:`plan_with_processes`); the end-to-end tests go through ``subm run``
with the role field ``processes``.
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
from submarine_py.plan import Plan, make_plan
from submarine_py.report import JobReport


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
