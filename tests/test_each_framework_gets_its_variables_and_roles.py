"""Each framework's environment, role checks and tracked roles (pure functions)."""
import json

import pytest

from submarine_py.frameworks import get_framework
from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit


def job(framework, **roles):
    """A spec with ``role=instances`` (or ``role=dict``) for each role."""
    return spec_from_dict({
        "name": "t", "framework": framework,
        "roles": {r: (v if isinstance(v, dict) else {"instances": v, "command": "true"}) for r, v in roles.items()},
    })


# -- PyTorch -------------------------------------------------------------------------------

def test_pytorch_ranks_workers_in_index_order():
    fw = get_framework("pytorch")
    cluster = {"worker": ["h0:100", "h1:101", "h2:102"]}
    envs = [fw.env(cluster, "worker", i) for i in range(3)]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    for e in envs:
        assert (e["MASTER_ADDR"], e["MASTER_PORT"], e["WORLD_SIZE"]) == ("h0", "100", "3")
        assert e["LOCAL_RANK"] == "0" and e["LOCAL_WORLD_SIZE"] == "1"


@pytest.mark.parametrize("first", ["master", "chief"])
def test_pytorch_master_or_chief_is_rank_zero(first):
    fw = get_framework("pytorch")
    # The cluster spec's order must not matter: rank 0 is the master/chief.
    cluster = {"worker": ["w0:2", "w1:3"], first: ["m:1"]}
    env = fw.env(cluster, first, 0)
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE", "GROUP_RANK")} == {
        "MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "3", "RANK": "0",
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0"}
    assert fw.env(cluster, "worker", 0)["RANK"] == "1"
    assert fw.env(cluster, "worker", 1)["RANK"] == "2"
    assert fw.env(cluster, "worker", 1)["MASTER_ADDR"] == "m"


def test_pytorch_local_rank_ignores_which_tasks_share_a_host():
    # One task is one node: tasks sharing host a are each local rank 0 of 1 (they counted the
    # host's tasks before issue 19, and Lightning then saw one node with several processes).
    fw = get_framework("pytorch")
    cluster = {"master": ["a:1"], "worker": ["a:2", "b:3", "a:4", "b:5"]}
    local = {(r, i): (fw.env(cluster, r, i)["LOCAL_RANK"], fw.env(cluster, r, i)["LOCAL_WORLD_SIZE"])
             for r, i in [("master", 0), ("worker", 0), ("worker", 1), ("worker", 2), ("worker", 3)]}
    assert set(local.values()) == {("0", "1")}


def test_pytorch_tensorboard_is_outside_the_world():
    fw = get_framework("pytorch")
    cluster = {"worker": ["a:1", "a:2"], "tensorboard": ["a:3"]}
    assert fw.env(cluster, "tensorboard", 0) == {}
    assert fw.env(cluster, "worker", 1)["WORLD_SIZE"] == "2"
    assert not fw.is_tracked("tensorboard") and fw.is_tracked("worker")


def test_pytorch_ipv6_hosts_keep_their_colons():
    env = get_framework("pytorch").env({"worker": ["::1:29500"]}, "worker", 0)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("::1", "29500")


# -- TensorFlow -----------------------------------------------------------------------------

TF_CLUSTER = {"chief": ["c:1"], "worker": ["w0:2", "w1:3"], "ps": ["p:4"], "evaluator": ["e:5"],
              "tensorboard": ["t:6"]}


def tf_config(role, index):
    env = get_framework("tensorflow").env(TF_CLUSTER, role, index)
    return json.loads(env["TF_CONFIG"]) if env else None


@pytest.mark.parametrize("role, index", [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)])
def test_tf_config_names_the_cluster_and_each_members_task(role, index):
    config = tf_config(role, index)
    assert config["cluster"] == {"chief": ["c:1"], "worker": ["w0:2", "w1:3"], "ps": ["p:4"]}
    assert config["task"] == {"type": role, "index": index}


def test_only_the_evaluator_sees_itself_in_tf_config():
    config = tf_config("evaluator", 0)
    assert config["cluster"] == {"chief": ["c:1"], "worker": ["w0:2", "w1:3"], "ps": ["p:4"],
                                 "evaluator": ["e:5"]}
    assert config["task"] == {"type": "evaluator", "index": 0}


def test_tensorboard_gets_no_tf_config():
    assert tf_config("tensorboard", 0) is None


def test_tf_config_leaves_out_roles_without_tasks():
    env = get_framework("tensorflow").env({"worker": ["w:1"], "ps": []}, "worker", 0)
    assert json.loads(env["TF_CONFIG"])["cluster"] == {"worker": ["w:1"]}


def test_tensorflow_tracks_chief_worker_evaluator_but_not_ps_or_tensorboard():
    fw = get_framework("tensorflow")
    assert [r for r in ("chief", "worker", "evaluator", "ps", "tensorboard") if fw.is_tracked(r)] == [
        "chief", "worker", "evaluator"]


# -- Horovod ----------------------------------------------------------------------------------

def test_horovod_ranks_sizes_and_rendezvous():
    fw = get_framework("horovod")
    cluster = {"worker": ["a:10", "a:11", "b:12"]}
    envs = [fw.env(cluster, "worker", i) for i in range(3)]
    for e in envs:
        assert e["HOROVOD_CONTROLLER"] == "gloo" and e["HOROVOD_CPU_OPERATIONS"] == "gloo"
        assert (e["HOROVOD_GLOO_RENDEZVOUS_ADDR"], e["HOROVOD_GLOO_RENDEZVOUS_PORT"]) == ("a", "10")
        assert e["HOROVOD_SIZE"] == "3"
    pick = ("HOROVOD_HOSTNAME", "HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
            "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE")
    # One task is one Horovod host (before issue 19 the two tasks on machine a were local
    # ranks 0 and 1 of host a): each its own HOROVOD_HOSTNAME, local rank 0 of 1.
    assert [tuple(e[k] for k in pick) for e in envs] == [
        ("a-worker-0", "0", "0", "1", "0", "3"),
        ("a-worker-1", "1", "0", "1", "1", "3"),
        ("b-worker-2", "2", "0", "1", "2", "3"),
    ]
    assert fw.env(cluster, "tensorboard", 0) == {}


# -- MXNet ------------------------------------------------------------------------------------

def test_mxnet_dmlc_variables_for_each_role():
    fw = get_framework("mxnet")
    cluster = {"scheduler": ["s:9000"], "server": ["v0:1", "v1:2"], "worker": ["w0:3"]}
    common = {"DMLC_PS_ROOT_URI": "s", "DMLC_PS_ROOT_PORT": "9000", "DMLC_NUM_SERVER": "2",
              "DMLC_NUM_WORKER": "1"}
    assert fw.env(cluster, "scheduler", 0) == dict(common, DMLC_ROLE="scheduler")
    assert fw.env(cluster, "server", 1) == dict(common, DMLC_ROLE="server", DMLC_NODE_HOST="v1")
    assert fw.env(cluster, "worker", 0) == dict(common, DMLC_ROLE="worker", DMLC_NODE_HOST="w0")
    assert [r for r in ("scheduler", "server", "worker") if fw.is_tracked(r)] == ["worker"]


# -- custom and role checks ---------------------------------------------------------------------

def test_custom_framework_accepts_any_role_and_adds_nothing():
    spec = job("custom", trainer=2, watcher={"command": "true", "tracked": False})
    fw = get_framework("custom")
    assert fw.env({"trainer": ["a:1", "a:2"]}, "trainer", 0) == {}
    plan = make_plan(spec)
    assert {t.id: t.tracked for t in plan.tasks} == {"trainer:0": True, "trainer:1": True, "watcher:0": False}


def test_tracked_can_be_overridden_per_role():
    spec = job("tensorflow", worker={"command": "true", "tracked": False}, ps={"command": "true", "tracked": True})
    assert {t.id: t.tracked for t in make_plan(spec).tasks} == {"worker:0": False, "ps:0": True}


@pytest.mark.parametrize("framework, roles, message", [
    ("tensorflow", {"chief": 2, "worker": 1}, "roles.chief.instances: TensorFlow has one chief: at most 1, got 2"),
    ("tensorflow", {"ps": 1}, "TensorFlow needs a 'chief' or a 'worker' role"),
    ("tensorflow", {"worker": 1, "evaluator": 2}, "TensorFlow has one evaluator"),
    ("tensorflow", {"worker": 1, "trainer": 1}, "roles.trainer: tensorflow knows the roles"),
    ("pytorch", {"master": 1, "chief": 1, "worker": 1}, "give 'master' or 'chief', not both"),
    ("pytorch", {"master": 2}, "PyTorch has one rank 0"),
    ("mxnet", {"server": 1, "worker": 1}, "roles.scheduler: MXNet needs exactly one scheduler"),
    ("mxnet", {"scheduler": 2, "worker": 1}, "MXNet needs exactly one scheduler"),
    ("horovod", {"worker": 1, "ps": 1}, "horovod knows the roles worker, tensorboard"),
    ("pytorch", {"tensorboard": 1}, "no role is tracked"),
])
def test_each_frameworks_role_rules_are_enforced(framework, roles, message):
    with pytest.raises(ValueError) as info:
        job(framework, **roles)
    assert message in str(info.value)
