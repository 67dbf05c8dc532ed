"""The ApplicationMaster of a sweep: one job runs every trial, on containers it asks for one at a
time and reuses trial after trial (docs/sweeps.md).

Where an ordinary job's AM (``master.py``) starts a gang and restarts it, a sweep runs groups of
containers, one per task of the job (one, commonly; a gang for a job of several tasks), each
group one trial at a time:

* **allocation**: while fewer groups are up than ``sweep.parallel`` (and than the trials still
  to run, with those running), it asks for one more each round of its main loop, passing the
  backend's admission (:meth:`Containers.admit`) for that group; it never waits for any of
  them to be granted (YARN takes seconds to start each: asking one only once the last one
  came would start the pool one container every few seconds);
* **a group whose containers registered** gets the next trial at once (:class:`~.sweep.Search`
  picks its parameters); **a trial that ends** (every task's exit, reported by the executors
  that stay; a failed task stops the rest of its gang) is told to the search and the same
  containers get the next trial in the same moment; a group with nothing left to run is
  given back at once;
* **early stopping**: the lines a trial prints naming the metric come from its executor
  (``POST /v1/metric``); an intermediate value the rule finds too poor stops the trial
  (``stop``), which ends PRUNED;
* **failures**: a failed trial is recorded with its diagnostics; the sweep fails once more than
  ``sweep.max_failed_trials`` have; a container the cluster took (preempted, node lost) costs
  no failure: its trial's parameters run again (the rest of its group goes back, a new group is
  asked for);
* **the study** (the trials so far) is saved to the job's shared folder at every change, and is in
  the report the AM rewrites on YARN: a new AM attempt goes on from it.

The executor protocol is the ordinary AM's (``server.py`` calls the same methods).
"""
from __future__ import annotations

import getpass
import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional

from ..plan import Plan, TaskPlan
from ..report import Event, JobReport
from ..states import Cause, JobState, Phase, TrialState
from .containers import Containers
from .diagnostics import quote_stderr
from .job import MAX_EVENTS
from .reporting import write_report
from .supervision import HEARTBEAT_SECONDS
from .sweep_records import Group, Slot, TaskKey
from .sweep_reporting import sweep_report
from .sweep import STUDY_FILE, Search, load_trials, save_trials, trial_env, value_of

log = logging.getLogger("subm.am")

#: Patience beyond the stop grace for executors to leave after the verdict.
STOP_MARGIN_SECONDS = 5
SNAPSHOT_SECONDS = 2.0
#: Admission refused: ask again after this long.
ADMIT_EVERY_SECONDS = 2.0
#: Containers in a row that end before their executor registers: the sweep cannot run.
MAX_FAILED_LAUNCHES = 3
#: How long a registration waits for the main loop to record the container it launched.
REGISTER_WAIT_SECONDS = 5.0


class SweepMaster:
    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 submitted_at: Optional[float] = None, token: Optional[str] = None,
                 report_path: Optional[str] = None, shared_dir: Optional[str] = None,
                 snapshots: bool = False):
        assert plan.job.sweep is not None
        self.plan, self.spec, self.job_id, self.containers = plan, plan.job.sweep, job_id, containers
        self.token = token or secrets.token_hex(16)
        self.report_path, self.shared_dir, self.snapshots = report_path, shared_dir, snapshots
        self.url = ""
        self.kill_requested: Optional[str] = None
        self.signalled: Optional[str] = None
        try:
            self.user: Optional[str] = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        except (KeyError, OSError):
            self.user = None
        #: The task whose command the trials' headers show (the first tracked one).
        self.task = next((t for t in plan.tasks if t.tracked), plan.tasks[0])
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.slots: Dict[str, Slot] = {}
        self.groups: Dict[int, Group] = {}
        self.launched = 0
        self.seq = 0
        self.events: List[Event] = []
        self.state, self.phase, self.diagnostics = JobState.RUNNING, Phase.QUEUED, ""
        self.submitted_at = submitted_at or time.time()
        self.started_at, self.finished_at = time.time(), None
        self.timeouts = plan.job.timeouts
        self.heartbeat = min(HEARTBEAT_SECONDS, self.timeouts.lost_after_seconds / 3)
        self.not_before = 0.0
        self.waiting_for = ""
        self.failed_launches = 0
        #: Executors whose containers go back now (the main loop kills them).
        self.to_release: List[str] = []
        self.search: Optional[Search] = None
        self.study_path = os.path.join(shared_dir, STUDY_FILE) if shared_dir else None
        #: The trials an earlier AM attempt saved (the shared folder), else its report's.
        self.earlier = load_trials(self.study_path) if self.study_path else []

    # -- the AM's words ------------------------------------------------------------------------
    def decide(self, msg: str, *args: Any, level: int = logging.INFO) -> None:
        log.log(level, msg, *args)
        self.events.append(Event(time=round(time.time(), 3), message=msg % args if args else msg))
        del self.events[:-MAX_EVENTS]

    def send(self, slot: Slot, op: str, **kw: Any) -> None:
        self.seq += 1
        slot.instructions.append({"seq": self.seq, "op": op, **kw})
        self.changed.notify_all()

    def executor_env(self, task: TaskPlan) -> Dict[str, str]:
        return {"SUBM_AM_URL": self.url, "SUBM_TOKEN": self.token, "SUBM_JOB_ID": self.job_id,
                "SUBM_INDEX": str(task.index), **self.plan.executor_settings(task.role)}

    @property
    def finishing(self) -> bool:
        return self.phase in (Phase.FINISHING, Phase.DONE)

    def finish(self, state: JobState, diagnostics: str) -> None:
        """The verdict: running trials are stopped (STOPPED), every executor told to leave."""
        if self.finishing:
            return
        self.state, self.diagnostics, self.phase = state, diagnostics, Phase.FINISHING
        self.finished_at = time.time()
        for group in self.groups.values():
            if group.trial is not None and self.search is not None:
                self.search.finish(group.trial, TrialState.STOPPED, diagnostics=f"the sweep ended: {state}")
                group.trial = None
        for slot in self.slots.values():
            slot.trial = None
            if slot.alive:
                self.send(slot, "exit", code=0)
        self._save_study()
        self.decide("job %s%s", state, f": {diagnostics}" if diagnostics else "")

    # -- executor calls (server.py) -------------------------------------------------------------
    def on_register(self, body: Dict[str, Any]) -> Dict[str, Any]:
        with self.lock:
            # An executor may call before the main loop has recorded the container it launched.
            deadline = time.monotonic() + REGISTER_WAIT_SECONDS
            while str(body["executor"]) not in self.slots and time.monotonic() < deadline:
                self.changed.wait(timeout=0.05)
            slot = self.slots.get(str(body["executor"]))
            if slot is None or not slot.alive or self.finishing or slot.released:
                return {"index": None}
            slot.address = f"{body['host']}:{int(body['port'])}"
            slot.host, slot.registered = str(body["host"]), True
            self.failed_launches = 0
            info = {"container": body.get("container"), "node_http": body.get("node_http")}
            slot.container = str(body.get("container") or "") or None
            self.containers.registered(slot.id, info)
            slot.log = self.containers.log_location(slot.plan, slot.id)
            self.decide("container %s registered on %s", slot.id, slot.host)
            self._next_trial(self.groups[slot.group])
            return {"index": slot.plan.index, "attempt": 0, "heartbeat": self.heartbeat}

    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + wait
        with self.lock:
            while True:
                slot = self.slots.get(executor)
                pending = [i for i in slot.instructions if i["seq"] > after] if slot else []
                if slot is not None and not slot.alive and not pending:
                    return [{"seq": max(after, self.seq) + 1, "op": "exit", "code": 0}]
                if pending or time.monotonic() >= deadline:
                    if slot:
                        slot.instructions, slot.last_seen = pending, time.monotonic()
                    return pending
                self.changed.wait(timeout=max(0.0, deadline - time.monotonic()))

    def heard_from(self, executor: str, quiet: Optional[float] = None, attempt: Optional[int] = None) -> None:
        with self.lock:
            slot = self.slots.get(executor)
            if slot is not None:
                slot.last_seen = time.monotonic()

    def on_started(self, body: Dict[str, Any]) -> None:
        """The trial's processes started: its time counts from here."""
        with self.lock:
            number = body.get("attempt")
            if self.search is not None and number in self.search.trials:
                self.search.trials[number] = replace(self.search.trials[number], started_at=round(time.time(), 3))

    def on_gpu(self, body: Dict[str, Any]) -> None:
        """GPU samples: not kept per trial (the pool's use is the sweep's figure)."""

    def on_goodbye(self, body: Dict[str, Any]) -> None:
        with self.lock:
            slot = self.slots.get(str(body["executor"]))
            if slot is not None and (self.finishing or slot.released):
                slot.alive = False
                self.changed.notify_all()

    def on_metric(self, body: Dict[str, Any]) -> None:
        """Lines a running trial printed naming the metric: intermediate values, early stopping."""
        with self.lock:
            slot = self.slots.get(str(body["executor"]))
            number = body.get("attempt")
            if slot is None or slot.trial is None or number != slot.trial or self.search is None:
                return
            self._intermediate(self.groups[slot.group], number, [str(x) for x in body.get("lines") or ()])

    def _intermediate(self, group: Group, number: int, lines: List[str], may_stop: bool = True) -> None:
        """Record a running trial's intermediate values; stop it early where the rule says so
        (``may_stop``: not for the last lines of a task that has ended)."""
        _, values = value_of(lines, self.spec.metric)
        for value, step in values:
            if step is None or group.pruning == number:
                continue
            if self.search.report(number, value, step) and may_stop and not group.failing:
                group.pruning = number
                self.decide("trial %d stops early at step %d: %s=%g is worse than the median of earlier "
                            "trials at that step", number, step, self.spec.metric, value)
                self._stop_running(group, number)
                return

    def _stop_running(self, group: Group, number: int, untracked_only: bool = False) -> None:
        for ex_id in group.members.values():
            slot = self.slots[ex_id]
            if slot.trial == number and (not untracked_only or not slot.plan.tracked):
                self.send(slot, "stop", attempt=number)

    def on_exit(self, body: Dict[str, Any]) -> None:
        """A trial's task ended; once all of them have, the trial is recorded and its containers
        take the next one at once."""
        with self.lock:
            slot = self.slots.get(str(body["executor"]))
            number = body.get("attempt")
            if slot is None or slot.trial is None or number != slot.trial or self.search is None:
                return
            group = self.groups[slot.group]
            slot.trial = None
            lines = [str(x) for x in body.get("metric_lines") or ()]
            self._intermediate(group, number, lines, may_stop=False)
            value, _ = value_of(lines, self.spec.metric)
            if value is not None:
                self.search.trials[number] = replace(self.search.trials[number], value=value)
            code, stopped = int(body["exit_code"]), bool(body.get("stopped"))
            if code != 0 and not stopped and not group.failing and group.pruning != number:
                tail = body.get("stderr_tail")
                if not isinstance(tail, str):
                    tail = self.containers.stderr_tail(slot.plan, slot.id)
                where = self.containers.stderr_location(slot.plan, slot.id) or str(body.get("stderr_log") or "")
                said = quote_stderr(tail).summary() if isinstance(tail, str) and tail else ""
                who = f"{slot.plan.role}:{slot.key[1]} " if len(group.members) > 1 else ""
                group.failing = "; ".join(x for x in (f"{who}exit code {code}", said,
                                                      f"its stderr: {where}" if where else "") if x)
                self._stop_running(group, number)  # the rest of its gang
            elif code == 0 and not stopped and slot.plan.tracked:
                tracked_left = [x for x in group.members.values()
                                if self.slots[x].plan.tracked and self.slots[x].trial == number]
                if not tracked_left:
                    self._stop_running(group, number, untracked_only=True)
            if any(self.slots[x].trial == number for x in group.members.values()):
                return  # the rest of the trial's tasks are still ending
            self._trial_ended(group, number, slot.id)

    def _trial_ended(self, group: Group, number: int, where: str) -> None:
        """Every task of the group's trial has ended: its verdict, then the next trial."""
        record = self.search.trials[number]
        group.trial = None
        if group.pruning == number:
            rec = self.search.finish(number, TrialState.PRUNED, record.value, f"stopped early at step {record.step}")
        elif group.failing:
            rec = self.search.finish(number, TrialState.FAILED, record.value, group.failing)
        elif record.value is not None:
            rec = self.search.finish(number, TrialState.SUCCEEDED, record.value)
        else:
            rec = self.search.finish(number, TrialState.FAILED, None,
                                     f"it exited with code 0 but printed no {self.spec.metric}=... line on its "
                                     f"stdout (see docs/sweeps.md)")
        group.failing = ""
        self.decide("trial %d %s%s in %.1f s on %s%s", number, rec.state,
                    f" ({self.spec.metric}={rec.value:g})" if rec.value is not None else "",
                    rec.duration_seconds or 0, where,
                    f": {rec.diagnostics}" if rec.state == TrialState.FAILED else "")
        self._save_study()
        if not self._check_done():
            self._next_trial(group)

    def kill(self, why: str = "killed by request") -> None:
        with self.lock:
            self.finish(JobState.KILLED, why)

    def take_over(self, previous: Optional[JobReport], lost_attempts: int) -> None:
        """Go on from an earlier AM attempt: its study file, else the trials in its report."""
        if not self.earlier and previous is not None and previous.sweep is not None:
            self.earlier = list(previous.sweep.trials)
        done = sum(1 for t in self.earlier if t.state != TrialState.RUNNING)
        self.decide("going on with the sweep after %d lost ApplicationMaster attempt(s): %d trial(s) kept",
                    lost_attempts, done)

    # -- trials --------------------------------------------------------------------------------
    def _next_trial(self, group: Group) -> None:
        """Give ``group`` the next trial once all its containers registered, or give it back if
        there is none (under the lock)."""
        slots = [self.slots[x] for x in group.members.values()]
        if self.finishing or self.search is None or group.released or group.trial is not None \
                or not all(s.registered for s in slots):
            return
        if self.search.remaining() <= 0:
            self._release(group, "has no trial left to run: it goes back to the cluster")
            return
        first = self.slots[group.members[(self.task.role, self.task.index)]]
        rec = self.search.ask(first.container or first.id, first.host)
        group.trial, group.pruning, group.failing = rec.number, None, ""
        self.phase = Phase.RUNNING
        cluster = self.plan.cluster_spec({key: self.slots[x].address for key, x in group.members.items()})
        shown = " ".join(f"{k}={v}" for k, v in rec.params.items())
        for key, ex_id in group.members.items():
            slot = self.slots[ex_id]
            task = self.plan.task(*key)
            envs = self.plan.process_envs(task, cluster, self.job_id, 0, self.shared_dir)
            envs = [dict(e, **trial_env(rec.number, dict(rec.params))) for e in envs]
            header = (f"[subm] job={self.job_id} trial={rec.number} {shown} task={task.id} container={slot.id} "
                      f"command: {task.command}")
            more = {"envs": envs} if len(envs) > 1 else {}
            slot.trial = rec.number
            slot.trials_run += 1
            self.send(slot, "run", attempt=rec.number, command=task.command, env=envs[0], **more,
                      hold_port=self.plan.framework.reuses_port, header=header, gpus=task.resources.gpus,
                      metric=self.spec.metric)
        log.info("trial %d (%s) starts in %s", rec.number, shown, ", ".join(group.members.values()))
        self._save_study()

    def _release(self, group: Group, why: str) -> None:
        """Every container of ``group`` goes back to the cluster now."""
        if group.released:
            return
        group.released = True
        ids = list(group.members.values())
        self.decide("container%s %s %s", "s" if len(ids) > 1 else "", ", ".join(ids), why)
        for ex_id in ids:
            slot = self.slots[ex_id]
            slot.released, slot.trial = True, None
            if slot.alive:
                self.send(slot, "exit", code=0)
                self.to_release.append(ex_id)

    def _check_done(self) -> bool:
        """The verdict once too many trials failed, or every trial has ended (under the lock)."""
        search = self.search
        if self.finishing or search is None:
            return self.finishing
        failed = search.failed()
        if failed > self.spec.max_failed_trials:
            last = max((t for t in search.trials.values() if t.state == TrialState.FAILED), key=lambda t: t.number)
            self.finish(JobState.FAILED, f"{failed} trials failed, more than sweep.max_failed_trials "
                                         f"({self.spec.max_failed_trials}); the last, trial {last.number}: "
                                         f"{last.diagnostics}")
            return True
        running = any(g.trial is not None for g in self.groups.values())
        if search.remaining() > 0 or running:
            return False
        best = search.best()
        counts = ", ".join(f"{n} {s.value.lower()}" for s, n in search.counts().items() if n)
        if best is None:
            self.finish(JobState.FAILED, f"no trial succeeded ({counts})")
        else:
            self.decide("sweep done (%s); best: trial %d, %s=%g with %s", counts, best.number, self.spec.metric,
                        best.value, dict(best.params))
            self.finish(JobState.SUCCEEDED, "")
        return True

    def _save_study(self) -> None:
        """The trials so far where a new AM attempt finds them: the study file in the shared
        folder, and the report file (YARN: a new attempt reads it from this one's log)."""
        if self.snapshots and self.search is not None:
            self._write_report()
        if self.study_path and self.search is not None:
            try:
                save_trials(self.study_path, [self.search.trials[n] for n in sorted(self.search.trials)])
            except OSError as exc:
                log.warning("could not save the sweep's trials to %s: %s", self.study_path, exc)

    # -- containers ----------------------------------------------------------------------------
    def _allocate(self) -> None:
        """One more group of containers when fewer are up than the sweep can use now (main loop)."""
        now = time.monotonic()
        with self.lock:
            if self.finishing or self.search is None or now < self.not_before:
                return
            up = [g for g in self.groups.values() if not g.released]
            running = sum(1 for g in up if g.trial is not None)
            coming = len(up) - running
            want = min(self.spec.parallel, running + self.search.remaining())
            if len(up) >= want or coming >= self.search.remaining():
                return
            number = len(self.groups)
            # Each group's containers get indices of their own (logs, the GPU ledger's names).
            plans = {(t.role, t.index): replace(t, index=number * self.plan.job.roles[t.role].instances + t.index)
                     for t in self.plan.tasks}
        verdict = self.containers.admit(list(plans.values()), self.plan.job.placement)
        if not verdict.fits:
            with self.lock:
                if verdict.why != self.waiting_for:
                    self.decide("trial container%s %d waits: %s", "s" if len(plans) > 1 else "", number,
                                verdict.why)
                self.waiting_for, self.not_before = verdict.why, now + ADMIT_EVERY_SECONDS
            return
        launched: Dict[TaskKey, str] = {}
        try:
            for key, plan in plans.items():
                launched[key] = self.containers.launch(plan, self.executor_env(plan))
        except Exception as exc:
            log.exception("could not start a trial container")
            for ex_id in launched.values():
                self.containers.kill(ex_id)
            with self.lock:
                self.not_before = now + ADMIT_EVERY_SECONDS
                if not any(s.alive for s in self.slots.values()):
                    self.finish(JobState.FAILED, f"could not start a trial container: {exc}")
            return
        with self.lock:
            self.launched += len(launched)
            self.waiting_for = ""
            self.groups[number] = Group(number, dict(launched))
            for key, ex_id in launched.items():
                self.slots[ex_id] = Slot(ex_id, plans[key], number, key,
                                         log=self.containers.log_location(plans[key], ex_id))
            self.changed.notify_all()
            if self.phase == Phase.QUEUED:
                self.phase = Phase.STARTING
            self.decide("asked for trial container%s %s: %d group(s) up, %d trial(s) running, %d to start",
                        "s" if len(launched) > 1 else "", ", ".join(launched.values()), len(up) + 1, running,
                        self.search.remaining())

    def _ended(self, ex_id: str, code: Optional[int], diagnostics: str, cause: Optional[Cause]) -> None:
        """A trial container is gone (its end polled, or its executor silent): its group is
        given back whole (a new one is asked for), its trial, if any, failed."""
        with self.lock:
            slot = self.slots.get(ex_id)
            if slot is None or not slot.alive:
                return
            slot.alive = False
            self.changed.notify_all()
            group = self.groups.get(slot.group)
            if group is None or slot.released or group.released or self.finishing:
                return
            said = "; ".join(x for x in (f"exit code {code}" if code is not None else "", diagnostics) if x)
            if not slot.registered:
                self.failed_launches += 1
                self.decide("trial container %s ended before its executor registered (%s)", ex_id, said,
                            level=logging.WARNING)
                if self.failed_launches >= MAX_FAILED_LAUNCHES:
                    self.finish(JobState.FAILED, f"{self.failed_launches} trial containers in a row ended before "
                                                 f"their executor registered; the last: {said}")
                    return
            number = group.trial
            self._release(group, f"went back: {ex_id} is gone")
            if number is not None and self.search is not None:
                group.trial = None
                taken = cause is not None and cause.is_cluster
                rec = self.search.finish(number, TrialState.FAILED,
                                         diagnostics=f"its container {ex_id} ended ({said or 'exit code unknown'})",
                                         requeue=taken)
                self.decide("trial %d failed: %s%s", rec.number, rec.diagnostics,
                            "; its parameters run again" if taken else "", level=logging.WARNING)
                self._save_study()
                self._check_done()

    def _silent(self) -> List[str]:
        now = time.monotonic()
        with self.lock:
            return [s.id for s in self.slots.values()
                    if s.alive and s.registered and not s.released and now - s.last_seen > self.timeouts.lost_after_seconds]

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> JobReport:
        log.info("AM for sweep %s (%d trials, %d at a time, %s, metric %s %s) on %s; status at %s", self.job_id,
                 self.spec.trials, self.spec.parallel, self.spec.algorithm, self.spec.metric, self.spec.goal,
                 self.containers.name, self.url)
        try:
            search = Search(self.spec, self.earlier)
        except Exception as exc:  # Optuna missing here, or the earlier trials unreadable
            search = None
            with self.lock:
                self.finish(JobState.FAILED, str(exc))
        with self.lock:
            self.search = search
            if search is not None and self.earlier:
                self._save_study()
                self._check_done()
        self._loop()
        for slot in [s for s in self.slots.values() if s.alive]:
            self.containers.kill(slot.id)
        self.containers.close()
        with self.lock:
            self.phase = Phase.DONE
            report = self.report()
            self.changed.notify_all()
        self._write_report(report)
        self.containers.finish(self.state, self.diagnostics)
        log.info("sweep %s %s in %.1f s", self.job_id, self.state, report.timings.total_seconds)
        return report

    def _loop(self) -> None:
        deadline = time.monotonic() + self.timeouts.job_seconds if self.timeouts.job_seconds else None
        patience = self.timeouts.stop_grace_seconds + STOP_MARGIN_SECONDS
        next_snapshot, since = 0.0, None
        while True:
            if self.kill_requested:
                self.kill(self.kill_requested)
                self.kill_requested = None
                self._write_report()
            if self.snapshots and time.monotonic() >= next_snapshot:
                self._write_report()
                next_snapshot = time.monotonic() + SNAPSHOT_SECONDS
            self._allocate()
            with self.lock:
                out, self.to_release = self.to_release, []
            for ex_id in out:
                self.containers.kill(ex_id)
            for ended in self.containers.poll():
                self._ended(ended.executor, ended.exit_code, ended.diagnostics, ended.cause)
            for ex_id in self._silent():
                self.containers.lost(ex_id)
                self._ended(ex_id, None, "no heartbeat from its executor: declared lost", Cause.NODE_LOST)
            with self.lock:
                if deadline and time.monotonic() > deadline:
                    self.finish(JobState.FAILED, f"the sweep ran longer than timeouts.job_seconds "
                                                 f"({self.timeouts.job_seconds} s)")
                if self.finishing:
                    since = since or time.monotonic()
                    alive = [s for s in self.slots.values() if s.alive]
                    if not alive or time.monotonic() - since > patience:
                        return
                    unheard = [s.id for s in alive if not s.registered]
                else:
                    unheard = []
            for ex_id in unheard:
                self.containers.kill(ex_id)
                with self.lock:
                    self.slots[ex_id].alive = False
            time.sleep(0.05)

    # -- report --------------------------------------------------------------------------------
    def report(self) -> JobReport:
        with self.lock:
            return sweep_report(self)

    def _write_report(self, report: Optional[JobReport] = None) -> None:
        if self.report_path:
            write_report(self.report_path, report or self.report(), self.plan)
