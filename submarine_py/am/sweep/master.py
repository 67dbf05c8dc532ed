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

The executor protocol is the ordinary AM's (``server.py`` calls the same methods), and so is
its frame: the shell (``shell.py``: token, signals, report file, deadlines, the main loop, stall
forgiveness) runs this strategy. This module holds the sweep's live state, the executors'
calls, the verdict and its part of each round; the pool of
containers is ``sweep/pool.py``'s (allocation, giving back, silences), the trials on them
``sweep/trials.py``'s (their start, their ends, a container gone, the sweep's verdict).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import replace
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ...plan import Plan
from ...report import Event, JobReport
from ...states import Cause, JobState, Phase, TrialState
from ..containers import Containers
from ..allocation import Gate
from ..job import Voice
from ..shell import Shell
from . import pool
from . import trials
from .records import Group, Slot
from .reporting import sweep_report
from .search import STUDY_FILE, Search, load_trials, save_trials

log = logging.getLogger("subm.am")

#: How long a registration waits for the main loop to record the container it launched.
REGISTER_WAIT_SECONDS = 5.0


class SweepMaster(Shell, Voice):
    what = "sweep"

    def __init__(self, plan: Plan, job_id: str, containers: Containers, *,
                 submitted_at: Optional[float] = None, token: Optional[str] = None,
                 report_path: Optional[str] = None, shared_dir: Optional[str] = None,
                 snapshots: bool = False):
        assert plan.job.sweep is not None
        super().__init__(plan, job_id, containers, token=token, report_path=report_path, snapshots=snapshots)
        self.spec, self.shared_dir = plan.job.sweep, shared_dir
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
        #: The admission gate its groups pass, one at a time (``sweep/pool.py``), and the group
        #: it admitted last (whose containers must be granted within the hold).
        self.gate = Gate(self.timeouts.hold_seconds, self.timeouts.queue_seconds)
        self.gate.queue(time.monotonic())
        self.asking: Optional[int] = None
        self.failed_launches = 0
        #: Executors whose containers go back now (the main loop kills them).
        self.to_release: List[str] = []
        self.search: Optional[Search] = None
        self.study_path = os.path.join(shared_dir, STUDY_FILE) if shared_dir else None
        #: The trials an earlier AM attempt saved (the shared folder), else its report's.
        self.earlier = load_trials(self.study_path) if self.study_path else []

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
        self.save_study()
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
            trials.next_trial(self, self.groups[slot.group])
            return {"index": slot.plan.index, "attempt": 0, "heartbeat": self.heartbeat}

    def next_instructions(self, executor: str, after: int, wait: float) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + wait
        with self.lock:
            while True:
                slot = self.slots.get(executor)
                pending = [i for i in slot.instructions if i["seq"] > after] if slot else []
                if (slot is None or not slot.alive) and not pending:  # (None: a container it does not know)
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
            lines = [str(x) for x in body.get("lines") or ()]
            trials.record_intermediate(self, self.groups[slot.group], number, lines)

    def on_exit(self, body: Dict[str, Any]) -> None:
        """A trial's task ended; once all of them have, the trial is recorded and its containers
        take the next one at once."""
        with self.lock:
            slot = self.slots.get(str(body["executor"]))
            number = body.get("attempt")
            if slot is None or slot.trial is None or number != slot.trial or self.search is None:
                return
            trials.task_ended(self, slot, number, body)

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

    def save_study(self) -> None:
        """The trials so far where a new AM attempt finds them: the study file in the shared
        folder, and the report file (YARN: a new attempt reads it from this one's log)."""
        if self.snapshots and self.search is not None:
            self.write_report()
        if self.study_path and self.search is not None:
            try:
                save_trials(self.study_path, [self.search.trials[n] for n in sorted(self.search.trials)])
            except OSError as exc:
                log.warning("could not save the sweep's trials to %s: %s", self.study_path, exc)

    # -- the strategy's part of the loop ---------------------------------------------------------
    def begin(self) -> None:
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
                self.save_study()
                trials.check_done(self)

    def round(self) -> None:
        pool.allocate(self)
        with self.lock:
            out, self.to_release = self.to_release, []
        for ex_id in out:
            self.containers.kill(ex_id)
        for ended in self.containers.poll():
            trials.container_ended(self, ended.executor, ended.exit_code, ended.diagnostics, ended.cause)
        for ex_id in pool.silent(self):
            self.containers.lost(ex_id)
            trials.container_ended(self, ex_id, None, "no heartbeat from its executor: declared lost",
                                   Cause.NODE_LOST)

    def verdict(self) -> Tuple[JobState, str]:
        return self.state, self.diagnostics

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase

    def live(self) -> List[Tuple[str, bool]]:
        return [(s.id, s.registered) for s in self.slots.values() if s.alive]

    def watched(self) -> Iterable[Any]:
        return self.slots.values()

    def stopped_unheard(self, ex_id: str) -> None:
        self.slots[ex_id].alive = False

    # -- report --------------------------------------------------------------------------------
    def report(self) -> JobReport:
        with self.lock:
            return sweep_report(self)
