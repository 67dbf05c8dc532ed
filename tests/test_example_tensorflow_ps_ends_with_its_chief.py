"""The tensorflow-ps example (ParameterServerStrategy, real TensorFlow): its workers and ps
serve until stopped, and its job file does not say so: beside a ps and a chief, workers are
untracked by default, so the chief's success ends the job."""
import importlib.util
from pathlib import Path

import pytest

from conftest import REPO, processes_of, run_json
from submarine_py.jobfile import load_job

EXAMPLE = REPO / "examples" / "tensorflow-ps"

pytestmark = [pytest.mark.tensorflow, pytest.mark.local,
              pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")]


def test_the_chief_decides_the_end_of_a_parameter_server_job(no_leftovers):
    spec = load_job(str(EXAMPLE / "job.yaml"), {})
    assert all(role.tracked is None for role in spec.roles.values())  # the framework's defaults decide
    rc, report, err = run_json("run", str(EXAMPLE / "job.yaml"), "--backend", "local", "--set", "epochs=2",
                               env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=400)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{err}"
    states = {f"{t['role']}:{t['index']}": (t["state"], t["tracked"]) for t in report["tasks"]}
    assert states == {"chief:0": ("SUCCEEDED", True), "worker:0": ("STOPPED", False), "ps:0": ("STOPPED", False)}
    chief = next(t for t in report["tasks"] if t["role"] == "chief")
    assert "epoch 2 loss" in Path(chief["log"]).read_text()
    assert processes_of(report["app_id"]) == []
