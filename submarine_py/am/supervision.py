"""Watching tasks and their executors: executors started, their calls (heartbeats, exits, GPU
samples), containers that end, executors that fall silent, tasks that hang.

What a task's end means is said here for success (the job succeeds once every tracked task
has); a failure goes to :class:`~.recovery.Recovery`, which alone decides its cost, with its
cause: the program's (an exit code, a hang) or the cluster's (a container the cluster took
back, a machine gone silent). Methods run under the job's lock unless their docstring says
otherwise.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..plan import TaskPlan
from ..states import Cause, JobState, TaskState
from .containers import Containers
from .gpu_usage import add_samples
from .job import JobRun
from .records import Executor, Quiet, Task, shown
from .recovery import Recovery

log = logging.getLogger("subm.am")

#: An executor calls the AM at least this often: its long poll for instructions returns after it.
HEARTBEAT_SECONDS = 2.0
#: How long the AM waits beyond the job's stop grace for executors to report and leave
#: (they report within moments of their task's exit; this covers a slow or loaded node).
STOP_MARGIN_SECONDS = 5
#: A task silent for this share of timeouts.hang_seconds is named in the AM's decisions (once per
#: attempt) and in ``subm status``.
HANG_WARNING_SHARE = 0.5


class Supervision:
    """Executors and their tasks while they run. ``executor_env`` gives what a container must put
    in the environment of an executor started for a task (the AM's address, the job's token)."""

    def __init__(self, job: JobRun, containers: Containers, recovery: Recovery, *,
                 executor_env: Callable[[TaskPlan], Dict[str, str]], lost_after_seconds: float,
                 gpu_idle_seconds: float, hang_seconds: Optional[float] = None,
                 task_done: Callable[[Task], None] = lambda ts: None):
        self.job = job
        self.containers = containers
        self.recovery = recovery
        self.executor_env = executor_env
        #: timeouts.lost_after_seconds: a silence this long declares an executor lost.
        self.lost_after_seconds = lost_after_seconds
        self.gpu_idle_seconds = gpu_idle_seconds
        #: timeouts.hang_seconds: a tracked task that shows no sign of work this long has hung (None: off).
        self.hang_seconds = hang_seconds
        #: Gives back the container of a task that succeeded (``Allocation.task_done``).
        self.task_done = task_done

    # -- executors' calls (each takes the lock) ----------------------------------------------
    def heard_from(self, executor: str, quiet: Optional[float] = None, attempt: Optional[int] = None) -> None:
        """Any call of an executor is a heartbeat. Its polls also say, while its task runs, for
        how long the task (``attempt``) has printed nothing (``quiet`` seconds)."""
        with self.job.lock:
            ex = self.job.executors.get(executor)
            if ex is not None:
                ex.last_seen = time.monotonic()
                if quiet is not None and attempt is not None:
                    ex.quiet = Quiet(max(0.0, quiet), attempt)

    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]:
        """The executor's instructions after ``after`` (its long poll: waits up to ``wait`` s)."""
        job = self.job
        deadline = time.monotonic() + wait
        with job.lock:
            while True:
                ex = job.executors.get(executor)
                if ex is not None and ex.lost:  # back from a silence the AM took for its death
                    return [{"seq": max(after, job.seq) + 1, "op": "exit", "code": 1}]
                if ex is None or self._superseded(ex):
                    # The AM does not know it (or its task has another executor): it leaves at
                    # once, its task stopped, rather than poll on holding its container (issue 32).
                    return [{"seq": max(after, job.seq) + 1, "op": "exit", "code": 0}]
                pending = [i for i in ex.instructions if i["seq"] > after] if ex else []
                if pending or time.monotonic() >= deadline:
                    if ex:
                        ex.instructions = pending
                        ex.last_seen = time.monotonic()
                    return pending
                job.changed.wait(timeout=max(0.0, deadline - time.monotonic()))

    def _superseded(self, ex: Executor) -> bool:
        """A registered executor whose task the AM gave to another (told to leave now)."""
        ts = self.job.tasks.get(ex.task) if ex.task else None
        if not ex.alive or not ex.registered or ts is None or ts.executor == ex.id:
            return False
        ex.alive, ex.task = False, None
        self.job.decide("executor %s polls for %s, which has executor %s: telling it to leave", ex.id, ts.plan.id,
                        ts.executor, level=logging.WARNING)
        return True

    def on_started(self, body: Dict[str, Any]) -> None:
        with self.job.lock:
            ex = self.job.executors.get(str(body["executor"]))
            if ex:
                ex.info["child_pid"] = body.get("pid")
                ex.info["child_pids"] = body.get("pids") or [body.get("pid")]

    def _task_of(self, body: Dict[str, Any]) -> Tuple[Optional[Executor], Optional[Task]]:
        """The executor a call names and the task it runs; (ex or None, None) when it runs none."""
        ex = self.job.executors.get(str(body["executor"]))
        if ex is None or ex.task is None:
            return ex, None
        return ex, self.job.tasks[ex.task]

    def on_exit(self, body: Dict[str, Any]) -> None:
        """The task's command exited (``POST /v1/exit``)."""
        job = self.job
        with job.lock:
            ex, ts = self._task_of(body)
            if ts is None:
                return
            attempt, code = body.get("attempt"), int(body["exit_code"])
            if attempt == ts.attempt and ts.state in (TaskState.STOPPED, TaskState.KILLED) and ts.exit_code is None:
                ts.exit_code = code  # stopped at the job's end: 128+15 exited on SIGTERM, 137 needed SIGKILL
                return
            if attempt != ts.attempt or ts.state not in (TaskState.RUNNING, TaskState.REGISTERED):
                return  # an older attempt, stopped on purpose
            # The end of a failed attempt's stderr: sent by the executor where it could read it,
            # else read by the backend (local Docker); and where people can read all of it.
            tail = body.get("stderr_tail")
            stopped = bool(body.get("stopped"))
            if code != 0 and not stopped and not isinstance(tail, str):
                tail = self.containers.stderr_tail(ts.plan, ex.id)
            where = self.containers.stderr_location(ts.plan, ex.id) or str(body.get("stderr_log") or "")
            hung = body.get("hung")
            if code == 0 and not stopped:
                self.task_succeeded(ts)
            elif job.is_tensorboard(ts):
                self.tensorboard_failed(ts, code, where, tail or "")
            elif isinstance(hung, (int, float)) and ts.hang_stopped == ts.attempt:  # stopped as hung, as told
                self.recovery.task_hung(ts, code, float(hung), stderr=(where, tail or ""),
                                        stdout=str(body.get("stdout_tail") or ""))
            else:  # of a task of several processes: the one that failed first (the others were stopped)
                rank = body.get("local_rank")
                self.recovery.task_failed(ts, code, stderr=(where, tail or ""),
                                          local_rank=rank if isinstance(rank, int) else None)

    def on_gpu(self, body: Dict[str, Any]) -> None:
        """GPU samples of an executor's task (utilization %, memory used)."""
        job = self.job
        with job.lock:
            ex, ts = self._task_of(body)
            if ts is None:
                return
            add_samples(ts.gpu, body.get("samples"))
            if ts.gpu.peak_utilization > 0:  # busy at its last sample, or that long before it
                busy_at = time.monotonic() - ts.gpu.idle_now_seconds
                ts.gpu_busy_at = max(ts.gpu_busy_at or busy_at, busy_at)
            if not ts.gpu_idle_flagged and ts.gpu.idle_now_seconds >= self.gpu_idle_seconds:
                ts.gpu_idle_flagged = True
                job.decide("%s holds %d GPU(s) at 0 %% utilization for %.0f s", ts.plan.id,
                           len(ts.gpu.devices), ts.gpu.idle_now_seconds, level=logging.WARNING)

    def on_goodbye(self, body: Dict[str, Any]) -> None:
        """An executor leaves for good (after an ``exit`` instruction)."""
        job = self.job
        with job.lock:
            ex = job.executors.get(str(body["executor"]))
            if ex is not None and job.finishing:
                ex.alive = False
                job.changed.notify_all()

    # -- tasks' ends --------------------------------------------------------------------------
    def task_succeeded(self, ts: Task) -> None:
        job = self.job
        ts.exit_code = 0
        ts.state = TaskState.SUCCEEDED
        job.decide("%s succeeded (attempt %d)", ts.plan.id, shown(ts.attempt))
        if job.all_tracked_succeeded():
            untracked = [t.plan.id for t in job.tasks.values() if t.state == TaskState.RUNNING]
            job.decide("every tracked task succeeded%s",
                       f"; stopping untracked tasks: {', '.join(untracked)}" if untracked else "")
            job.finish(JobState.SUCCEEDED, "")
        else:
            self.task_done(ts)

    def tensorboard_failed(self, ts: Task, code: int, stderr_log: str, tail: str) -> None:
        """The job's TensorBoard exited by itself: it watches the job and never decides it, so
        its failure is said (with its last stderr line: "No module named tensorboard" in a
        YARN environment without it), neither restarted nor counted; the job goes on without it."""
        ts.exit_code = code
        ts.state = TaskState.FAILED
        last = tail.strip().splitlines()[-1].strip() if tail.strip() else ""
        self.job.decide("%s (TensorBoard) exited with code %d (attempt %d); the job goes on without it%s%s",
                        ts.plan.id, code, shown(ts.attempt), f"; its stderr: {stderr_log}" if stderr_log else "",
                        f"; last stderr line: {last}" if last else "", level=logging.WARNING)

    # -- executors started and gone (the main loop calls these, without the lock) ------------
    def launch(self, ts: Task) -> None:
        """Start an executor for ``ts``; a refusal of the cluster fails the job.

        The main loop calls it without the lock, after allocation chose ``ts``: an executor may
        register for ``ts`` meanwhile (a container asked for with the application comes up and
        takes its task itself). A task that has its executor gets no second one: none is asked
        for, and a container asked for while the other registered goes back at once (never two
        executors for one task, nor a container the AM does not track: issue 32)."""
        job = self.job
        with job.lock:
            if job.finishing or job.live_executor(ts) is not None:
                return
        try:
            ex_id = self.containers.launch(ts.plan, self.executor_env(ts.plan))
        except Exception as exc:  # the cluster refused: the job cannot run
            log.exception("could not start an executor for %s", ts.plan.id)
            with job.lock:
                job.finish(JobState.FAILED, f"could not start {ts.plan.id}: {exc}")
            return
        with job.lock:
            ex = job.executors.get(ex_id)
            current = job.live_executor(ts)
            if ex is not None and ex.task is not None and ex.task != ts.key and ex.alive:
                # Its executor registered already and took another task that had none: it is
                # used; ``ts`` still needs one, unless its own came up meanwhile.
                if current is None:
                    job.need_executor(ts)
                return
            # Came up before this answer and was told to leave (its container given back, or no
            # task for it then): ``ts`` needs another.
            gone = ex is not None and (not ex.alive or (bool(ex.info) and ex.task is None))
            spare = job.finishing or gone or (current is not None and current.id != ex_id)
            if spare:
                if gone and current is None and not job.finishing:
                    job.need_executor(ts)
                job.executors[ex_id] = ex = ex or Executor(ex_id, ts.plan.role, alive=False)
                if ex.alive:
                    ex.alive, ex.task = False, None
                    job.send(ex, "exit", code=0)
                if current is not None and not job.finishing:
                    job.decide("%s found its executor (%s) while container %s was asked for it: giving that "
                               "container back", ts.plan.id, current.id, ex_id)
            else:
                ex = job.executors.setdefault(ex_id, Executor(ex_id, ts.plan.role))
                ex.task, ts.executor = ts.key, ex_id
                ex.launched_at = time.time()
                ts.log = self.containers.log_location(ts.plan, ex_id)
        if spare:
            self.containers.kill(ex_id)
            return
        log.info("started executor %s for %s", ex_id, ts.plan.id)

    def executor_ended(self, ex_id: str, code: Optional[int], diagnostics: str,
                       role: Optional[str] = None, started_at: Optional[float] = None,
                       lost: bool = False, refused: bool = False, refusal: str = "",
                       cause: Optional[Cause] = None) -> None:
        """An executor is gone: its container ended (``code``), or it fell silent (``lost``: its
        machine, the cluster's fault); ``refusal``: the node's refusal to launch it (see
        ``Ended.refusal``). ``cause``: the cluster's, where the cluster said it took the
        container itself (preempted, its node lost); None: the exit code says."""
        job = self.job
        taken = Cause.NODE_LOST if lost else cause if cause is not None and cause.is_cluster and not refused else None
        with job.lock:
            ex = job.executors.get(ex_id)
            if ex is None:
                if role and not job.finishing:
                    # A container requested with the job (or a replacement the cluster started
                    # itself) ended before its executor registered.
                    ex = job.executors[ex_id] = Executor(ex_id, role, alive=False)
                    if taken:
                        self.recovery.container_taken(ex, None, taken, diagnostics)
                    else:
                        self.recovery.failed_launch(ex, None, code, diagnostics, started_at, refused, refusal)
                return
            if not ex.alive:
                return
            ex.alive = False
            ex.lost = lost
            job.changed.notify_all()
            ts = job.tasks.get(ex.task) if ex.task else None
            if ts is None or ts.executor != ex_id or job.finishing:
                return
            if not ex.registered:
                ts.executor = None
                if taken:
                    self.recovery.container_taken(ex, ts, taken, diagnostics)
                else:
                    self.recovery.failed_launch(ex, ts, code, diagnostics, started_at or ex.launched_at, refused,
                                                refusal)
                return
            said = "; ".join(x for x in (f"exit code {code}" if code is not None else "", diagnostics) if x)
            detail = diagnostics if lost else f"its container ended ({said or 'exit code unknown'})"
            if ts.state == TaskState.SUCCEEDED:
                return
            job.decide("executor %s of %s is gone: %s", ex_id, ts.plan.id, detail, level=logging.WARNING)
            ts.executor = None
            if ts.state == TaskState.PENDING and ex.attempt is not None and ex.attempt < ts.attempt:
                # Lost before re-registering for an attempt that a failure already started (say a
                # node with several tasks died): part of that failure, so only a new executor.
                job.need_executor(ts)
                return
            if taken:
                self.recovery.task_taken(ts, taken, detail, code)
            else:
                self.recovery.task_failed(ts, code if code not in (None, 0) else 1, why=detail)
            self.recovery.replace_if_pending(ts)

    # -- silences --------------------------------------------------------------------------------
    def silent_executors(self) -> List[Tuple[str, str]]:
        """Executors silent for too long: (executor id, why)."""
        job = self.job
        if job.finishing:
            return []
        now, out = time.monotonic(), []
        for ex in job.executors.values():
            silence = now - ex.last_seen
            if ex.alive and ex.registered and silence > self.lost_after_seconds:
                ts = job.tasks.get(ex.task) if ex.task else None
                where = f" on {ts.host}" if ts is not None and ts.host else ""
                out.append((ex.id, f"no heartbeat from its executor{where} for {silence:.1f} s (its machine may "
                                   f"be down): declared lost, its container released"))
        return out

    # -- hangs -----------------------------------------------------------------------------------
    def check_hangs(self) -> None:
        """Each tracked task that has shown no sign of work for timeouts.hang_seconds (printed
        nothing, used none of its sampled GPUs) has hung: its executor is told to stop it, and
        reports its end as the task's failure (:meth:`on_exit`). Untracked tasks (TensorFlow's
        ``ps``) are not watched: serving others, they print nothing for hours."""
        job, limit = self.job, self.hang_seconds
        if not limit or job.finishing:
            return
        now = time.monotonic()
        for ts in job.tasks.values():
            if not ts.plan.tracked or ts.hang_stopped == ts.attempt:
                continue
            ex = job.live_executor(ts)
            quiet = ts.quiet_for(ex, now)
            if ex is None or quiet is None:
                continue
            gpus = " and used no GPU" if ts.gpu_busy_at is not None or ts.gpu.samples else ""
            if quiet >= limit:
                ts.hang_stopped = ts.attempt
                job.decide("%s printed nothing%s for %.0f s (timeouts.hang_seconds %s): stopping it as hung "
                           "(attempt %d)", ts.plan.id, gpus, quiet, limit, shown(ts.attempt), level=logging.WARNING)
                job.send(ex, "hung", attempt=ts.attempt, quiet=round(quiet, 1))
            elif quiet >= limit * HANG_WARNING_SHARE and ts.quiet_warned != ts.attempt:
                ts.quiet_warned = ts.attempt
                job.decide("%s has printed nothing%s for %.0f s of timeouts.hang_seconds %s (attempt %d)",
                           ts.plan.id, gpus, quiet, limit, shown(ts.attempt), level=logging.WARNING)
