"""The ApplicationMaster's decisions, driven through fake Containers.

No processes and no HTTP: the fake plays the executors, calling the AM's
handlers the way executors do over HTTP. Each test scripts what every task
attempt does (exit code, or ``None``: runs until stopped).
"""
import threading
from typing import Callable, Dict, List, Optional, Set

import pytest

from submarine_py.plan import make_plan
from submarine_py.am.master import ApplicationMaster
from submarine_py.am.containers import Containers, Ended
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

Outcome = Callable[[str, int, int], Optional[int]]  # (role, index, attempt) -> exit code or None


class FakeContainers(Containers):
    name = "fake"

    def __init__(self, outcome: Outcome, never_register: Set[str] = frozenset()):
        self.outcome = outcome
        self.never_register = set(never_register)
        self.am: Optional[ApplicationMaster] = None
        self.executors: Dict[str, dict] = {}
        self.runs: List[tuple] = []  # (task id, attempt, env) of every command started
        self.killed: List[str] = []
        self.instructions: List[dict] = []  # every instruction an executor received
        self.launch_envs: List[Dict[str, str]] = []

    def launch(self, task, env):
        self.launch_envs.append(env)
        ex_id = f"{task.role}-{task.index}-e{len(self.executors) + 1}"
        self.executors[ex_id] = {"task": task, "seq": 0, "alive": True, "registered": False}
        return ex_id

    def _register(self, ex_id, ex):
        task = ex["task"]
        port = 1000 + len(self.runs) + 10 * task.index
        self.am.on_register({"executor": ex_id, "role": task.role, "index": task.index,
                             "host": "127.0.0.1", "port": port})
        ex["registered"] = True

    def poll(self):
        ended = []
        for ex_id, ex in self.executors.items():
            if ex.get("killed") and ex["alive"]:
                ex["alive"] = False
                ended.append(Ended(ex_id, 143))
            if not ex["alive"]:
                continue
            if not ex["registered"]:
                if ex["task"].id in self.never_register:
                    continue
                self._register(ex_id, ex)
            for instr in self.am.next_instructions(ex_id, ex["seq"], wait=0):
                ex["seq"] = instr["seq"]
                self.instructions.append(instr)
                if instr["op"] == "run":
                    task = ex["task"]
                    self.runs.append((task.id, instr["attempt"], instr["env"]))
                    code = self.outcome(task.role, task.index, instr["attempt"])
                    if code is not None:
                        self.am.on_exit({"executor": ex_id, "attempt": instr["attempt"], "exit_code": code})
                elif instr["op"] == "register":
                    self._register(ex_id, ex)
                elif instr["op"] == "exit":
                    ex["alive"] = False
                    ended.append(Ended(ex_id, 0))
                elif instr["op"] == "hung":
                    self.on_hung(ex_id, instr)
        return ended

    def on_hung(self, ex_id, instr):
        """The AM found the executor's task hung: a real executor stops it and reports its end."""

    def kill(self, executor):
        self.killed.append(executor)
        self.executors[executor]["killed"] = True

    def describe(self, executor):
        return "the fake never registers it"

    def log_location(self, task, executor):
        return f"/logs/{task.role}-{task.index}.stdout"


def run_job(spec: dict, outcome: Outcome, never_register=(), before_run=None):
    spec = dict({"name": "t"}, **spec)
    fake = FakeContainers(outcome, set(never_register))
    am = ApplicationMaster(make_plan(spec_from_dict(spec)), "local_test", fake)
    fake.am = am
    if before_run:
        before_run(am)
    report = am.run().to_dict()
    return report, fake


def tasks_by_id(report):
    return {f"{t['role']}:{t['index']}": t for t in report["tasks"]}


WORKERS = {"roles": {"worker": {"instances": 2, "command": "train"}}}


def test_all_tasks_succeed():
    report, fake = run_job(WORKERS, lambda role, index, attempt: 0)
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 1 and report["diagnostics"] == ""
    assert {t["state"] for t in report["tasks"]} == {"SUCCEEDED"}
    assert report["timings"]["gang_ready_seconds"] is not None
    # The command is started only once the whole gang is registered, with the full cluster spec.
    assert sorted((task, attempt) for task, attempt, _ in fake.runs) == [("worker:0", 0), ("worker:1", 0)]
    for _, _, env in fake.runs:
        assert env["SUBM_CLUSTER_SPEC"].count("127.0.0.1") == 2


def test_gang_policy_restarts_every_task_together():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 2})
    report, fake = run_job(spec, lambda role, index, attempt: 3 if (index, attempt) == (1, 0) else 0)
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    assert {t["restarts"] for t in report["tasks"]} == {1}
    started = sorted((task, attempt) for task, attempt, _ in fake.runs)
    assert started == [("worker:0", 0), ("worker:0", 1), ("worker:1", 0), ("worker:1", 1)]
    assert {env["SUBM_ATTEMPT"] for task, attempt, env in fake.runs if attempt == 1} == {"1"}


def test_gang_policy_gives_up_after_max_restarts():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 1})
    report, _ = run_job(spec, lambda role, index, attempt: 7 if index == 1 else 0)
    assert report["state"] == "FAILED" and report["attempts"] == 2
    diag = report["diagnostics"]
    assert "worker:1 failed with exit code 7 (attempt 2)" in diag
    assert "log: /logs/worker-1.stdout" in diag and "after 1 restart" in diag


def test_task_policy_restarts_only_the_failed_task():
    spec = dict(WORKERS, restart={"policy": "task", "max_restarts": 1})
    report, fake = run_job(spec, lambda role, index, attempt: 3 if (index, attempt) == (1, 0) else 0)
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    tasks = tasks_by_id(report)
    assert (tasks["worker:0"]["restarts"], tasks["worker:1"]["restarts"]) == (0, 1)
    assert sorted((t, a) for t, a, _ in fake.runs) == [("worker:0", 0), ("worker:1", 0), ("worker:1", 1)]


def test_never_policy_fails_at_the_first_failure():
    spec = dict(WORKERS, restart={"policy": "never", "max_restarts": 5})
    report, _ = run_job(spec, lambda role, index, attempt: 2 if index == 0 else 0)
    assert report["state"] == "FAILED" and report["attempts"] == 1
    assert "worker:0 failed with exit code 2 (attempt 1)" in report["diagnostics"]
    assert "restart policy 'never'" in report["diagnostics"]


def test_zero_max_restarts_says_so():
    report, _ = run_job(WORKERS, lambda role, index, attempt: 1 if index == 0 else 0)
    assert report["state"] == "FAILED" and "max_restarts is 0" in report["diagnostics"]


def test_gang_timeout_fails_naming_the_missing_task():
    spec = dict(WORKERS, timeouts={"gang_seconds": 1})
    report, fake = run_job(spec, lambda role, index, attempt: 0, never_register={"worker:1"})
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert "gang not complete within timeouts.gang_seconds (1 s)" in diag
    assert "missing: worker:1 (the fake never registers it)" in diag
    assert "worker:0" not in diag.split("missing:")[1]
    assert fake.runs == []  # no command started without the whole gang
    # The executor that never registered cannot be told to leave: the AM stops it.
    assert fake.killed == ["worker-1-e2"]
    assert {t["state"] for t in report["tasks"]} == {"STOPPED"}


def test_the_gang_clock_waits_for_a_container_the_cluster_is_still_localizing(monkeypatch):
    """A first job on a node has YARN unpack the travelling environment there (minutes for
    gigabytes): not the gang failing to assemble. Past gang_seconds the AM asks whether the
    missing task's container is still being localized; while it is, it waits, and says so once."""
    import time

    from submarine_py.am import registration

    monkeypatch.setattr(registration, "LOCALIZING_CHECK_SECONDS", 0.2)
    asked = []

    class Localizing(FakeContainers):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.until = time.monotonic() + 3.5  # the unpacking ends 1.5 s past gang_seconds

        def poll(self):
            if time.monotonic() >= self.until:
                self.never_register.clear()  # unpacked: the executor starts and registers
            return super().poll()

        def localizing(self, executors):
            asked.append(list(executors))
            if time.monotonic() < self.until:
                return [f"container {ex} on node7 is being localized" for ex in executors]
            return []

    spec = dict(WORKERS, timeouts={"gang_seconds": 2})
    fake = Localizing(lambda role, index, attempt: 0, {"worker:1"})
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "local_test", fake)
    fake.am = am
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert asked and all(executors == ["worker-1-e2"] for executors in asked)  # the missing one only
    said = [e["message"] for e in report["events"] if "being localized" in e["message"]]
    assert said == ["past timeouts.gang_seconds (2 s), but container worker-1-e2 on node7 is being localized: "
                    "the gang's clock waits while the job's environment reaches that node (once per node)"]


def test_a_container_localizing_past_its_allowance_fails_the_gang_as_before(monkeypatch):
    from submarine_py.am import registration

    monkeypatch.setattr(registration, "LOCALIZING_MOST_SECONDS", 1.0)
    monkeypatch.setattr(registration, "LOCALIZING_CHECK_SECONDS", 0.2)

    class Forever(FakeContainers):
        def localizing(self, executors):
            return [f"container {ex} on node7 is being localized" for ex in executors]

    spec = dict(WORKERS, timeouts={"gang_seconds": 1})
    fake = Forever(lambda role, index, attempt: 0, {"worker:1"})
    am = ApplicationMaster(make_plan(spec_from_dict(dict({"name": "t"}, **spec))), "local_test", fake)
    fake.am = am
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    assert "gang not complete within timeouts.gang_seconds (1 s)" in report["diagnostics"]


def test_untracked_tasks_are_stopped_once_tracked_ones_succeed():
    spec = {"framework": "tensorflow", "roles": {
        "worker": {"instances": 2, "command": "train"}, "ps": {"command": "serve"}}}
    report, _ = run_job(spec, lambda role, index, attempt: None if role == "ps" else 0)
    assert report["state"] == "SUCCEEDED"
    tasks = tasks_by_id(report)
    assert tasks["ps:0"]["state"] == "STOPPED" and tasks["ps:0"]["tracked"] is False
    assert tasks["worker:1"]["state"] == "SUCCEEDED"


def test_a_failing_untracked_task_still_fails_the_job():
    spec = {"framework": "tensorflow", "roles": {
        "worker": {"command": "train"}, "ps": {"command": "serve"}}}
    report, _ = run_job(spec, lambda role, index, attempt: 1 if role == "ps" else None)
    assert report["state"] == "FAILED" and "ps:0 failed with exit code 1" in report["diagnostics"]


def test_an_executor_lost_before_registering_fails_the_task():
    class Vanishing(FakeContainers):
        def poll(self):
            for ex_id, ex in self.executors.items():
                if ex["task"].id == "worker:1" and ex["alive"]:
                    ex["alive"] = False
                    return [Ended(ex_id, 137, "killed by the OOM killer")]
            return super().poll()

    fake = Vanishing(lambda role, index, attempt: 0)
    am = ApplicationMaster(make_plan(spec_from_dict(dict(WORKERS, name="t"))), "local_test", fake)
    fake.am = am
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    assert ("worker:1 failed with its container ended before the executor registered "
            "(exit code 137; killed by the OOM killer" in report["diagnostics"])


def test_kill_stops_every_task():
    def kill_soon(am):
        threading.Timer(0.2, am.kill, args=("killed by the test",)).start()

    report, _ = run_job(WORKERS, lambda role, index, attempt: None, before_run=kill_soon)
    assert report["state"] == "KILLED" and report["diagnostics"] == "killed by the test"
    assert {t["state"] for t in report["tasks"]} == {"KILLED"}


def test_the_job_timeout_fails_the_job():
    spec = dict(WORKERS, timeouts={"job_seconds": 1})
    report, _ = run_job(spec, lambda role, index, attempt: None)
    assert report["state"] == "FAILED" and "timeouts.job_seconds (1 s)" in report["diagnostics"]


def test_the_report_has_what_output_json_promises():
    report, _ = run_job(WORKERS, lambda role, index, attempt: 0)
    for key in ("app_id", "state", "attempts", "diagnostics", "tasks", "timings"):
        assert key in report
    for task in report["tasks"]:
        for key in ("role", "index", "state", "exit_code", "restarts", "host", "log"):
            assert key in task
    assert set(report["timings"]) >= {"gang_ready_seconds", "total_seconds"}


def test_tasks_lost_together_cost_one_restart_not_one_each():
    """A node that dies takes several executors at once: that is one failure."""

    class NodeDies(FakeContainers):
        died = False

        def poll(self):
            running = [e for e in self.executors.values() if e["alive"] and e["registered"]]
            if not self.died and len(self.runs) == 2 and len(running) == 2:
                self.died = True
                lost = [ex_id for ex_id, e in self.executors.items() if e["alive"]]
                for ex_id in lost:
                    self.executors[ex_id]["alive"] = False
                return [Ended(ex_id, 137, "node lost") for ex_id in lost]
            return super().poll()

    spec = dict(WORKERS, name="t", restart={"policy": "gang", "max_restarts": 1})
    fake = NodeDies(lambda role, index, attempt: None if attempt == 0 else 0)
    am = ApplicationMaster(make_plan(spec_from_dict(spec)), "local_test", fake)
    fake.am = am
    report = am.run().to_dict()
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["attempts"] == 2
    assert sorted((t, a) for t, a, _ in fake.runs) == [("worker:0", 0), ("worker:0", 1),
                                                         ("worker:1", 0), ("worker:1", 1)]


@pytest.mark.parametrize("policy", ["gang", "task"])
def test_every_stop_uses_the_jobs_stop_grace_which_reaches_executors_by_one_route(policy):
    spec = dict(WORKERS, restart={"policy": policy, "max_restarts": 1}, timeouts={"stop_grace_seconds": 0.25})
    report, driver = run_job(spec, lambda role, index, attempt: 3 if (index, attempt) == (1, 0) else None
                             if index == 0 else 0,
                             before_run=lambda am: threading.Timer(1.0, am.kill, ("enough",)).start())
    stops = [(i["op"], i.get("grace")) for i in driver.instructions if i["op"] in ("register", "exit", "stop")]
    # The grace reaches an executor once, in its environment, whether it is stopped by an
    # instruction or by a signal (YARN or the local driver killing it); no stop names another.
    assert stops and {grace for _, grace in stops} == {None}
    assert {"register", "exit"} <= {op for op, _ in stops}
    assert {env["SUBM_STOP_GRACE"] for env in driver.launch_envs} == {"0.25"}


def test_the_default_stop_grace_is_short():
    report, driver = run_job(WORKERS, lambda role, index, attempt: 0)
    assert {env["SUBM_STOP_GRACE"] for env in driver.launch_envs} == {"3"}
