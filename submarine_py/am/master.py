"""The ApplicationMaster: gang start, cluster spec, watching, restart policy.

One AM runs per job, on YARN (skein's master) or on this machine (the local
backend). It starts one executor per task through the backend's :class:`Containers`,
waits until every executor has registered its ``host:port`` (the gang), sends
each the command and environment (cluster spec included), and applies the
job's restart policy when a task fails or its container is lost.

Threads: HTTP handlers (executors' calls) change state under ``self.lock``;
the main thread runs :meth:`run`, which alone calls the containers (so processes
are started from one long-lived thread).

Beside it: ``records.py`` (its records of tasks and executors), ``recovery.py`` (fault
handling, a mixin), ``diagnostics.py`` (the words of failures and timeouts),
``reporting.py`` (the report and its file), ``server.py`` (the HTTP endpoint).
"""
from __future__ import annotations

import getpass
import logging
import os
import secrets
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from ..plan import Plan, TaskPlan
from ..report import Event, JobReport
from ..states import JobState, Phase, RestartPolicy, TaskState
from .reporting import build_report, write_report
from .containers import Containers
from .diagnostics import gang_missing, quote_tail, restarts_spent
from .gpu_usage import add_samples, idle_seconds_setting, sample_seconds_setting
from .records import Executor, Task, shown
from .recovery import HEARTBEAT_SECONDS, Recovery

log = logging.getLogger("subm.am")

#: How long the AM waits beyond the job's stop grace for executors to report and leave
#: (they report within moments of their task's exit; this covers a slow or loaded node).
STOP_MARGIN_SECONDS = 5
#: Decisions kept in the report (the AM's log has all of them).
MAX_EVENTS = 200
#: How often a running AM rewrites its report file, so that a job whose AM is killed or
#: lost still has a final report with its tasks.
SNAPSHOT_SECONDS = 2.0


class ApplicationMaster(Recovery):
    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 submitted_at: Optional[float] = None, token: Optional[str] = None,
                 report_path: Optional[str] = None, shared_dir: Optional[str] = None,
                 snapshots: bool = False):
        self.plan = plan
        #: SUBM_SHARED_DIR of every task (the backend created it), or None.
        self.shared_dir = shared_dir
        self.job_id = job_id
        self.containers = containers
        self.token = token or secrets.token_hex(16)
        self.report_path = report_path
        #: Rewrite the report file while running (YARN: the cluster may end the AM before it
        #: writes a final one). Off where the file's presence means "finished" (local).
        self.snapshots = snapshots
        self.submitted_at = submitted_at or time.time()
        self.started_at = time.time()
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.tasks: Dict[Tuple[str, int], Task] = {(t.role, t.index): Task(t) for t in plan.tasks}
        self.executors: Dict[str, Executor] = {}
        self.seq = 0
        self.attempt = 0  # the gang's attempt (gang policy); tasks keep their own too
        self.gang_restarts = 0
        self.phase = Phase.STARTING
        self.state = JobState.RUNNING
        self.diagnostics = ""
        self.gang_started = time.monotonic()
        self.gang_ready_seconds: Optional[float] = None
        self.cluster: Optional[Dict[str, List[str]]] = None
        # Where the first executors are requested with the application (YARN), none are launched here.
        self.to_launch: List[Tuple[str, int]] = (
            [] if containers.prelaunched else [t.key for t in self.tasks.values()])
        self.finished_at: Optional[float] = None
        self.url = ""
        self.events: List[Event] = []
        #: Set from a signal handler; the main loop acts on it (handlers must not take locks).
        self.kill_requested: Optional[str] = None
        #: The signal that ended the job, if any: YARN may then record FAILED whatever this AM
        #: asks for (the SIGTERM reaches skein's AM too), so the last log line claims no verdict.
        self.signalled: Optional[str] = None
        #: timeouts.lost_after_seconds; executors are told to call every third of it (at most
        #: HEARTBEAT_SECONDS), so that a silence that long is three missed calls.
        self.executor_lost_seconds = plan.job.timeouts.lost_after_seconds
        self.heartbeat_seconds = min(HEARTBEAT_SECONDS, self.executor_lost_seconds / 3)
        self.gpu_idle_seconds = idle_seconds_setting()
        self.gpu_sample_seconds = sample_seconds_setting()
        try:
            self.user: Optional[str] = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        except (KeyError, OSError):  # a uid without a passwd entry (some containers)
            self.user = None
        #: SIGTERM -> SIGKILL for every stop of a task (sent with each instruction that stops one).
        self.grace = float(plan.job.timeouts.stop_grace_seconds)

    # ------------------------------------------------------------------ utils
    def _decide(self, msg: str, *args: Any, level: int = logging.INFO) -> None:
        """Log a decision of the AM and keep it for the report's ``events`` (what CI sees)."""
        log.log(level, msg, *args)
        self.events.append(Event(time=round(time.time(), 3), message=msg % args if args else msg))
        del self.events[:-MAX_EVENTS]

    def _send(self, ex: Executor, op: str, **kw: Any) -> None:
        self.seq += 1
        ex.instructions.append({"seq": self.seq, "op": op, **kw})
        self.changed.notify_all()

    def _live_executor(self, ts: Task) -> Optional[Executor]:
        ex = self.executors.get(ts.executor) if ts.executor else None
        return ex if ex and ex.alive else None

    def executor_env(self, task: TaskPlan) -> Dict[str, str]:
        """What the containers must put in an executor's environment."""
        return {"SUBM_AM_URL": self.url, "SUBM_TOKEN": self.token, "SUBM_JOB_ID": self.job_id,
                "SUBM_ROLE": task.role, "SUBM_INDEX": str(task.index), "SUBM_STOP_GRACE": f"{self.grace:g}"}

    # -------------------------------------------------------- executor calls
    def on_register(self, body: Dict[str, Any]) -> Dict[str, Any]:
        with self.lock:
            ex_id, role = str(body["executor"]), str(body["role"])
            ex = self.executors.get(ex_id)
            if ex is None:
                ex = self.executors[ex_id] = Executor(ex_id, role)
            ex.info.update({k: body.get(k) for k in ("pid", "container", "node_http", "log_dirs", "host")})
            self.containers.registered(ex_id, ex.info)
            ex.last_seen = time.monotonic()
            if self._finishing or ex.lost:
                self._send(ex, "exit", code=0)
                return {"index": body.get("index")}
            ts = self.tasks.get(ex.task) if ex.task else None
            if ts is None:
                ts = self._assign(ex, body.get("index"))
            if ts is None:
                self._decide("executor %s of role %s has no task to run; telling it to leave", ex_id, role)
                self._send(ex, "exit", code=0)
                return {"index": None}
            ts.address = f"{body['host']}:{int(body['port'])}"
            ts.state = TaskState.REGISTERED
            ts.failed_launches = 0
            ex.attempt, ex.registered = ts.attempt, True
            ts.log = self.containers.log_location(ts.plan, ex_id)
            log.info("%s registered at %s (attempt %d, executor %s)", ts.plan.id, ts.address, shown(ts.attempt), ex_id)
            self._maybe_run()
            return {"index": ts.plan.index, "attempt": ts.attempt, "heartbeat": self.heartbeat_seconds}

    def _assign(self, ex: Executor, hint: Any) -> Optional[Task]:
        candidates = [ts for ts in self.tasks.values()
                      if ts.plan.role == ex.role and self._live_executor(ts) is None]
        try:
            wanted = int(hint) if hint is not None else None
        except ValueError:
            wanted = None
        candidates.sort(key=lambda ts: (ts.plan.index != wanted, ts.plan.index))
        if not candidates:
            return None
        ts = candidates[0]
        ts.executor, ex.task = ex.id, ts.key
        if ts.key in self.to_launch:  # an executor we did not launch for it (e.g. YARN instances)
            self.to_launch.remove(ts.key)
        return ts

    def on_started(self, body: Dict[str, Any]) -> None:
        with self.lock:
            ex = self.executors.get(str(body["executor"]))
            if ex:
                ex.info["child_pid"] = body.get("pid")

    def on_exit(self, body: Dict[str, Any]) -> None:
        with self.lock:
            ex = self.executors.get(str(body["executor"]))
            if ex is None or ex.task is None:
                return
            ts = self.tasks[ex.task]
            attempt, code = body.get("attempt"), int(body["exit_code"])
            if attempt == ts.attempt and ts.state in (TaskState.STOPPED, TaskState.KILLED) and ts.exit_code is None:
                ts.exit_code = code  # stopped at the job's end: 128+15 exited on SIGTERM, 137 needed SIGKILL
                return
            if attempt != ts.attempt or ts.state not in (TaskState.RUNNING, TaskState.REGISTERED):
                return  # an older attempt, stopped on purpose
            # The end of a failed attempt's stderr: sent by the executor where it could read it,
            # else read by the backend (local Docker); and where people can read all of it.
            tail = body.get("stderr_tail")
            if code != 0 and not body.get("stopped") and not isinstance(tail, str):
                tail = self.containers.stderr_tail(ts.plan, ex.id)
            where = self.containers.stderr_location(ts.plan, ex.id) or str(body.get("stderr_log") or "")
            self._task_ended(ts, code, stopped=bool(body.get("stopped")), stderr=(where, tail or ""))

    def on_gpu(self, body: Dict[str, Any]) -> None:
        """GPU samples of an executor's task (utilization %, memory used)."""
        with self.lock:
            ex = self.executors.get(str(body["executor"]))
            if ex is None or ex.task is None:
                return
            ts = self.tasks[ex.task]
            add_samples(ts.gpu, body.get("samples"))
            if not ts.gpu_idle_flagged and ts.gpu.idle_now_seconds >= self.gpu_idle_seconds:
                ts.gpu_idle_flagged = True
                self._decide("%s holds %d GPU(s) at 0 %% utilization for %.0f s", ts.plan.id,
                             len(ts.gpu.devices), ts.gpu.idle_now_seconds, level=logging.WARNING)

    def on_goodbye(self, body: Dict[str, Any]) -> None:
        """An executor leaves for good (after an ``exit`` instruction)."""
        with self.lock:
            ex = self.executors.get(str(body["executor"]))
            if ex is not None and self._finishing:
                ex.alive = False
                self.changed.notify_all()

    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + wait
        with self.lock:
            while True:
                ex = self.executors.get(executor)
                if ex is not None and ex.lost:  # back from a silence the AM took for its death
                    return [{"seq": max(after, self.seq) + 1, "op": "exit", "code": 1}]
                pending = [i for i in ex.instructions if i["seq"] > after] if ex else []
                if pending or time.monotonic() >= deadline:
                    if ex:
                        ex.instructions = pending
                        ex.last_seen = time.monotonic()
                    return pending
                self.changed.wait(timeout=max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------ decisions
    def _maybe_run(self) -> None:
        """Start every registered task whose peers are all registered."""
        if self._finishing:
            return
        waiting = [ts for ts in self.tasks.values() if ts.state == TaskState.REGISTERED]
        if not waiting:
            return
        if self.phase == Phase.STARTING:
            if any(ts.state != TaskState.REGISTERED for ts in self.tasks.values()):
                return
            # The first time: seconds since submission, the number the report's timings (and the
            # summary line) carry; after a restart: seconds since that restart.
            if self.gang_ready_seconds is None:
                self.gang_ready_seconds = round(time.time() - self.submitted_at, 3)
                since = f"{self.gang_ready_seconds:.1f} s after submission"
            else:
                since = f"{time.monotonic() - self.gang_started:.1f} s after the restart"
            self._decide("gang ready: all %d tasks registered (attempt %d), %s",
                         len(self.tasks), shown(self.attempt), since)
            self.phase = Phase.RUNNING
            self._save_state()
        self.cluster = self.plan.cluster_spec({ts.key: ts.address for ts in self.tasks.values()})
        hold = self.plan.framework.reuses_port
        for ts in waiting:
            ex = self._live_executor(ts)
            if ex is None:
                continue
            env = self.plan.task_env(ts.plan, self.cluster, self.job_id, ts.attempt, self.shared_dir)
            header = (f"[subm] job={self.job_id} role={ts.plan.role} index={ts.plan.index} "
                      f"attempt={shown(ts.attempt)} host={ts.host} container={ex.info.get('container') or ex.id} "
                      f"command: {ts.plan.command}")
            ts.state = TaskState.RUNNING
            self._send(ex, "run", attempt=ts.attempt, command=ts.plan.command, env=env,
                       hold_port=hold, header=header, gpus=ts.plan.resources.gpus,
                       gpu_sample_seconds=self.gpu_sample_seconds)

    def _task_ended(self, ts: Task, code: int, stopped: bool = False, why: str = "",
                    stderr: Tuple[str, str] = ("", "")) -> None:
        """``stderr``: where the task's stderr is, and its last lines (for a failure)."""
        ts.exit_code = code
        if code == 0 and not stopped:
            ts.state = TaskState.SUCCEEDED
            self._decide("%s succeeded (attempt %d)", ts.plan.id, shown(ts.attempt))
            if all(t.state == TaskState.SUCCEEDED for t in self.tasks.values() if t.plan.tracked):
                untracked = [t.plan.id for t in self.tasks.values() if t.state == TaskState.RUNNING]
                self._decide("every tracked task succeeded%s",
                             f"; stopping untracked tasks: {', '.join(untracked)}" if untracked else "")
                self._finish(JobState.SUCCEEDED, "")
            return
        ts.state = TaskState.FAILED
        stderr_log, tail = stderr
        tail = quote_tail(tail)
        # Name the log that holds the error: its stderr, where known.
        where = f"; its stderr: {stderr_log}" if stderr_log else f"; log: {ts.log}" if ts.log else ""
        reason = why or f"exit code {code}"
        last = f"; last stderr line: {tail.splitlines()[-1].strip()}" if tail else ""
        self._decide("%s failed with %s (attempt %d)%s%s", ts.plan.id, reason, shown(ts.attempt), where, last,
                     level=logging.WARNING)
        if tail:
            log.warning("last lines of %s's stderr (attempt %d):\n%s", ts.plan.id, shown(ts.attempt), tail)
        policy, limit = self.plan.job.restart.policy, self.plan.job.restart.max_restarts
        failure = f"{ts.plan.id} failed with {reason} (attempt {shown(ts.attempt)}){where}"
        quoted = f"\nlast lines of {ts.plan.id}'s stderr:\n{tail}" if tail else ""
        if policy == RestartPolicy.GANG and self.gang_restarts < limit:
            self.gang_restarts += 1
            self._restart_gang(failure)
        elif policy == RestartPolicy.TASK and ts.restarts < limit:
            self._restart_task(ts, failure)
        else:
            self._finish(JobState.FAILED, f"{failure}; job failed ({restarts_spent(self.plan.job.restart)}){quoted}")

    def _restart_gang(self, why: str) -> None:
        self.attempt += 1
        self._decide("restarting the gang: attempt %d of at most %d, because %s",
                     shown(self.attempt), self.plan.job.restart.max_restarts + 1, why)
        self.phase = Phase.STARTING
        self.gang_started = time.monotonic()
        for ts in self.tasks.values():
            ts.attempt = self.attempt
            ts.restarts += 1
            ts.state = TaskState.PENDING
            ts.exit_code = None
            ts.began = time.time()
            ex = self._live_executor(ts)
            if ex is not None:
                self._send(ex, "register", attempt=ts.attempt, grace=self.grace)
            else:
                self._need_executor(ts)
        self._save_state()

    def _restart_task(self, ts: Task, why: str) -> None:
        ts.restarts += 1
        ts.attempt += 1
        ts.state = TaskState.PENDING
        ts.exit_code = None
        ts.began = time.time()
        self._decide("restarting %s alone: its attempt %d of at most %d, because %s", ts.plan.id,
                     shown(ts.attempt), self.plan.job.restart.max_restarts + 1, why)
        ex = self._live_executor(ts)
        if ex is not None:
            self._send(ex, "register", attempt=ts.attempt, grace=self.grace)
        else:
            self._need_executor(ts)
        self._save_state()

    def _need_executor(self, ts: Task) -> None:
        """Have a new executor started for a task whose executor is gone."""
        if self.containers.replaces_lost and not ts.orphaned:
            return  # the cluster manager starts one; it registers like any other
        if ts.key not in self.to_launch:
            self.to_launch.append(ts.key)

    @property
    def _finishing(self) -> bool:
        """True once the verdict is in (the job is finishing or done)."""
        return self.phase in (Phase.FINISHING, Phase.DONE)

    def _finish(self, state: JobState, diagnostics: str, announce: bool = True) -> None:
        if self._finishing:
            return
        self.state, self.diagnostics = state, diagnostics
        self.phase = Phase.FINISHING
        self.finished_at = time.time()
        for ts in self.tasks.values():
            if ts.state in (TaskState.RUNNING, TaskState.REGISTERED, TaskState.PENDING):
                ts.state = TaskState.STOPPED if state != JobState.KILLED else TaskState.KILLED
        for ex in self.executors.values():
            if ex.alive:
                self._send(ex, "exit", code=0, grace=self.grace)
        self.to_launch.clear()
        if announce:
            self._decide("job %s%s", state, f": {diagnostics}" if diagnostics else "")

    def kill(self, why: str = "killed by request") -> None:
        # No "job KILLED" line yet: on YARN a SIGTERM usually means the container itself is
        # being killed, and YARN may record FAILED if it ends us before driver.finish() (the
        # last line, "job ... KILLED after ...", comes once the cluster has taken the verdict).
        with self.lock:
            self._decide("stopping every task: %s", why)
            self._finish(JobState.KILLED, why, announce=False)

    # ------------------------------------------------------------- main loop
    def run(self) -> JobReport:
        """Drive the job to its end; returns the final report."""
        log.info("AM for job %s (%s, %d tasks, restart %s, max_restarts %d) on %s; status at %s",
                 self.job_id, self.plan.job.framework, len(self.tasks), self.plan.job.restart.policy,
                 self.plan.job.restart.max_restarts, self.containers.name, self.url)
        job_deadline = (time.monotonic() + self.plan.job.timeouts.job_seconds
                        if self.plan.job.timeouts.job_seconds else None)
        finishing_since: Optional[float] = None
        told_to_stop: set = set()
        unheard: List[str] = []
        next_snapshot = 0.0
        last_loop = time.monotonic()
        while True:
            self._forgive_stall(time.monotonic() - last_loop)
            last_loop = time.monotonic()
            if self.kill_requested:
                self.kill(self.kill_requested)
                self.kill_requested = None
                # YARN kills the AM's container 250 ms after this SIGTERM: say what became of
                # each task now, before stopping them.
                if self.snapshots:
                    self._write_report()
            if self.snapshots and time.monotonic() >= next_snapshot:
                self._write_report()
                next_snapshot = time.monotonic() + SNAPSHOT_SECONDS
            with self.lock:
                launch = [self.tasks[k] for k in self.to_launch]
                self.to_launch = []
            for ts in launch:
                self._launch(ts)
            for ended in self.containers.poll():
                self._executor_ended(ended.executor, ended.exit_code, ended.diagnostics, ended.role,
                                     ended.started_at, refused=not ended.counts)
            with self.lock:
                silent = self._check_heartbeats()
            for ex_id, why in silent:
                self.containers.lost(ex_id)
                self._executor_ended(ex_id, None, why, lost=True)
            with self.lock:
                now = time.monotonic()
                if self.phase == Phase.STARTING and now - self.gang_started > self.plan.job.timeouts.gang_seconds:
                    self._finish(JobState.FAILED, gang_missing(self.tasks.values(), self.containers,
                                                               self.plan.job.timeouts.gang_seconds, self.attempt))
                if job_deadline and now > job_deadline and not self._finishing:
                    self._finish(JobState.FAILED, f"the job ran longer than timeouts.job_seconds "
                                           f"({self.plan.job.timeouts.job_seconds} s)")
                if self.phase == Phase.FINISHING:
                    finishing_since = finishing_since or now
                    alive = [e for e in self.executors.values() if e.alive]
                    if not alive or now - finishing_since > self.grace + STOP_MARGIN_SECONDS:
                        break
                    # An executor that never registered polls no instructions, so it cannot
                    # hear "exit" (e.g. after a gang timeout): stop it now instead of waiting.
                    unheard = [e.id for e in alive if not e.info and e.id not in told_to_stop]
            for ex_id in unheard if self.phase == Phase.FINISHING else ():
                told_to_stop.add(ex_id)
                self.containers.kill(ex_id)
            time.sleep(0.05)
        for ex in [e for e in self.executors.values() if e.alive]:
            self.containers.kill(ex.id)
        self.containers.close()
        with self.lock:
            self.phase = Phase.DONE
            report = self.report()
            self.changed.notify_all()
        self._write_report(report)
        self.containers.finish(self.state, self.diagnostics)
        if self.signalled:
            log.info("job %s stopped after %d attempt(s) in %.1f s: the ApplicationMaster received %s; "
                     "the cluster records the final state", self.job_id, report.attempts,
                     report.timings.total_seconds, self.signalled)
        else:
            log.info("job %s %s after %d attempt(s) in %.1f s", self.job_id, self.state,
                     report.attempts, report.timings.total_seconds)
        return report

    def _write_report(self, report: Optional[JobReport] = None) -> None:
        """Write the report file, if the AM has one (see :mod:`.reporting`)."""
        if self.report_path:
            write_report(self.report_path, report or self.report(), self.plan)

    def _launch(self, ts: Task) -> None:
        try:
            ex_id = self.containers.launch(ts.plan, self.executor_env(ts.plan))
        except Exception as exc:  # the cluster refused: the job cannot run
            log.exception("could not start an executor for %s", ts.plan.id)
            with self.lock:
                self._finish(JobState.FAILED, f"could not start {ts.plan.id}: {exc}")
            return
        with self.lock:
            ex = self.executors.setdefault(ex_id, Executor(ex_id, ts.plan.role))
            ex.task, ts.executor = ts.key, ex_id
            ex.launched_at, ts.orphaned = time.time(), False
            ts.log = self.containers.log_location(ts.plan, ex_id)
        log.info("started executor %s for %s", ex_id, ts.plan.id)

    def _executor_ended(self, ex_id: str, code: Optional[int], diagnostics: str,
                        role: Optional[str] = None, started_at: Optional[float] = None,
                        lost: bool = False, refused: bool = False) -> None:
        """An executor is gone: its container ended (``code``), or it fell silent (``lost``)."""
        with self.lock:
            ex = self.executors.get(ex_id)
            if ex is None:
                if role and not self._finishing:
                    # A container requested with the job (or a replacement the cluster started
                    # itself) ended before its executor registered.
                    ex = self.executors[ex_id] = Executor(ex_id, role, alive=False)
                    self._failed_launch(ex, None, code, diagnostics, started_at, refused)
                return
            if not ex.alive:
                return
            ex.alive = False
            ex.lost = lost
            self.changed.notify_all()
            ts = self.tasks.get(ex.task) if ex.task else None
            if ts is None or ts.executor != ex_id or self._finishing:
                return
            if not ex.registered:
                ts.executor = None
                self._failed_launch(ex, ts, code, diagnostics, started_at or ex.launched_at, refused)
                return
            detail = diagnostics if lost else \
                f"its container ended (exit code {code}{'; ' + diagnostics if diagnostics else ''})"
            if ts.state == TaskState.SUCCEEDED:
                return
            self._decide("executor %s of %s is gone: %s", ex_id, ts.plan.id, detail, level=logging.WARNING)
            ts.executor = None
            ts.orphaned = lost
            if ts.state == TaskState.PENDING and ex.attempt is not None and ex.attempt < ts.attempt:
                # Lost before re-registering for an attempt that a failure already started (say a
                # node with several tasks died): part of that failure, so only a new executor.
                self._need_executor(ts)
                return
            self._task_ended(ts, code if code not in (None, 0) else 1, why=detail)
            if not self._finishing and self._live_executor(ts) is None and ts.state == TaskState.PENDING:
                self._need_executor(ts)

    # ---------------------------------------------------------------- report
    def report(self) -> JobReport:
        with self.lock:
            return build_report(self)
