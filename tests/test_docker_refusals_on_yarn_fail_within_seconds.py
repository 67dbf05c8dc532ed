"""When the NodeManager refuses to launch a Docker container, the job fails at once: `subm run`
exits within 15 s of the refusal (it used to burn every restart and a new AM attempt, ~65 s),
quoting YARN's words and naming the setting in container-executor.cfg to change.

Needs the Docker-mode rig (``docker_yarn``: see tests/docker_rig.py). The refusal's moment is the
NodeManager's log line "Exception from container-launch"; the verdicts themselves are unit-tested
in test_refused_launches_fail_the_job_at_once.py.
"""
from __future__ import annotations

import subprocess
import time

import pytest

from docker_rig import RigUser, docker_rig, nm_refusal_times

pytestmark = pytest.mark.docker_yarn

#: The goal: `subm run` exits this soon after the NodeManager refused the container.
WITHIN_SECONDS = 15.0
UNTRUSTED = "untrusted-lce/subm-test:bookworm"


@pytest.fixture(scope="module")
def user() -> RigUser:
    rig = docker_rig()
    # The rig's image under a registry container-executor.cfg does not trust (a tag: no registry).
    subprocess.run(["docker", "tag", rig["image"], UNTRUSTED], check=True)
    return RigUser(rig, "refusals")


@pytest.mark.parametrize("case", ["untrusted image", "mount not allowed"])
def test_a_refused_launch_ends_subm_run_within_seconds_naming_the_setting(user, case):
    image, mounts, setting, words = {
        "untrusted image": (UNTRUSTED, [], "docker.trusted.registries", f"image: {UNTRUSTED} is not trusted"),
        "mount not allowed": (user.rig["image"], ["/opt:/opt:ro"], "docker.allowed.ro-mounts",
                              "does not allow docker mount '/opt:/opt:ro'"),
    }[case]
    job = user.job(f"""
        name: refused
        docker: {{image: {image}, mounts: {mounts}}}
        restart: {{policy: gang, max_restarts: 5}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: python -c "print(1)"
    """)
    rc, report, err = user.run_json("run", str(job), "--backend", "yarn", timeout=300)
    exited = time.time()
    assert rc == 1, err
    assert report["state"] == "FAILED" and report["attempts"] == 1, report["diagnostics"]
    diag = report["diagnostics"]
    assert words in diag and f"{setting} (container-executor.cfg on every NodeManager)" in diag, diag
    assert diag.endswith("job failed (no restart can help)")
    refused = nm_refusal_times(user.rig, report["app_id"])
    assert refused, "the NodeManager logged no refused launch"
    assert exited - refused[0] < WITHIN_SECONDS, f"subm run exited {exited - refused[0]:.1f} s after the refusal"
