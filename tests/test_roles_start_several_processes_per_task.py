"""``roles.R.processes``: how many processes each task of a role starts (a number, or ``gpus``:
one per GPU of the task), which frameworks take more than one, and what each process gets.

One task is one node: its processes are local ranks 0 to P - 1 (``LOCAL_RANK`` for PyTorch,
``HOROVOD_LOCAL_RANK`` for Horovod, ``SUBM_LOCAL_RANK`` for every framework).
"""
from __future__ import annotations

import json

import pytest

from conftest import cli
from submarine_py.errors import SpecError
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan

pytestmark = pytest.mark.unit


def job(framework="pytorch", **worker):
    return {"name": "p", "framework": framework, "roles": {"worker": {"command": "python t.py", **worker}}}


def refusal(data) -> str:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    return str(info.value)


def test_one_process_per_task_unless_the_role_says_otherwise():
    spec = spec_from_dict(job())
    assert spec.roles["worker"].processes == 1 and spec.roles["worker"].process_count == 1
    assert "processes" not in spec.to_dict()["roles"]["worker"]
    assert [t.processes for t in make_plan(spec).tasks] == [1]


@pytest.mark.parametrize("value, gpus, count", [(4, 0, 4), (64, 0, 64), ("gpus", 8, 8), ("gpus", 1, 1), (2, 8, 2)])
def test_a_number_or_one_per_gpu(value, gpus, count):
    spec = spec_from_dict(job(instances=2, processes=value, resources={"gpus": gpus}))
    role = spec.roles["worker"]
    assert (role.processes, role.process_count) == (value, count)
    assert [t.processes for t in make_plan(spec).tasks] == [count, count]
    again = spec_from_dict(spec.to_dict())  # the job file's own words come back: `gpus` stays `gpus`
    assert again == spec and again.to_dict()["roles"]["worker"]["processes"] == value


@pytest.mark.parametrize("value", [0, -1, 65, 1.5, "2", "two", "GPUs", True, [2], {"n": 2}])
def test_anything_else_is_refused_naming_the_field(value):
    message = refusal(job(processes=value))
    assert "roles.worker.processes: expected a whole number from 1 to 64, or 'gpus'" in message


def test_one_process_per_gpu_needs_gpus():
    message = refusal(job(processes="gpus"))
    assert "roles.worker.processes: 'gpus' starts one process per GPU of the task, but " \
           "roles.worker.resources.gpus is 0" in message
    message = refusal(job(processes="gpus", resources={"gpus": "two"}))  # the GPUs' own problem, said once
    assert "roles.worker.resources.gpus: expected a whole number" in message and "processes" not in message


@pytest.mark.parametrize("framework, roles, field, why", [
    ("tensorflow", {"worker": {"processes": 2}}, "roles.worker.processes", "TF_CONFIG names one server per task"),
    ("tensorflow", {"chief": {"processes": "gpus", "resources": {"gpus": 4}}}, "roles.chief.processes",
     "at most 1, got 'gpus' (4)"),
    ("mxnet", {"scheduler": {}, "server": {}, "worker": {"processes": 2}}, "roles.worker.processes",
     "ps-lite has no local ranks"),
    ("pytorch", {"worker": {}, "tensorboard": {"processes": 2}}, "roles.tensorboard.processes",
     "tensorboard is outside PyTorch's world"),
    ("horovod", {"worker": {}, "tensorboard": {"processes": 2}}, "roles.tensorboard.processes",
     "tensorboard is outside Horovod's ranks"),
])
def test_frameworks_without_local_ranks_refuse_several_processes(framework, roles, field, why):
    data = {"name": "p", "framework": framework,
            "roles": {r: {"command": "python t.py", **v} for r, v in roles.items()}}
    message = refusal(data)
    assert f"{field}: " in message and why in message and "at most 1" in message


@pytest.mark.parametrize("framework, roles", [
    ("pytorch", ("master", "worker")), ("pytorch", ("chief",)), ("horovod", ("worker",)),
    ("custom", ("trainer", "tensorboard")),
])
def test_pytorch_horovod_and_custom_take_several(framework, roles):
    spec = spec_from_dict({"name": "p", "framework": framework,
                           "roles": {r: {"command": "t", "processes": 3} for r in roles}})
    assert {t.processes for t in make_plan(spec).tasks} == {3}


def test_one_process_per_gpu_of_one_gpu_is_one_process_everywhere():
    spec = spec_from_dict({"name": "p", "framework": "tensorflow", "roles": {
        "worker": {"command": "t", "processes": "gpus", "resources": {"gpus": 1}}}})
    assert make_plan(spec).tasks[0].processes == 1


def test_every_process_gets_its_local_rank_in_subm_variables():
    plan = make_plan(spec_from_dict({"name": "c", "roles": {
        "trainer": {"instances": 2, "processes": 3, "command": "t", "env": {"MINE": "x"}}}}))
    cluster = plan.cluster_spec({("trainer", 0): "a:1", ("trainer", 1): "a:2"})
    envs = plan.process_envs(plan.task("trainer", 1), cluster, "job_1", 0)
    assert [(e["SUBM_LOCAL_RANK"], e["SUBM_LOCAL_WORLD_SIZE"]) for e in envs] == [("0", "3"), ("1", "3"), ("2", "3")]
    assert {(e["SUBM_ROLE"], e["SUBM_INDEX"], e["MINE"]) for e in envs} == {("trainer", "1", "x")}
    assert not any("RANK" in k and not k.startswith("SUBM_") for e in envs for k in e)  # custom: subm's own only


def test_pytorch_processes_are_consecutive_ranks_of_their_node():
    plan = make_plan(spec_from_dict(job(instances=2, processes="gpus", resources={"gpus": 4})))
    cluster = plan.cluster_spec({("worker", 0): "a:1", ("worker", 1): "b:2"})
    envs = [e for t in plan.tasks for e in plan.process_envs(t, cluster, "job_1", 0)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"]) for e in envs] == [
        (str(r), str(r % 4), str(r // 4)) for r in range(8)]
    assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {
        ("8", "4", "a", "1")}


def validate(tmp_path, data, *args):
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(data))
    rc, out, err = cli("validate", str(path), *args)
    assert rc == 0, err
    return out


def test_validate_shows_each_process_and_exact_local_ranks_on_both_backends(tmp_path):
    data = job(instances=2, processes=2)
    for backend in ("local", "yarn"):
        out = validate(tmp_path, data, "--backend", backend)
        assert "worker:1  tracked  2 GiB, 1 vcore, 0 GPUs, 2 processes" in out
        assert "    LOCAL_WORLD_SIZE=2\n" in out and "    GROUP_RANK=1\n" in out
        assert "    process 1: LOCAL_RANK=1 RANK=3 ROLE_RANK=3 SUBM_LOCAL_RANK=1\n" in out
        assert "<by placement>" not in out


def test_validate_json_keeps_env_and_adds_what_each_process_gets_of_its_own(tmp_path):
    tasks = json.loads(validate(tmp_path, job(instances=2, processes=2), "-o", "json"))["tasks"]
    assert [t["processes"] for t in tasks] == [2, 2]
    assert tasks[1]["env"]["GROUP_RANK"] == "1" and "RANK" not in tasks[1]["env"]
    assert tasks[1]["process_env"] == [
        {"RANK": "2", "LOCAL_RANK": "0", "ROLE_RANK": "2", "SUBM_LOCAL_RANK": "0"},
        {"RANK": "3", "LOCAL_RANK": "1", "ROLE_RANK": "3", "SUBM_LOCAL_RANK": "1"}]
    one = json.loads(validate(tmp_path, job(instances=2), "-o", "json"))["tasks"]
    assert "process_env" not in one[1] and one[1]["env"]["RANK"] == "1"  # one process: all in env, as before
