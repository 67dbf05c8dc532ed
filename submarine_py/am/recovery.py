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
:class:`~submarine_py.restarts.Restarts` alone, from its cause: the program's (its command
failed, it hung) spend ``max_restarts``; the cluster's (YARN preempted its container, its node
was lost) spend ``max_cluster_restarts``. Methods run under the job's lock unless their
docstring says otherwise.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..report import JobReport, replace
from ..restarts import Decision, Remedy, Restarts, Spent
from ..states import Cause, JobState, Phase, RestartPolicy, TaskState
from .diagnostics import quote_stderr, quote_tail
from .elastic import Elasticity
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

    def __init__(self, job: JobRun, restarts: Restarts, save_state: Callable[[], None],
                 give_back: Callable[[str], None] = lambda why: None):
        self.job = job
        self.restarts = restarts
        self.save_state = save_state
        #: Gives every container of the gang back and queues the job (``Allocation.give_back``).
        self.give_back = give_back
        #: An elastic job's world: when it shrinks instead of restarting for a loss, and which
        #: failures wait for word of a loss (:mod:`.elastic`).
        self.elasticity = Elasticity(job, self.resize)

    # -- a task failed ----------------------------------------------------------------------
    def task_failed(self, ts: Task, code: int, why: str = "", stderr: Tuple[str, str] = ("", ""),
                    local_rank: Optional[int] = None, cause: Cause = Cause.FAILED) -> None:
        """``ts`` failed with ``code`` (``why``: said instead of "exit code N"); ``stderr``:
        where its stderr is, and what the executor sent of it (the error it found, the last
        lines: :func:`.diagnostics.quote_stderr`); ``local_rank``: which of its processes failed;
        ``cause``: the program's (``FAILED``, ``HUNG``)."""
        job = self.job
        if self.spare_gone(ts, f"ended ({why or f'exit code {code}'})"):
            return
        who = ts.plan.id if local_rank is None else f"{ts.plan.id} (local rank {local_rank})"
        ts.exit_code = code
        ts.state, ts.cause = TaskState.FAILED, cause
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
        if self.elasticity.hold(ts.key, ts.attempt, lambda: self._after_failure(ts, failure, quoted, cause)):
            return
        self._after_failure(ts, failure, quoted, cause)

    def _after_failure(self, ts: Task, failure: str, quoted: str, cause: Cause) -> None:
        decision = self.restarts.after(cause, *self.spent(ts))
        if not decision.gives_up:
            self.restart(ts, decision, failure, cause)
        else:
            self.job.finish(JobState.FAILED, f"{failure}; job failed ({decision.why})" + (f"\n{quoted}" if quoted else ""))

    def spent(self, ts: Task) -> Tuple[Spent, Spent]:
        """The restarts so far of the gang and of ``ts`` (what :meth:`Restarts.after` weighs)."""
        job = self.job
        resized = Cause.RESIZED
        return (Spent(job.gang_restarts, job.gang_cluster_restarts, job.restarts_by_cause.get(resized, 0)),
                Spent(ts.restarts, ts.cluster_restarts, ts.restarts_by_cause.get(resized, 0)))

    def resize(self, why: str) -> None:
        """An elastic gang restarts with a new world, bigger (containers granted) or smaller (a
        member taken by the cluster): its doing, so no budget is spent (``Cause.RESIZED``).
        The world is chosen when the gang starts again (:meth:`.elastic.Elasticity.start_world`)."""
        job = self.job
        job.restarts_by_cause[Cause.RESIZED] = job.restarts_by_cause.get(Cause.RESIZED, 0) + 1
        job.gang_restarts += 1
        self.restart_gang(why, Cause.RESIZED)

    def restart(self, ts: Task, decision: Decision, why: str, cause: Cause) -> None:
        """Carry out a decision to restart the gang or ``ts`` alone, counting it for ``cause``."""
        job = self.job
        job.restarts_by_cause[cause] = job.restarts_by_cause.get(cause, 0) + 1
        if decision.remedy == Remedy.RESTART_GANG:
            job.gang_restarts += 1
            job.gang_cluster_restarts += cause.is_cluster
            self.restart_gang(why, cause)
        else:
            self.restart_task(ts, why, cause)

    def _budget(self, cause: Cause, cluster_spent: int) -> str:
        """The words a restart's decision gives its budget: attempts at most (the program's
        failures), or this restart of ``max_cluster_restarts`` (the cluster's faults)."""
        if not cause.spends:
            return " (an elastic world resized: no restart budget spent)"
        if cause.is_cluster:
            return (f" (the cluster's fault: restart {cluster_spent} of at most {self.restarts.max_cluster_restarts} "
                    f"for the cluster's faults, no max_restarts spent)")
        return f" of at most {self.restarts.attempts_at_most + cluster_spent}"

    def restart_gang(self, why: str, cause: Cause = Cause.FAILED) -> None:
        """Every task again, as the gang's next attempt (executors that live re-register)."""
        job = self.job
        job.attempt += 1
        job.decide("restarting the gang: attempt %d%s, because %s",
                   shown(job.attempt), self._budget(cause, job.gang_cluster_restarts), why)
        job.phase = Phase.STARTING
        job.start_gang_clock()
        for ts in job.tasks.values():
            ts.attempt = job.attempt
            ts.restarts += 1
            ts.restarts_by_cause[cause] = ts.restarts_by_cause.get(cause, 0) + 1
            self._again(ts)
        self.save_state()

    def restart_task(self, ts: Task, why: str, cause: Cause = Cause.FAILED) -> None:
        """The failed task alone, as its next attempt."""
        ts.restarts += 1
        ts.restarts_by_cause[cause] = ts.restarts_by_cause.get(cause, 0) + 1
        ts.attempt += 1
        self.job.decide("restarting %s alone: its attempt %d%s, because %s", ts.plan.id,
                        shown(ts.attempt), self._budget(cause, ts.cluster_restarts), why)
        self._again(ts)
        self.save_state()

    def _again(self, ts: Task) -> None:
        ts.state = TaskState.PENDING
        ts.exit_code, ts.cause = None, None
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

    # -- the cluster's faults and hangs -------------------------------------------------------
    def task_taken(self, ts: Task, cause: Cause, why: str, code: Optional[int] = None) -> None:
        """The cluster ended ``ts``'s attempt itself (``cause``: preempted, node lost): no failure
        of the program, so a restart spends ``max_cluster_restarts``. ``why``: what the cluster
        said; ``code``: YARN's exit status, where known."""
        job = self.job
        if self.spare_gone(ts, f"was {_taken_words(cause)}: {why}"):
            return
        ts.state, ts.cause, ts.exit_code = TaskState.FAILED, cause, code
        taken = f"{ts.plan.id} was {_taken_words(cause)} (attempt {shown(ts.attempt)}): {why}"
        job.decide("%s", taken, level=logging.WARNING)
        if self.elasticity.shrinks(ts.key):
            left = len(job.world) - 1
            absorbed = self.elasticity.absorbed()
            if absorbed:
                job.decide("the failure of %s came of that loss: no restart spent for it", ", ".join(absorbed))
            self.resize(f"{taken}; shrinking the world from {len(job.world)} to {left} task(s) (at least "
                        f"{job.plan.job.roles[ts.plan.role].fewest} of {ts.plan.role} remain) instead of waiting "
                        f"for a replacement, which is asked for in the background")
            return
        decision = self.restarts.after(cause, *self.spent(ts))
        if decision.gives_up:
            job.finish(JobState.FAILED, f"{taken}; job failed ({decision.why})")
            return
        self.restart(ts, decision, taken, cause)
        if cause == Cause.PREEMPTED and decision.remedy == Remedy.RESTART_GANG:
            # The rest of the gang is useless without it: every container goes back, and the
            # gang waits for room for all of it (holding GPUs idle meanwhile is what preemption
            # took them back from).
            job.decide("giving every container of the gang back until the cluster has room for all of it")
            self.give_back("preempted: waiting for room for the whole gang again")

    def container_taken(self, ex: Any, ts: Optional[Task], cause: Cause, what: str) -> None:
        """A container the cluster took (``cause``) before its executor registered: no task ran
        in it, so it costs no restart; its task (``ts``; None: whichever task of its role still
        has no executor) gets another. The gang timeout bounds how long that may go on."""
        job = self.job
        if ts is None:
            spare = [t for t in job.tasks.values() if t.plan.role == ex.role and t.state != TaskState.SUCCEEDED
                     and job.live_executor(t) is None and t.key not in job.to_launch]
            if not spare:
                job.decide("a container of role %s was %s before its executor registered (%s); no task was "
                           "waiting for it", ex.role, _taken_words(cause), what, level=logging.WARNING)
                return
            ts = spare[0]
        job.decide("%s: its container was %s before its executor registered (%s): replacing it", ts.plan.id,
                   _taken_words(cause), what, level=logging.WARNING)
        job.need_executor(ts)

    def spare_gone(self, ts: Task, what: str) -> bool:
        """A spare of an elastic role (registered, outside the running world) lost its executor:
        it never ran in this attempt, so only a new container is asked for (it costs nothing)."""
        if not self.elasticity.outside(ts.key):
            return False
        self.job.decide("%s (a spare outside the running world) %s: asking for another container", ts.plan.id, what,
                        level=logging.WARNING)
        ts.state, ts.exit_code, ts.cause = TaskState.PENDING, None, None
        self.job.need_executor(ts)
        return True

    def task_hung(self, ts: Task, code: int, quiet: float, stderr: Tuple[str, str], stdout: str = "") -> None:
        """``ts`` printed nothing for ``quiet`` seconds and its executor stopped it (exit ``code``):
        a failure of the program (``timeouts.hang_seconds``), under ``max_restarts``. ``stderr``:
        where its stderr is and its last lines; ``stdout``: the last lines of its stdout."""
        job = self.job
        limit = job.plan.job.timeouts.hang_seconds
        printed = quote_tail(stdout)
        if printed:
            log.warning("last lines of %s's stdout (attempt %d):\n%s", ts.plan.id, shown(ts.attempt), printed)
        self.task_failed(ts, code, why=f"no output for {quiet:.0f} s: hung (timeouts.hang_seconds {limit})",
                         stderr=stderr, cause=Cause.HUNG)
        if job.finishing and job.state == JobState.FAILED and printed:
            job.diagnostics += f"\nlast lines of {ts.plan.id}'s stdout:\n{printed}"

    def _restore_causes(self, previous: Optional[JobReport], before: Dict[Tuple[str, int], Any]) -> None:
        """The restarts by cause an earlier AM saved: those for the cluster's faults spent
        ``max_cluster_restarts``, not ``max_restarts``, and still did not."""
        if previous is None:
            return
        job = self.job
        job.restarts_by_cause = _causes(previous.restarts_by_cause)
        if self.restarts.policy != RestartPolicy.TASK:  # there every restart was the gang's
            job.gang_cluster_restarts = sum(n for c, n in job.restarts_by_cause.items() if c.is_cluster)
        for key, ts in job.tasks.items():
            if key in before:
                ts.restarts_by_cause = _causes(before[key].restarts_by_cause)

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
                job.world_sizes = list(previous.world_sizes)
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
            self._restore_causes(previous, before)
            gang_spent, _ = self.spent(next(iter(job.tasks.values())))
            decision = self.restarts.after_am_loss(gang_spent.program,
                                                   [self.spent(ts)[1].program for ts in job.tasks.values()])
            if decision.gives_up:  # the counts stay where the earlier AM left them
                job.finish(JobState.FAILED, f"{why}; job failed ({decision.why})")
                return
            for ts in job.tasks.values():
                ts.attempt, ts.restarts = ts.attempt + 1, ts.restarts + 1
            job.attempt, job.gang_restarts = job.attempt + 1, job.gang_restarts + 1
            job.decide("restarting the gang in new containers: attempt %d%s, because %s",
                       shown(job.attempt), self._budget(Cause.FAILED, job.gang_cluster_restarts), why)
            self.save_state()


def _taken_words(cause: Cause) -> str:
    """``worker:1 was preempted``, ``worker:1 was lost with its node``."""
    return "lost with its node" if cause == Cause.NODE_LOST else cause.words


def _causes(counts: Mapping[str, int]) -> Dict[Cause, int]:
    """A report's restarts by cause (names of :class:`Cause`) as the AM counts them."""
    known = {c.value: c for c in Cause}
    return {known[name]: int(n) for name, n in counts.items() if name in known and n}
