"""PyTorch DDP in a Docker image on YARN: examples/pytorch-ddp as a user runs it, in the rig's
test image (python3 only, no ``python``), torch from the submitter's venv mounted read-only
(``environment.python`` names that venv's interpreter, present in the image through the mount).

Needs the Docker-mode rig (``docker_yarn``: see tests/docker_rig.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO
from docker_rig import RigUser, container_log, docker_rig

pytestmark = [pytest.mark.docker_yarn, pytest.mark.torch]

TRAIN = (REPO / "examples" / "pytorch-ddp" / "train.py").read_text()


@pytest.fixture(scope="module")
def user() -> RigUser:
    return RigUser(docker_rig(), "ddp")


def ddp_job(user: RigUser, crash_once_at: int = 0) -> Path:
    return user.job(f"""
        name: ddp-in-docker
        framework: pytorch
        docker: {user.docker_block()}
        environment: {{python: {user.rig['python']}}}
        restart: {{policy: gang, max_restarts: 1}}
        timeouts: {{gang_seconds: 180}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 1 GiB, vcores: 1}}
            command: python train.py --epochs 4 --crash-once-at {crash_once_at}
            env: {{OMP_NUM_THREADS: "1"}}
        files: {{train.py: train.py}}
    """, {"train.py": TRAIN})


def losses(text: str):
    return [float(x) for x in re.findall(r"loss[ =:]+([0-9.]+)", text)]


def test_a_two_worker_ddp_job_in_an_image_trains(user):
    rc, report, err = user.run_json("run", str(ddp_job(user)), "--backend", "yarn", timeout=600)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    assert report["attempts"] == 1
    rank0 = next(t for t in report["tasks"] if t["index"] == 0)
    out = container_log(rank0)
    assert "rank 0/2" in out, out
    found = losses(out)
    assert len(found) >= 2 and found[-1] < found[0], out
    # In the image: its own root, the submitting user's uid (the LinuxContainerExecutor's doing).
    launch = container_log(rank0, "launch_container.sh")
    assert 'YARN_CONTAINER_RUNTIME_TYPE="docker"' in launch


def test_a_gang_restart_in_docker_resumes_from_its_checkpoint(user):
    rc, report, err = user.run_json("run", str(ddp_job(user, crash_once_at=2)), "--backend", "yarn", timeout=600)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    assert report["attempts"] == 2
    assert {t["restarts"] for t in report["tasks"]} == {1}
    rank0 = next(t for t in report["tasks"] if t["index"] == 0)
    out = container_log(rank0)
    assert "resumed from checkpoint.pt: epoch 2 done" in out, out
