"""The ApplicationMaster of a gang job: its parts wired together, the strategy the AM's shell
(``shell.py``: token, signals, report file, deadlines, the main loop) runs for a job without a
``sweep`` section.

One AM runs per job, on YARN (skein's master) or on this machine (the local backend). It
starts one executor per task through the backend's :class:`Containers`, waits until every
executor has registered its ``host:port`` (the gang), sends each the command and environment
(cluster spec included), and applies the job's restart policy when a task fails or its
container is lost.

Its parts, each with explicit inputs (the job's live state, :class:`~.job.JobRun`, and what
else it needs), readable and testable alone:

* ``registration.py``: registration, the gang's start, the gang timeout;
* ``supervision.py``: executors started, their calls, containers that end, silences;
* ``recovery.py``: failures -> restarts (decided by :mod:`submarine_py.restarts`), AM take-over;
* ``reporting.py``: the report and its file.

Threads: HTTP handlers (executors' calls, ``server.py``) change state under the job's lock;
the main thread runs the shell's loop, which alone calls the containers (so processes are
started from one long-lived thread).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..plan import Plan
from ..report import JobReport
from ..restarts import Restarts
from ..states import JobState, Phase
from .allocation import Allocation
from .containers import Containers
from .registration import Registration
from .gpu_usage import idle_seconds_setting, sample_seconds_setting
from .job import JobRun
from .recovery import Recovery
from .reporting import build_report
from .shell import Shell
from .supervision import Supervision

log = logging.getLogger("subm.am")


class ApplicationMaster(Shell):
    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 submitted_at: Optional[float] = None, token: Optional[str] = None,
                 report_path: Optional[str] = None, shared_dir: Optional[str] = None,
                 snapshots: bool = False):
        super().__init__(plan, job_id, containers, token=token, report_path=report_path, snapshots=snapshots)
        self.gpu_idle_seconds = idle_seconds_setting()
        timeouts = plan.job.timeouts
        restarts = Restarts(plan.job.restart)
        self.job = JobRun(plan, job_id, submitted_at=submitted_at)
        self.allocation = Allocation(self.job, containers)
        self.lock, self.changed = self.job.lock, self.job.changed
        self.recovery = Recovery(self.job, restarts, self.save_state, give_back=self.allocation.give_back)
        self.supervision = Supervision(self.job, containers, self.recovery, executor_env=self.executor_env,
                                       task_done=self.allocation.task_done,
                                       lost_after_seconds=timeouts.lost_after_seconds,
                                       gpu_idle_seconds=self.gpu_idle_seconds, hang_seconds=timeouts.hang_seconds)
        self.gang = Registration(self.job, containers, shared_dir=shared_dir, heartbeat_seconds=self.heartbeat,
                                 gpu_sample_seconds=sample_seconds_setting(), save_state=self.save_state,
                                 elasticity=self.recovery.elasticity)

    # -------------------------------------------------------- executor calls (server.py)
    def on_register(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.gang.register(body)

    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]:
        return self.supervision.next_instructions(executor, after, wait)

    def heard_from(self, executor: str, quiet: Optional[float] = None, attempt: Optional[int] = None) -> None:
        self.supervision.heard_from(executor, quiet, attempt)

    def on_started(self, body: Dict[str, Any]) -> None:
        self.supervision.on_started(body)

    def on_exit(self, body: Dict[str, Any]) -> None:
        self.supervision.on_exit(body)

    def on_gpu(self, body: Dict[str, Any]) -> None:
        self.supervision.on_gpu(body)

    def on_goodbye(self, body: Dict[str, Any]) -> None:
        self.supervision.on_goodbye(body)

    def on_metric(self, body: Dict[str, Any]) -> None:
        """A metric's lines, sent for a sweep's trials only (``sweep/master.py``): nothing to do here."""

    def take_over(self, previous: Optional[JobReport], lost_attempts: int) -> None:
        """Go on with a job whose earlier AM attempt(s) were lost (see :meth:`Recovery.take_over`)."""
        self.recovery.take_over(previous, lost_attempts)

    def kill(self, why: str = "killed by request") -> None:
        # No "job KILLED" line yet: on YARN a SIGTERM usually means the container itself is
        # being killed, and YARN may record FAILED if it ends us before driver.finish() (the
        # last line, "job ... KILLED after ...", comes once the cluster has taken the verdict).
        with self.job.lock:
            self.job.decide("stopping every task: %s", why)
            self.job.finish(JobState.KILLED, why, announce=False)

    # ------------------------------------------------- the strategy's part of the loop
    def begin(self) -> None:
        restart = self.plan.job.restart
        log.info("AM for job %s (%s, %d tasks, restart %s, max_restarts %d) on %s; status at %s",
                 self.job_id, self.plan.job.framework, len(self.job.tasks), restart.policy,
                 restart.max_restarts, self.containers.name, self.url)

    def round(self) -> None:
        job = self.job
        self._launch_and_poll()
        with job.lock:
            # An elastic world starts (or grows) when its time comes; a gang whose executors
            # registered while it waited for admission starts once admitted.
            if self.recovery.elasticity.on or job.phase == Phase.STARTING:
                self.gang.maybe_run()
                self.recovery.elasticity.check()
            self.gang.check_timeout()
            self.supervision.check_hangs()

    @property
    def finishing(self) -> bool:
        return self.job.finishing

    def finish(self, state: JobState, diagnostics: str) -> None:
        self.job.finish(state, diagnostics)

    def verdict(self) -> Tuple[JobState, str]:
        return self.job.state, self.job.diagnostics

    def set_phase(self, phase: Phase) -> None:
        self.job.phase = phase

    def live(self) -> List[Tuple[str, bool]]:
        return [(e.id, bool(e.info)) for e in self.job.executors.values() if e.alive]

    def watched(self) -> Iterable[Any]:
        return self.job.executors.values()

    def summary(self, report: JobReport) -> str:
        return (f"job {self.job_id} {report.state} after {report.attempts} attempt(s) in "
                f"{report.timings.total_seconds:.1f} s")

    def _launch_and_poll(self) -> None:
        """Executors to start (and containers to give back), containers that ended, executors
        that fell silent; then whether the gang asked for was granted (:mod:`.allocation`)."""
        job = self.job
        for ts in self.allocation.launches():
            self.supervision.launch(ts)
        self.allocation.reconcile()
        for ex_id in self.allocation.releases():
            self.containers.kill(ex_id)
        for ended in self.containers.poll():
            self.supervision.executor_ended(ended.executor, ended.exit_code, ended.diagnostics, ended.role,
                                            ended.started_at, refused=not ended.counts, refusal=ended.refusal,
                                            cause=ended.cause)
        with job.lock:
            silent = self.supervision.silent_executors()
        for ex_id, why in silent:
            self.containers.lost(ex_id)
            self.supervision.executor_ended(ex_id, None, why, lost=True)
        self.allocation.check()

    # ---------------------------------------------------------------- report
    def report(self) -> JobReport:
        with self.job.lock:
            return build_report(self.job, self.containers, user=self.user, url=self.url,
                                gpu_idle_seconds=self.gpu_idle_seconds, allocation=self.allocation)
