"""The pytorch-project example: a package, a data folder, a config file and torchrun-style
snapshots through SUBM_SHARED_DIR, unchanged on the local backend (on YARN:
test_users_programs_run_unchanged_on_yarn.py)."""
import importlib.util
import re

import pytest

from conftest import REPO, processes_of, run_json, subm

EXAMPLE = REPO / "examples" / "pytorch-project"

pytestmark = [
    pytest.mark.torch, pytest.mark.local,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"),
]


def test_the_example_validates_with_a_shared_dir_locally(subm_home):
    rc, out, err = subm("validate", str(EXAMPLE / "job.yaml"), "--backend", "local")
    assert rc == 0, err
    assert f"SUBM_SHARED_DIR={subm_home}/local/<app_id>/shared" in out
    assert "\n    LOCAL_RANK=1" not in out and "\n    GROUP_RANK=1" in out  # two tasks: two nodes, one process each


def test_a_failure_injected_by_set_restarts_the_gang_and_every_rank_resumes(subm_home, no_leftovers):
    rc, report, err = run_json("run", str(EXAMPLE / "job.yaml"), "--backend", "local",
                               "--set", "fail_at_epoch=3", timeout=400)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, f"{report}\n{err}"
    job_dir = subm_home / "local" / report["app_id"]
    rank0 = (job_dir / "logs" / "worker-0.stdout").read_text()
    epochs = [int(e) for e in re.findall(r"^epoch (\d+)/8", rank0, re.M)]
    assert epochs == [1, 2, 3, 4, 5, 6, 7, 8], rank0  # epochs 1-3, the failure, then 4-8: none twice
    for i in range(2):
        out = (job_dir / "logs" / f"worker-{i}.stdout").read_text()
        assert f"[rank {i}] resuming from the snapshot at epoch 3" in out, out
    assert (job_dir / "shared" / "spirals.pt").is_file()
    assert sorted(p.name for p in (job_dir / "tasks" / "worker-1").iterdir()) == [
        "config.toml", "data", "train.py", "trainer"]
    assert processes_of(report["app_id"]) == []
