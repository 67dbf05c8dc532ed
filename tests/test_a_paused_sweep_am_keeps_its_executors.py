"""A sweep's ApplicationMaster that was not running for a while (suspended, starved of CPU, a
long GC) does not blame its executors for the silence: like a job's AM, it forgives the time it
was paused itself (issue 31), so a trial's healthy container is not declared lost."""
import threading
import time

import pytest

from submarine_py.am.containers import Containers, Ended
from submarine_py.am.process import make_am
from submarine_py.jobfile.validate import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.states import JobState

pytestmark = pytest.mark.unit

#: Executors call every 0.5 s; a silence of 1.5 s is three missed calls.
LOST_AFTER = 1.5
#: The AM's pause: longer than LOST_AFTER.
PAUSE = LOST_AFTER + 1.5


class PausedOnce(Containers):
    """Trial containers whose executors call the AM from a thread of their own, as real ones do
    over HTTP; while the AM's process is paused (its main loop's sleep, here) they cannot be
    heard either, and the first call after it comes one heartbeat later."""

    name = "fake"

    def __init__(self):
        self.am = None
        self.executors = {}
        self.ended = []
        self.lost_calls = []
        self.paused = threading.Event()
        self.pause_next = False  # set by the executor once its trial runs: the AM pauses once
        self.stop = threading.Event()
        threading.Thread(target=self._executors, daemon=True).start()

    def launch(self, task, env):
        ex_id = f"c{len(self.executors) + 1}"
        self.executors[ex_id] = {"task": task, "seq": 0, "registered": False, "gone": False, "running": None}
        return ex_id

    def poll(self):
        out, self.ended = self.ended, []
        return out

    def kill(self, executor):
        ex = self.executors.get(executor)
        if ex and not ex["gone"]:
            ex["gone"] = True
            self.ended.append(Ended(executor, 143))

    def lost(self, executor):
        self.lost_calls.append(executor)
        self.kill(executor)

    def _executors(self):
        paused_once = False
        while not self.stop.is_set():
            if self.paused.is_set():  # nothing is heard while the AM's process is stopped
                while self.paused.is_set():
                    self.stop.wait(0.01)
                self.stop.wait(0.5)  # the next heartbeat, a beat later
            for ex_id, ex in list(self.executors.items()):
                if ex["gone"] or self.am is None:
                    continue
                if not ex["registered"]:
                    task = ex["task"]
                    reply = self.am.on_register({"executor": ex_id, "role": task.role, "index": task.index,
                                                 "host": "127.0.0.1", "port": 1000 + task.index})
                    ex["registered"] = reply.get("index") is not None
                    continue
                for instr in self.am.next_instructions(ex_id, ex["seq"], wait=0):
                    ex["seq"] = instr["seq"]
                    if instr["op"] == "run":
                        ex["running"] = instr["attempt"]
                        if not paused_once:
                            paused_once, self.pause_next = True, True
                    elif instr["op"] == "exit":
                        self.am.on_goodbye({"executor": ex_id})
                        ex["gone"] = True
                        self.ended.append(Ended(ex_id, 0))
                if ex["running"] is not None and paused_once and not self.pause_next and not self.paused.is_set():
                    number, ex["running"] = ex["running"], None
                    self.am.on_exit({"executor": ex_id, "attempt": number, "exit_code": 0,
                                     "metric_lines": ["score=1.0"]})
            self.stop.wait(0.1)


def test_a_paused_sweep_am_declares_none_of_its_executors_lost(monkeypatch):
    plan = make_plan(spec_from_dict({
        "name": "s", "roles": {"w": {"command": "c"}},
        "timeouts": {"lost_after_seconds": LOST_AFTER},
        "sweep": {"metric": "score", "goal": "maximize", "trials": 2, "params": {"x": [1, 2]},
                  "algorithm": "grid"}}))
    containers = PausedOnce()
    am = make_am(plan, "job", containers)
    containers.am = am
    real_sleep = time.sleep

    def sleep(seconds):
        # The AM's main loop sleeps between its rounds: the process is stopped there, once.
        if threading.current_thread() is threading.main_thread() and containers.pause_next:
            containers.paused.set()
            real_sleep(PAUSE)
            containers.pause_next = False
            containers.paused.clear()
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    try:
        report = am.run()
    finally:
        containers.stop.set()
    assert containers.lost_calls == [], [e.message for e in report.events]
    assert report.state == JobState.SUCCEEDED, report.diagnostics
    assert [t.state.value for t in report.sweep.trials] == ["SUCCEEDED", "SUCCEEDED"]
