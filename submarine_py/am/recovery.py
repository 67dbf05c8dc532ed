"""How the ApplicationMaster tells faults apart and counts them (a mixin of :class:`ApplicationMaster`).

Three kinds of fault are no exit code of a task's command:

* an executor that falls silent: a machine that dies closes no connection, and YARN declares
  a silent NodeManager lost only after 10 minutes; executors poll the AM every couple of
  seconds, so a few missed polls mean the executor is gone;
* a container that ends before its executor registers (an interpreter or image missing, a
  mount refused, a localized file gone): a failed launch of its task;
* a lost AM: the cluster starts a new one (YARN's next application attempt), which takes the
  job over from the state the earlier one saved.

Each is one failure of a task (or of the gang) under the job's restart policy. Methods here
run under the AM's lock unless their docstring says otherwise.
"""
from __future__ import annotations

import logging
import time
from typing import Any, List, Optional, Tuple

from ..report import JobReport, replace
from ..states import JobState, RestartPolicy, TaskState
from .diagnostics import restarts_spent
from .records import shown

log = logging.getLogger("subm.am")

#: An executor calls the AM at least this often: its long poll for instructions returns after it.
HEARTBEAT_SECONDS = 2.0
#: Launches of one task in a row whose container ended before its executor registered, after
#: which the job fails whatever restarts are left: another container would fail the same way.
MAX_FAILED_LAUNCHES = 3
#: Decisions of an earlier AM kept in the report of the one that takes the job over.
KEPT_EVENTS = 100


class Recovery:
    """Fault handling of the AM; relies on the AM's tasks, executors, decisions and policy."""

    # -- heartbeats ---------------------------------------------------------------------
    def heard_from(self, executor: str) -> None:
        """Any call of an executor is a heartbeat (takes the lock)."""
        with self.lock:
            ex = self.executors.get(executor)
            if ex is not None:
                ex.last_seen = time.monotonic()

    def _check_heartbeats(self) -> List[Tuple[str, str]]:
        """Executors silent for too long: (executor id, why)."""
        if self._finishing:
            return []
        now, out = time.monotonic(), []
        for ex in self.executors.values():
            silence = now - ex.last_seen
            if ex.alive and ex.registered and silence > self.executor_lost_seconds:
                ts = self.tasks.get(ex.task) if ex.task else None
                where = f" on {ts.host}" if ts is not None and ts.host else ""
                out.append((ex.id, f"no heartbeat from its executor{where} for {silence:.1f} s (its machine may "
                                   f"be down): declared lost, its container released"))
        return out

    def _forgive_stall(self, gap: float) -> None:
        """The AM itself was not running (suspended, starved of CPU): silences it saw are its own.
        Called by the main loop with the time since its last round (takes the lock)."""
        if gap > 1.0:
            with self.lock:
                for ex in self.executors.values():
                    ex.last_seen += gap

    # -- failed launches --------------------------------------------------------------------
    def _failed_launch(self, ex: Any, ts: Any, code: Optional[int], diagnostics: str,
                       started_at: Optional[float], refused: bool = False) -> None:
        """A container ended before its executor registered: a failure of the task it was for."""
        what = (f"its container ended before the executor registered (exit code {code}"
                f"{'; ' + diagnostics if diagnostics else ''}; executor {ex.id})")
        if ts is None:  # a container of the role: it stood for whichever task still has none
            spare = [t for t in self.tasks.values() if t.plan.role == ex.role and t.state != TaskState.SUCCEEDED
                     and self._live_executor(t) is None and t.key not in self.to_launch]
            if not spare:
                self._decide("a container of role %s: %s; no task was waiting for it", ex.role, what,
                             level=logging.WARNING)
                return
            ts = spare[0]
        if refused:  # the containers turned it down themselves: no failure of the task
            self._decide("%s: %s: replacing it", ts.plan.id, what, level=logging.WARNING)
            ts.orphaned = True
            self._need_executor(ts)
            return
        if started_at is not None and started_at < ts.began:
            # Started for an attempt that an earlier failure already ended (e.g. every container
            # of a role with a missing interpreter fails at once): part of that failure.
            self._decide("%s: %s; it was started before that task's attempt %d began (part of the failure "
                         "that began it): replacing it", ts.plan.id, what, ts.attempt + 1, level=logging.WARNING)
            self._need_executor(ts)
            return
        ts.failed_launches += 1
        if ts.failed_launches >= MAX_FAILED_LAUNCHES:
            ts.state, ts.exit_code = TaskState.FAILED, code if code not in (None, 0) else 1
            self._decide("%s: %s", ts.plan.id, what, level=logging.WARNING)
            self._finish(JobState.FAILED, f"{ts.plan.id} failed to launch {ts.failed_launches} times in a row, "
                                          f"the last: {what}; job failed (a new container would fail the same way)")
            return
        self._task_ended(ts, code if code not in (None, 0) else 1, why=what)
        if not self._finishing and self._live_executor(ts) is None and ts.state == TaskState.PENDING:
            self._need_executor(ts)

    # -- an AM lost ---------------------------------------------------------------------------
    def _save_state(self) -> None:
        """Write the report file now (where it is rewritten while running: YARN) when attempts
        change, so that an AM of a later YARN attempt goes on from here."""
        if self.snapshots:
            self._write_report()

    def take_over(self, previous: Optional[JobReport], lost_attempts: int) -> None:
        """Go on with a job whose earlier AM attempt(s) were lost; call before :meth:`run`.

        ``previous`` is the last state an earlier attempt saved (None when none could be read);
        ``lost_attempts`` how many earlier AM attempts ended without deciding the job's end since.
        The cluster started new containers for this AM (the old attempt's are gone), so the loss
        is one failure of the whole gang under the restart policy, and attempts count on from
        where the earlier AM left them (or, unknown, from one per lost AM attempt).
        """
        with self.lock:
            # A saved task's attempt (as shown, from 1) -> the AM's own count (from 0).
            before = {(t.role, t.index): replace(t, attempt=t.attempt - 1) for t in (previous.tasks if previous else ())}
            between = max(lost_attempts - 1, 0)  # later lost attempts were each a restart already
            gang_attempt = max([t.attempt for t in before.values()], default=0) + between
            gang_restarts = (previous.attempts - 1 if previous else 0) + between
            why = (f"the ApplicationMaster was lost ({lost_attempts} earlier YARN attempt"
                   f"{'s' if lost_attempts != 1 else ''} ended without a verdict)")
            if previous:
                self.events[:0] = list(previous.events)[-KEPT_EVENTS:]
                self.gang_ready_seconds = previous.timings.gang_ready_seconds
            self._decide("%s; %s", why, f"its last saved state: attempt {shown(gang_attempt - between)}, "
                                        f"{gang_restarts - between} restart(s)" if previous
                         else "no saved state could be read", level=logging.WARNING)
            for key, ts in self.tasks.items():
                old = before.get(key)
                ts.attempt = (old.attempt + between if old else gang_attempt) + 1
                ts.restarts = (old.restarts + between if old else gang_restarts) + 1
                ts.began = time.time()
            self.attempt, self.gang_restarts = gang_attempt + 1, gang_restarts + 1
            policy, limit = self.plan.job.restart.policy, self.plan.job.restart.max_restarts
            spent = (policy == RestartPolicy.NEVER or (policy == RestartPolicy.GANG and self.gang_restarts > limit)
                     or (policy == RestartPolicy.TASK and any(ts.restarts > limit for ts in self.tasks.values())))
            if spent:  # the counts stay where the earlier AM left them
                for ts in self.tasks.values():
                    ts.attempt, ts.restarts = ts.attempt - 1, ts.restarts - 1
                self.attempt, self.gang_restarts = self.attempt - 1, self.gang_restarts - 1
                self._finish(JobState.FAILED, f"{why}; job failed ({restarts_spent(self.plan.job.restart)})")
                return
            self._decide("restarting the gang in new containers: attempt %d of at most %d, because %s",
                         shown(self.attempt), limit + 1, why)
            self._save_state()
