"""The plan: tasks from a spec, and each task's environment once addresses are known."""
import json

import pytest

from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit


def plan_of(spec):
    return make_plan(spec_from_dict(spec))


PYTORCH = {"name": "ddp", "framework": "pytorch", "roles": {
    "master": {"command": "python train.py", "env": {"OMP_NUM_THREADS": "1"}},
    "worker": {"instances": 2, "command": "python train.py", "resources": {"memory": "1 GiB"}},
}}


def test_tasks_in_role_then_index_order():
    plan = plan_of(PYTORCH)
    assert [t.id for t in plan.tasks] == ["master:0", "worker:0", "worker:1"]
    assert plan.task("worker", 1).resources.memory_mb == 1024
    assert plan.task("master", 0).env == {"OMP_NUM_THREADS": "1"}
    with pytest.raises(KeyError):
        plan.task("worker", 2)


def test_cluster_spec_lists_addresses_in_index_order():
    plan = plan_of(PYTORCH)
    cluster = plan.cluster_spec({("worker", 1): "h:3", ("master", 0): "h:1", ("worker", 0): "h:2"})
    assert cluster == {"master": ["h:1"], "worker": ["h:2", "h:3"]}


def test_a_process_env_has_every_subm_variable_plus_the_frameworks_and_the_users():
    plan = plan_of(PYTORCH)
    cluster = {"master": ["m:1"], "worker": ["a:2", "b:3"]}
    (env,) = plan.process_envs(plan.task("worker", 1), cluster, "local_x", attempt=2)
    assert env["SUBM_JOB_ID"] == "local_x"
    assert env["SUBM_JOB_NAME"] == "ddp"
    assert env["SUBM_FRAMEWORK"] == "pytorch"
    assert (env["SUBM_ROLE"], env["SUBM_INDEX"], env["SUBM_ATTEMPT"]) == ("worker", "1", "2")
    assert (env["SUBM_HOST"], env["SUBM_PORT"]) == ("b", "3")
    assert env["SUBM_NUM_TASKS"] == "3"
    assert json.loads(env["SUBM_CLUSTER_SPEC"]) == cluster
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == ("m", "1", "2", "3")
    assert "OMP_NUM_THREADS" not in env  # the master's env is the master's alone
    (master_env,) = plan.process_envs(plan.task("master", 0), cluster, "local_x", attempt=0)
    assert master_env["OMP_NUM_THREADS"] == "1" and master_env["SUBM_ATTEMPT"] == "0"


def test_validate_shows_placeholder_addresses():
    plan = plan_of(PYTORCH)
    cluster = plan.placeholder_cluster()
    assert cluster["worker"][1] == "<worker.1.host>:<worker.1.port>"
    (env,) = plan.process_envs(plan.task("worker", 0), cluster, "<app_id>", 0)
    assert env["MASTER_ADDR"] == "<master.0.host>" and env["MASTER_PORT"] == "<master.0.port>"


def test_plan_to_dict_lists_tasks():
    d = plan_of(PYTORCH).to_dict()
    assert d["job"]["name"] == "ddp"
    assert [(t["id"], t["tracked"], t["resources"]["memory"]) for t in d["tasks"]] == [
        ("master:0", True, "2 GiB"), ("worker:0", True, "1 GiB"), ("worker:1", True, "1 GiB")]
