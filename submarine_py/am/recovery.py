"""Failures and what they cost: a task's failure, a failed launch, a lost AM -> restarts.

Three kinds of fault are no exit code of a task's command:

* an executor that falls silent: a machine that dies closes no connection, and YARN declares
  a silent NodeManager lost only after 10 minutes; executors poll the AM every couple of
  seconds, so a few missed polls mean the executor is gone (``supervision.py`` notices);
* a container that ends before its executor registers (an interpreter or image missing, a
  mount refused, a localized file gone): a failed launch of its task;
* a lost AM: the cluster starts a new one (YARN's next application attempt), which takes the
  job over from the state the earlier one saved.

Each is one failure of a task (or of the gang); what it does to the job is decided by
:class:`~submarine_py.restarts.Restarts` alone. Methods run under the job's lock unless their
docstring says otherwise.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, Tuple

from ..report import JobReport, replace
from ..restarts import Remedy, Restarts
from ..states import JobState, Phase, TaskState
from .diagnostics import quote_stderr
from .job import JobRun
from .records import Task, shown

log = logging.getLogger("subm.am")

#: Launches of one task in a row whose container ended before its executor registered, after
#: which the job fails whatever restarts are left: another container would fail the same way.
MAX_FAILED_LAUNCHES = 3
#: Decisions of an earlier AM kept in the report of the one that takes the job over.
KEPT_EVENTS = 100


class Recovery:
    """Turns failures into restarts of the gang or of a task, or into the job's failure.
    ``save_state`` keeps the attempts where a later AM can read them."""

    def __init__(self, job: JobRun, restarts: Restarts, save_state: Callable[[], None]):
        self.job = job
        self.restarts = restarts
        self.save_state = save_state

    # -- a task failed ----------------------------------------------------------------------
    def task_failed(self, ts: Task, code: int, why: str = "", stderr: Tuple[str, str] = ("", ""),
                    local_rank: Optional[int] = None) -> None:
        """``ts`` failed with ``code`` (``why``: said instead of "exit code N"); ``stderr``:
        where its stderr is, and what the executor sent of it (the error it found, the last
        lines: :func:`.diagnostics.quote_stderr`); ``local_rank``: which of its processes failed."""
        job = self.job
        who = ts.plan.id if local_rank is None else f"{ts.plan.id} (local rank {local_rank})"
        ts.exit_code = code
        ts.state = TaskState.FAILED
        stderr_log, text = stderr
        said = quote_stderr(text)
        quoted = said.quoted(ts.plan.id)
        # Name the log that holds the error: its stderr, where known; and the error itself.
        where = f"; its stderr: {stderr_log}" if stderr_log else f"; log: {ts.log}" if ts.log else ""
        reason = why or f"exit code {code}"
        error = f"; {said.summary()}" if said.summary() else ""
        job.decide("%s failed with %s (attempt %d)%s%s", who, reason, shown(ts.attempt), where, error,
                   level=logging.WARNING)
        if quoted:
            log.warning("%s failed (attempt %d):\n%s", who, shown(ts.attempt), quoted)
        failure = f"{who} failed with {reason} (attempt {shown(ts.attempt)}){where}"
        decision = self.restarts.after_task_failure(job.gang_restarts, ts.restarts)
        if decision.remedy == Remedy.RESTART_GANG:
            job.gang_restarts += 1
            self.restart_gang(failure)
        elif decision.remedy == Remedy.RESTART_TASK:
            self.restart_task(ts, failure)
        else:
            job.finish(JobState.FAILED, f"{failure}; job failed ({decision.why})" + (f"\n{quoted}" if quoted else ""))

    def restart_gang(self, why: str) -> None:
        """Every task again, as the gang's next attempt (executors that live re-register)."""
        job = self.job
        job.attempt += 1
        job.decide("restarting the gang: attempt %d of at most %d, because %s",
                   shown(job.attempt), self.restarts.attempts_at_most, why)
        job.phase = Phase.STARTING
        job.gang_started = time.monotonic()
        for ts in job.tasks.values():
            ts.attempt = job.attempt
            ts.restarts += 1
            self._again(ts)
        self.save_state()

    def restart_task(self, ts: Task, why: str) -> None:
        """The failed task alone, as its next attempt."""
        ts.restarts += 1
        ts.attempt += 1
        self.job.decide("restarting %s alone: its attempt %d of at most %d, because %s", ts.plan.id,
                        shown(ts.attempt), self.restarts.attempts_at_most, why)
        self._again(ts)
        self.save_state()

    def _again(self, ts: Task) -> None:
        ts.state = TaskState.PENDING
        ts.exit_code = None
        ts.began = time.time()
        ex = self.job.live_executor(ts)
        if ex is not None:
            self.job.send(ex, "register", attempt=ts.attempt)
        else:
            self.job.need_executor(ts)

    def replace_if_pending(self, ts: Task) -> None:
        """After a failure that restarted ``ts`` while its executor is gone: start another."""
        if not self.job.finishing and self.job.live_executor(ts) is None and ts.state == TaskState.PENDING:
            self.job.need_executor(ts)

    # -- failed launches --------------------------------------------------------------------
    def failed_launch(self, ex: Any, ts: Optional[Task], code: Optional[int], diagnostics: str,
                      started_at: Optional[float], refused: bool = False, refusal: str = "") -> None:
        """A container ended before its executor registered: a failure of the task it was for
        (``ts``; None: a container of the role, standing for whichever task still has none).
        A ``refusal`` of the node (an untrusted image, a mount not allowed) fails the job at once:
        every container would be refused the same way, whatever restarts are left."""
        job = self.job
        what = (f"its container ended before the executor registered (exit code {code}"
                f"{'; ' + diagnostics if diagnostics else ''}; executor {ex.id})")
        if ts is None:
            spare = [t for t in job.tasks.values() if t.plan.role == ex.role and t.state != TaskState.SUCCEEDED
                     and job.live_executor(t) is None and t.key not in job.to_launch]
            if not spare and not refusal:
                job.decide("a container of role %s: %s; no task was waiting for it", ex.role, what,
                           level=logging.WARNING)
                return
            ts = spare[0] if spare else None
        if refusal:
            who = ts.plan.id if ts is not None else f"role {ex.role}"
            if ts is not None:
                ts.state, ts.exit_code = TaskState.FAILED, code if code not in (None, 0) else 1
            job.decide("%s could not start: %s (executor %s, exit code %s)", who, refusal, ex.id, code,
                       level=logging.WARNING)
            job.finish(JobState.FAILED, f"{who} could not start: {refusal}; job failed (no restart can help)")
            return
        assert ts is not None
        if refused:  # the containers turned it down themselves: no failure of the task
            job.decide("%s: %s: replacing it", ts.plan.id, what, level=logging.WARNING)
            ts.orphaned = True
            job.need_executor(ts)
            return
        if started_at is not None and started_at < ts.began:
            # Started for an attempt that an earlier failure already ended (e.g. every container
            # of a role with a missing interpreter fails at once): part of that failure.
            job.decide("%s: %s; it was started before that task's attempt %d began (part of the failure "
                       "that began it): replacing it", ts.plan.id, what, ts.attempt + 1, level=logging.WARNING)
            job.need_executor(ts)
            return
        ts.failed_launches += 1
        code = code if code not in (None, 0) else 1
        if ts.failed_launches >= MAX_FAILED_LAUNCHES:
            ts.state, ts.exit_code = TaskState.FAILED, code
            job.decide("%s: %s", ts.plan.id, what, level=logging.WARNING)
            job.finish(JobState.FAILED, f"{ts.plan.id} failed to launch {ts.failed_launches} times in a row, "
                                        f"the last: {what}; job failed (a new container would fail the same way)")
            return
        self.task_failed(ts, code, why=what)
        self.replace_if_pending(ts)

    # -- an AM lost ---------------------------------------------------------------------------
    def take_over(self, previous: Optional[JobReport], lost_attempts: int) -> None:
        """Go on with a job whose earlier AM attempt(s) were lost; call before the AM runs.

        ``previous`` is the last state an earlier attempt saved (None when none could be read);
        ``lost_attempts`` how many earlier AM attempts ended without deciding the job's end since.
        The cluster started new containers for this AM (the old attempt's are gone), so the loss
        is one failure of the whole gang under the restart policy, and attempts count on from
        where the earlier AM left them (or, unknown, from one per lost AM attempt).
        """
        job = self.job
        with job.lock:
            # A saved task's attempt (as shown, from 1) -> the AM's own count (from 0).
            before = {(t.role, t.index): replace(t, attempt=t.attempt - 1) for t in (previous.tasks if previous else ())}
            between = max(lost_attempts - 1, 0)  # later lost attempts were each a restart already
            gang_attempt = max([t.attempt for t in before.values()], default=0) + between
            gang_restarts = (previous.attempts - 1 if previous else 0) + between
            why = (f"the ApplicationMaster was lost ({lost_attempts} earlier YARN attempt"
                   f"{'s' if lost_attempts != 1 else ''} ended without a verdict)")
            if previous:
                job.events[:0] = list(previous.events)[-KEPT_EVENTS:]
                job.gang_ready_seconds = previous.timings.gang_ready_seconds
            job.decide("%s; %s", why, f"its last saved state: attempt {shown(gang_attempt - between)}, "
                                      f"{gang_restarts - between} restart(s)" if previous
                       else "no saved state could be read", level=logging.WARNING)
            # Where each task's count stands before this restart.
            for key, ts in job.tasks.items():
                old = before.get(key)
                ts.attempt = old.attempt + between if old else gang_attempt
                ts.restarts = old.restarts + between if old else gang_restarts
                ts.began = time.time()
            job.attempt, job.gang_restarts = gang_attempt, gang_restarts
            decision = self.restarts.after_am_loss(gang_restarts, [ts.restarts for ts in job.tasks.values()])
            if decision.gives_up:  # the counts stay where the earlier AM left them
                job.finish(JobState.FAILED, f"{why}; job failed ({decision.why})")
                return
            for ts in job.tasks.values():
                ts.attempt, ts.restarts = ts.attempt + 1, ts.restarts + 1
            job.attempt, job.gang_restarts = job.attempt + 1, job.gang_restarts + 1
            job.decide("restarting the gang in new containers: attempt %d of at most %d, because %s",
                       shown(job.attempt), self.restarts.attempts_at_most, why)
            self.save_state()
