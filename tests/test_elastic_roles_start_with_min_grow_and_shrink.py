"""Elastic roles (``instances: {min, max}``): the job file's range, the frameworks that refuse
it, each attempt's world, and the AM's decisions (start with ``min``, grow as containers are
granted, shrink when a node is lost), driven through fake Containers (no processes)."""
from typing import List

import pytest

from conftest import cli, write_job
from submarine_py.admission import Verdict
from submarine_py.am.containers import Ended
from submarine_py.am.elastic import grows, has_min, shrinks, split, starts
from submarine_py.am.master import ApplicationMaster
from submarine_py.errors import SpecError
from submarine_py.jobfile import spec_from_dict
from submarine_py.output import format_report
from submarine_py.plan import make_plan
from submarine_py.report import JobReport
from submarine_py.states import Cause
from test_gang_scheduling_and_restart_policies import FakeContainers

pytestmark = pytest.mark.unit


def spec(framework: str = "pytorch", roles=None, **more):
    roles = roles or {"worker": {"instances": {"min": 2, "max": 4}, "command": "python train.py"}}
    return spec_from_dict(dict({"name": "e", "framework": framework, "roles": roles}, **more))


# -- the job file -------------------------------------------------------------------------------

def test_a_range_of_instances_is_an_elastic_role_and_round_trips():
    job = spec()
    worker = job.roles["worker"]
    assert (worker.elastic, worker.fewest, worker.instances) == (True, 2, 4) and job.elastic
    assert job.to_dict()["roles"]["worker"]["instances"] == {"min": 2, "max": 4}
    assert spec_from_dict(job.to_dict()) == job
    # Equal ends are a plain number: nothing can change.
    same = spec(roles={"worker": {"instances": {"min": 3, "max": 3}, "command": "x"}})
    assert not same.elastic and same.to_dict()["roles"]["worker"]["instances"] == 3
    assert spec(timeouts={"settle_seconds": 2.5}).to_dict()["timeouts"]["settle_seconds"] == 2.5


@pytest.mark.parametrize("instances, field, words", [
    ({"min": 0, "max": 2}, "roles.worker.instances.min", "expected a whole number >= 1, got 0"),
    ({"min": 3, "max": 2}, "roles.worker.instances.max", "expected at least min (3), got 2"),
    ({"max": 2}, "roles.worker.instances.min", "is required: a range of instances is {min: N, max: M}"),
    ({"min": 1, "max": 2, "step": 1}, "roles.worker.instances.step", "unknown field"),
    ({"min": 1, "max": 5000}, "roles.worker.instances.max", "expected at most 1000"),
    ({"min": "two", "max": 4}, "roles.worker.instances.min", "expected a whole number >= 1"),
])
def test_a_bad_range_names_its_field(instances, field, words):
    with pytest.raises(SpecError) as err:
        spec(roles={"worker": {"instances": instances, "command": "x"}})
    assert f"{field}: {words}" in str(err.value)


def test_a_bad_range_exits_2_naming_the_field(tmp_path):
    job = write_job(tmp_path, """\
        name: e
        framework: pytorch
        roles:
          worker: {instances: {min: 4, max: 2}, command: python train.py}
    """)
    rc, out, err = cli("validate", str(job))
    assert rc == 2 and "roles.worker.instances.max: expected at least min (4), got 2" in err


def test_frameworks_whose_programs_cannot_change_size_refuse_a_range_and_say_why():
    with pytest.raises(SpecError) as err:
        spec("tensorflow", {"ps": {"command": "x"}, "chief": {"command": "x"},
                            "worker": {"instances": {"min": 1, "max": 3}, "command": "x"}})
    assert ("roles.worker.instances: TensorFlow with parameter servers cannot change size: "
            "ParameterServerStrategy spreads the variables over the ps tasks") in str(err.value)
    with pytest.raises(SpecError) as err:
        spec("mxnet", {"scheduler": {"command": "x"}, "server": {"command": "x"},
                       "worker": {"instances": {"min": 1, "max": 3}, "command": "x"}})
    assert "roles.worker.instances: MXNet cannot change size: ps-lite's scheduler waits for exactly" in str(err.value)
    # These restart with the new world from their checkpoint.
    for framework in ("pytorch", "horovod", "custom"):
        assert spec(framework).elastic
    assert spec("tensorflow", {"worker": {"instances": {"min": 1, "max": 3}, "command": "x"}}).elastic
    # A role with one rank 0 stays one.
    with pytest.raises(SpecError, match="roles.master.instances: PyTorch has one rank 0: at most 1, got 2"):
        spec(roles={"master": {"instances": {"min": 1, "max": 2}, "command": "x"}, "worker": {"command": "x"}})


# -- each attempt's world -----------------------------------------------------------------------

def test_the_world_of_an_attempt_numbers_its_tasks_without_gaps():
    plan = make_plan(spec(roles={"master": {"command": "x"},
                                 "worker": {"instances": {"min": 1, "max": 3}, "command": "x"}}))
    world = [("master", 0), ("worker", 0), ("worker", 2)]  # worker:1 is not up
    cluster = plan.cluster_spec({k: f"h{k[1]}:{100 + i}" for i, k in enumerate(world)})
    assert cluster == {"master": ["h0:100"], "worker": ["h0:101", "h2:102"]}
    task = plan.task("worker", 2)
    env = plan.process_envs(task, cluster, "app", 1, index=plan.world_index(task, world))[0]
    assert (env["WORLD_SIZE"], env["RANK"], env["SUBM_INDEX"], env["SUBM_NUM_TASKS"]) == ("3", "2", "1", "3")
    assert (env["MASTER_ADDR"], env["SUBM_HOST"], env["SUBM_PORT"]) == ("h0", "h2", "102")


def test_the_decisions_start_with_min_grow_after_settling_and_shrink_down_to_min():
    plan = make_plan(spec(roles={"master": {"command": "x"},
                                 "worker": {"instances": {"min": 2, "max": 4}, "command": "x"}}))
    two = [("master", 0), ("worker", 0), ("worker", 1)]
    assert has_min(plan, two) and not has_min(plan, two[1:]) and not has_min(plan, two[:2])
    assert starts(plan, two, coming=0, min_up_for=0, settle=10)       # nobody else on the way
    assert not starts(plan, two, coming=1, min_up_for=5, settle=10)   # one more is coming: wait
    assert starts(plan, two, coming=1, min_up_for=10, settle=10)      # ... at most settle_seconds
    assert not grows(1, coming=0, since_change=5, spare_waited=5, settle=10)  # once per settle
    assert grows(1, coming=0, since_change=10, spare_waited=1, settle=10)
    assert not grows(1, coming=1, since_change=30, spare_waited=1, settle=10)  # another is close
    world = two + [("worker", 2)]
    alive = set(world)
    assert shrinks(plan, world, ("worker", 2), alive)
    assert not shrinks(plan, two, ("worker", 1), alive)      # below min: a restart, not a shrink
    assert not shrinks(plan, world, ("master", 0), alive)    # a role of fixed size
    assert not shrinks(plan, world, ("worker", 3), alive)    # not in the world: a spare
    # The gang asks for min; the rest one at a time as they fit.
    need, extra = split(plan, [("master", 0), ("worker", 0), ("worker", 1), ("worker", 2), ("worker", 3)], {})
    assert need == [("master", 0), ("worker", 0), ("worker", 1)] and extra == [("worker", 2), ("worker", 3)]
    assert split(plan, [("worker", 1)], {"worker": 1}) == ([("worker", 1)], [])     # back to min at once
    assert split(plan, [("worker", 3)], {"worker": 2}) == ([], [("worker", 3)])     # growth


# -- the ApplicationMaster ------------------------------------------------------------------------

class Cluster(FakeContainers):
    """Containers for growth (:meth:`admit_extra`) only while ``room`` says; ``lose``: task ids
    whose first attempt the cluster takes (its node lost) once every task of ``after`` runs."""

    def __init__(self, outcome, room=lambda fake: True, lose=(), fail_first=()):
        super().__init__(outcome)
        self.room = room
        self.lose = list(lose)
        self.fail_first = list(fail_first)
        self.asked_extra: List[str] = []
        self.born: List[tuple] = []
        self.polls = 0

    def launch(self, task, env):
        """A container takes a round to come up (as real ones do): its executor registers at the
        next poll but one."""
        self.born.append((task.id, self.polls))
        self.never_register.add(task.id)
        return super().launch(task, env)

    def admit_extra(self, task, placement, asking=()):
        self.asked_extra.append(task.id)
        return Verdict(True) if self.room(self) else Verdict(False, "no room for it now")

    def poll(self):
        self.polls += 1
        for task_id, at in [b for b in self.born if b[1] < self.polls - 1]:
            self.born.remove((task_id, at))
            self.never_register.discard(task_id)
        ended = super().poll()
        running = {ex["task"].id: ex_id for ex_id, ex in self.executors.items() if ex["alive"]}
        first = {t for t, a, _ in self.runs if a == 0}
        if self.lose and first >= set(self.lose) | set(self.fail_first):
            for task_id in self.fail_first:  # its peers' collectives fail first, as on a dead node
                self.am.on_exit({"executor": running[task_id], "attempt": 0, "exit_code": 1})
            self.fail_first = []
            for task_id in self.lose:
                ex_id = running[task_id]
                self.executors[ex_id]["alive"] = False
                ended.append(Ended(ex_id, -100, "released on a *lost* node", role="worker", cause=Cause.NODE_LOST))
            self.lose = []
        return ended


def run(cluster, roles, **more):
    job = dict({"name": "e", "framework": "pytorch", "roles": roles,
                "timeouts": {"settle_seconds": 1, "lost_after_seconds": 1},
                "restart": {"policy": "gang", "max_restarts": 0}}, **more)
    am = ApplicationMaster(make_plan(spec_from_dict(job)), "local_test", cluster)
    cluster.am = am
    return am.run().to_dict()


def events(report) -> str:
    return "\n".join(e["message"] for e in report["events"])


def worlds(fake) -> List[tuple]:
    """(attempt, WORLD_SIZE, the ranks) of every world that ran."""
    out = {}
    for _, attempt, env in fake.runs:
        out.setdefault(attempt, (env["WORLD_SIZE"], []))[1].append(env["RANK"])
    return [(a, int(size), sorted(int(r) for r in ranks)) for a, (size, ranks) in sorted(out.items())]


def test_the_job_starts_with_min_and_grows_when_a_container_is_granted():
    first_world_ran = lambda fake: len(fake.runs) >= 2  # no room until the first world trains
    fake = Cluster(lambda role, index, attempt: 0 if attempt else None, room=first_world_ran)
    report = run(fake, {"worker": {"instances": {"min": 2, "max": 3}, "command": "train"}})
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert worlds(fake) == [(0, 2, [0, 1]), (1, 3, [0, 1, 2])]
    assert report["world_sizes"] == [2, 3] and report["attempts"] == 2
    assert report["restarts_by_cause"] == {"resized": 1}  # no max_restarts (0) spent
    shown = format_report(JobReport.from_dict(report))  # what subm status prints
    assert "Elastic: 3 task(s) in this attempt's world; by attempt: 2, 3" in shown
    assert "Restarts: 1 resized (an elastic world's resizes spend no budget)" in shown
    log = events(report)
    assert "gang ready: a world of 2 task(s) of at most 3 registered (attempt 1)" in log
    assert "worker:2 would grow the world but waits: no room for it now" in log
    assert "worker:2 fits: asking for its container (growing toward 3 task(s))" in log
    assert ("restarting the gang: attempt 2 (an elastic world resized: no restart budget spent), because "
            "worker:2 came up (containers granted): growing the world from 2 to 3 task(s)") in log


def test_a_lost_node_shrinks_the_world_and_its_peers_failures_spend_nothing():
    fake = Cluster(lambda role, index, attempt: 0 if attempt else None, room=lambda fake: len(fake.asked_extra) == 1,
                   lose=["worker:2"], fail_first=["worker:0", "worker:1"])
    report = run(fake, {"worker": {"instances": {"min": 2, "max": 3}, "command": "train"}})
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert worlds(fake) == [(0, 3, [0, 1, 2]), (1, 2, [0, 1])]
    assert report["world_sizes"] == [3, 2] and report["restarts_by_cause"] == {"resized": 1}
    log = events(report)
    assert "judging that failure in 3 s: in an elastic world a peer's lost node fails the others first" in log
    assert "the failure of worker:0, worker:1 came of that loss: no restart spent for it" in log
    assert "shrinking the world from 3 to 2 task(s) (at least 2 of worker remain) instead of waiting" in log
    # Its replacement was asked for in the background (and found no room).
    assert "worker:2" in fake.asked_extra[1:]


def test_a_loss_below_min_restarts_the_gang_as_before():
    fake = Cluster(lambda role, index, attempt: 0 if attempt else None, room=lambda fake: False, lose=["worker:1"])
    report = run(fake, {"worker": {"instances": {"min": 2, "max": 3}, "command": "train"}})
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["restarts_by_cause"] == {"node_lost": 1} and report["world_sizes"] == [2, 2]


def test_the_local_backend_refuses_only_what_min_cannot_have(monkeypatch):
    from submarine_py.backends.local.backend import LocalBackend
    from submarine_py.errors import ClusterLimitError

    monkeypatch.setenv("SUBM_LOCAL_GPUS", "2")
    roles = lambda low: {"worker": {"instances": {"min": low, "max": 8}, "resources": {"gpus": 1}, "command": "x"}}
    LocalBackend().check_cluster(make_plan(spec(roles=roles(2))))  # grows as far as 2 GPUs let it
    with pytest.raises(ClusterLimitError, match="the job needs 3 GPUs at once, this machine has 2"):
        LocalBackend().check_cluster(make_plan(spec(roles=roles(3))))


def test_a_failure_of_the_program_in_an_elastic_world_still_spends_max_restarts():
    fake = Cluster(lambda role, index, attempt: 3 if (index, attempt) == (1, 0) else 0 if attempt else None)
    report = run(fake, {"worker": {"instances": {"min": 2, "max": 3}, "command": "train"}})
    assert report["state"] == "FAILED"
    assert "worker:1 failed with exit code 3 (attempt 1)" in report["diagnostics"]
    assert "job failed (max_restarts is 0)" in report["diagnostics"]


def test_each_attempt_settles_afresh():
    """A restarted gang waits for its own members again: the time its min was up in an earlier
    attempt does not start the next one with whoever re-registered first."""
    from submarine_py.am.elastic import Elasticity
    from submarine_py.am.registration import Registration
    from submarine_py.am.job import JobRun
    from submarine_py.states import Phase, TaskState

    now = [100.0]
    job = JobRun(make_plan(spec(roles={"worker": {"instances": {"min": 1, "max": 2}, "command": "x"}},
                                timeouts={"settle_seconds": 3})), "app")
    elastic = Elasticity(job, resize=lambda why: None, clock=lambda: now[0])
    gang = Registration(job, FakeContainers(lambda *a: None), shared_dir=None, heartbeat_seconds=1, gpu_sample_seconds=0,
                save_state=lambda: None, elasticity=elastic)
    w0, w1 = job.tasks[("worker", 0)], job.tasks[("worker", 1)]
    for ts, port in ((w0, 1), (w1, 2)):
        ts.address, ts.state = f"h:{port}", TaskState.REGISTERED
    assert elastic.start_world() == (("worker", 0), ("worker", 1))
    gang.maybe_run()
    assert job.phase == Phase.RUNNING and job.min_up_since is None
    # A restart: worker:0 is back first, worker:1 (its executor alive) is re-registering.
    job.phase, now[0] = Phase.STARTING, 200.0
    w1.state, w1.executor = TaskState.PENDING, "e1"
    from submarine_py.am.records import Executor
    job.executors["e1"] = Executor("e1", "worker")
    w0.state = TaskState.REGISTERED
    assert elastic.start_world() is None            # worker:1 is on its way: wait for it ...
    now[0] = 202.9
    assert elastic.start_world() is None
    now[0] = 203.0
    assert elastic.start_world() == (("worker", 0),)  # ... settle_seconds at most
