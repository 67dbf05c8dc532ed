"""TF_CONFIG as TensorFlow itself reads it, for chief, workers, ps and evaluator.

One job, one TensorFlow import per task: every task parses TF_CONFIG with
``TFConfigClusterResolver`` and checks what TensorFlow understood. The ``ps``
never finishes by itself; the job must succeed without it and stop it.
"""
import importlib.util
import json
from pathlib import Path

import pytest

from conftest import processes_of, run_json, write_job

pytestmark = [pytest.mark.tensorflow, pytest.mark.local,
              pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                 reason="TensorFlow is not installed")]

CHECK_TF_CONFIG = """\
import json, os, pathlib, sys, time

import tensorflow as tf

shared = pathlib.Path(sys.argv[1])
role, index = os.environ["SUBM_ROLE"], int(os.environ["SUBM_INDEX"])
ours = json.loads(os.environ["SUBM_CLUSTER_SPEC"])
assert {r: len(a) for r, a in ours.items()} == {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1}, ours

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
expected = {r: ours[r] for r in ("chief", "worker", "ps")}
if role == "evaluator":  # only the evaluator sees itself in the cluster
    expected["evaluator"] = ours["evaluator"]
assert resolver.task_type == role, (resolver.task_type, role)
assert resolver.task_id == index, (resolver.task_id, index)
assert resolver.cluster_spec().as_dict() == expected, (resolver.cluster_spec().as_dict(), expected)
own = f"{os.environ['SUBM_HOST']}:{os.environ['SUBM_PORT']}"
assert resolver.cluster_spec().task_address(role, index) == own
print(f"{role}:{index} TF_CONFIG ok: {resolver.task_type} {resolver.task_id}", flush=True)

if role == "ps":
    (shared / "ps-checked").touch()
    while True:  # a parameter server serves until it is stopped
        time.sleep(1)
if role == "chief":  # finish only once the (untracked) ps has been checked too
    deadline = time.monotonic() + 240
    while not (shared / "ps-checked").exists():
        assert time.monotonic() < deadline, "the ps never checked its TF_CONFIG"
        time.sleep(0.1)
"""


def test_tf_config_read_by_tensorflow_for_every_role(tmp_path, subm_home, no_leftovers):
    shared = tmp_path / "shared"
    shared.mkdir()
    job = write_job(tmp_path / "job", """\
        name: tf-config
        framework: tensorflow
        timeouts: {gang_seconds: 120}
        roles:
          chief: {command: "python check.py {{ shared }}", resources: {memory: 1 GiB}}
          # With a ps and a chief workers are untracked by default (ParameterServerStrategy);
          # these finish by themselves and the test wants each one's check, so they are tracked.
          worker: {instances: 2, command: "python check.py {{ shared }}", resources: {memory: 1 GiB}, tracked: true}
          ps: {command: "python check.py {{ shared }}", resources: {memory: 1 GiB}}
          evaluator: {command: "python check.py {{ shared }}", resources: {memory: 1 GiB}}
        files:
          check.py: check.py
    """, {"check.py": CHECK_TF_CONFIG})
    rc, report, _ = run_json("run", str(job), "--backend", "local", "--set", f"shared={shared}",
                             env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=400)
    no_leftovers.append(report["app_id"])
    logs = {f"{t['role']}:{t['index']}": Path(t["log"]) for t in report["tasks"]}
    detail = "\n".join(f"--- {k}\n{p.with_suffix('.stderr').read_text()[-2000:]}" for k, p in logs.items())
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{json.dumps(report, indent=1)}\n{detail}"
    states = {f"{t['role']}:{t['index']}": (t["state"], t["tracked"]) for t in report["tasks"]}
    assert states == {
        "chief:0": ("SUCCEEDED", True), "worker:0": ("SUCCEEDED", True), "worker:1": ("SUCCEEDED", True),
        "evaluator:0": ("SUCCEEDED", True), "ps:0": ("STOPPED", False)}
    for task, path in logs.items():
        assert f"{task} TF_CONFIG ok" in path.read_text()
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert "stopping untracked tasks: ps:0" in am_log
    assert processes_of(report["app_id"]) == []
