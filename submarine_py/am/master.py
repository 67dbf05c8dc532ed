"""The ApplicationMaster: its parts wired together, and the main loop that drives them.

One AM runs per job, on YARN (skein's master) or on this machine (the local backend). It
starts one executor per task through the backend's :class:`Containers`, waits until every
executor has registered its ``host:port`` (the gang), sends each the command and environment
(cluster spec included), and applies the job's restart policy when a task fails or its
container is lost.

Its parts, each with explicit inputs (the job's live state, :class:`~.job.JobRun`, and what
else it needs), readable and testable alone:

* ``gang.py``: registration, the gang's start, the gang timeout;
* ``supervision.py``: executors started, their calls, containers that end, silences;
* ``recovery.py``: failures -> restarts (decided by :mod:`submarine_py.restarts`), AM take-over;
* ``reporting.py``: the report and its file.

Threads: HTTP handlers (executors' calls, ``server.py``) change state under the job's lock;
the main thread runs :meth:`run`, which alone calls the containers (so processes are started
from one long-lived thread).
"""
from __future__ import annotations

import getpass
import logging
import os
import secrets
import time
from typing import Any, Dict, List, Optional

from ..plan import Plan, TaskPlan
from ..report import JobReport
from ..restarts import Restarts
from ..states import JobState, Phase
from .allocation import Allocation
from .containers import Containers
from .registration import Registration
from .gpu_usage import idle_seconds_setting, sample_seconds_setting
from .job import JobRun
from .recovery import Recovery
from .reporting import SNAPSHOT_SECONDS, build_report, write_report
from .supervision import HEARTBEAT_SECONDS, STOP_MARGIN_SECONDS, Supervision

log = logging.getLogger("subm.am")


class ApplicationMaster:
    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 submitted_at: Optional[float] = None, token: Optional[str] = None,
                 report_path: Optional[str] = None, shared_dir: Optional[str] = None,
                 snapshots: bool = False):
        self.plan = plan
        self.job_id = job_id
        self.containers = containers
        self.token = token or secrets.token_hex(16)
        self.report_path = report_path
        #: Rewrite the report file while running (YARN: the cluster may end the AM before it
        #: writes a final one). Off where the file's presence means "finished" (local).
        self.snapshots = snapshots
        self.url = ""
        #: Set from a signal handler; the main loop acts on it (handlers must not take locks).
        self.kill_requested: Optional[str] = None
        #: The signal that ended the job, if any: YARN may then record FAILED whatever this AM
        #: asks for (the SIGTERM reaches skein's AM too), so the last log line claims no verdict.
        self.signalled: Optional[str] = None
        try:
            self.user: Optional[str] = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        except (KeyError, OSError):  # a uid without a passwd entry (some containers)
            self.user = None
        self.gpu_idle_seconds = idle_seconds_setting()
        timeouts = plan.job.timeouts
        restarts = Restarts(plan.job.restart)
        # Under `never` the cluster replaces no container (the backend asks it not to): a
        # restart for the cluster's faults is then the AM's to launch.
        self.job = JobRun(plan, job_id, submitted_at=submitted_at, prelaunched=containers.prelaunched,
                          cluster_replaces_lost=containers.replaces_lost and restarts.cluster_replaces_containers)
        self.allocation = Allocation(self.job, containers, prelaunched=containers.prelaunched)
        self.recovery = Recovery(self.job, restarts, self._save_state, give_back=self.allocation.give_back)
        self.supervision = Supervision(self.job, containers, self.recovery, executor_env=self.executor_env,
                                       task_done=self.allocation.task_done,
                                       lost_after_seconds=timeouts.lost_after_seconds,
                                       gpu_idle_seconds=self.gpu_idle_seconds, hang_seconds=timeouts.hang_seconds)
        #: Executors call every third of timeouts.lost_after_seconds (at most HEARTBEAT_SECONDS),
        #: so that a silence that long is three missed calls.
        self.gang = Registration(self.job, containers, shared_dir=shared_dir,
                         heartbeat_seconds=min(HEARTBEAT_SECONDS, timeouts.lost_after_seconds / 3),
                         gpu_sample_seconds=sample_seconds_setting(), save_state=self._save_state,
                         elasticity=self.recovery.elasticity)

    def executor_env(self, task: TaskPlan) -> Dict[str, str]:
        """What the containers must put in the environment of an executor the AM starts."""
        return {"SUBM_AM_URL": self.url, "SUBM_TOKEN": self.token, "SUBM_JOB_ID": self.job_id,
                "SUBM_INDEX": str(task.index), **self.plan.executor_settings(task.role)}

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

    # ------------------------------------------------------------- main loop
    def run(self) -> JobReport:
        """Drive the job to its end; returns the final report."""
        job, restart = self.job, self.plan.job.restart
        log.info("AM for job %s (%s, %d tasks, restart %s, max_restarts %d) on %s; status at %s",
                 self.job_id, self.plan.job.framework, len(job.tasks), restart.policy,
                 restart.max_restarts, self.containers.name, self.url)
        self._loop()
        for ex in [e for e in job.executors.values() if e.alive]:
            self.containers.kill(ex.id)
        self.containers.close()
        with job.lock:
            job.phase = Phase.DONE
            report = self.report()
            job.changed.notify_all()
        self._write_report(report)
        self.containers.finish(job.state, job.diagnostics)
        if self.signalled:
            log.info("job %s stopped after %d attempt(s) in %.1f s: the ApplicationMaster received %s; "
                     "the cluster records the final state", self.job_id, report.attempts,
                     report.timings.total_seconds, self.signalled)
        else:
            log.info("job %s %s after %d attempt(s) in %.1f s", self.job_id, job.state,
                     report.attempts, report.timings.total_seconds)
        return report

    def _loop(self) -> None:
        """Rounds until every executor has left after the verdict (or the stop grace ran out)."""
        job = self.job
        timeouts = self.plan.job.timeouts
        job_deadline = time.monotonic() + timeouts.job_seconds if timeouts.job_seconds else None
        stopping = _Stopping(self.containers, timeouts.stop_grace_seconds + STOP_MARGIN_SECONDS)
        next_snapshot = 0.0
        last_round = time.monotonic()
        while True:
            self.supervision.forgive_stall(time.monotonic() - last_round)
            last_round = time.monotonic()
            if self.kill_requested:
                self.kill(self.kill_requested)
                self.kill_requested = None
                # YARN kills the AM's container 250 ms after this SIGTERM: say what became of
                # each task now, before stopping them.
                self._save_state()
            if self.snapshots and time.monotonic() >= next_snapshot:
                self._write_report()
                next_snapshot = time.monotonic() + SNAPSHOT_SECONDS
            self._launch_and_poll()
            with job.lock:
                # An elastic world starts (or grows) when its time comes; a gang whose executors
                # registered while it waited for admission starts once admitted.
                if self.recovery.elasticity.on or job.phase == Phase.STARTING:
                    self.gang.maybe_run()
                    self.recovery.elasticity.check()
                self.gang.check_timeout()
                self.supervision.check_hangs()
                if job_deadline and time.monotonic() > job_deadline and not job.finishing:
                    job.finish(JobState.FAILED, f"the job ran longer than timeouts.job_seconds "
                                                f"({timeouts.job_seconds} s)")
            if stopping.done(job):
                return
            time.sleep(0.05)

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

    def _write_report(self, report: Optional[JobReport] = None) -> None:
        """Write the report file, if the AM has one (see :mod:`.reporting`)."""
        if self.report_path:
            write_report(self.report_path, report or self.report(), self.plan)

    def _save_state(self) -> None:
        """Write the report file now where it is rewritten while running (YARN), when attempts
        change or the AM is told to stop, so that an AM of a later YARN attempt goes on from here."""
        if self.snapshots:
            self._write_report()


class _Stopping:
    """After the verdict: executors are given the stop grace (and a margin) to leave; one that
    never registered polls no instructions, so it cannot hear "exit" (e.g. after a gang
    timeout): its container is stopped at once."""

    def __init__(self, containers: Containers, patience: float):
        self.containers = containers
        self.patience = patience
        self.since: Optional[float] = None
        self.told: set = set()

    def done(self, job: JobRun) -> bool:
        """True once the AM may stop waiting; stops unregistered executors on the way."""
        with job.lock:
            if job.phase != Phase.FINISHING:
                return False
            now = time.monotonic()
            self.since = self.since or now
            alive = [e for e in job.executors.values() if e.alive]
            if not alive or now - self.since > self.patience:
                return True
            unheard = [e.id for e in alive if not e.info and e.id not in self.told]
        for ex_id in unheard:
            self.told.add(ex_id)
            self.containers.kill(ex_id)
        return False
