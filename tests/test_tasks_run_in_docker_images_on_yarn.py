"""Docker on YARN: the container request of a task in an image carries YARN's Docker runtime
variables (image, network, mounts), in the spec skein gets and as the NodeManager's
launch_container.sh shows them.

What YARN's Docker runtime then does with them needs Hadoop's container-executor, which the
project's rig lacks (the docker_yarn tests need it): a NodeManager with the
DefaultContainerExecutor ignores the variables, and nothing here claims the task ran in an image.
"""
from __future__ import annotations

import re

import pytest
import requests

from conftest import YARN_CONF_DIR, run_json, write_job
from submarine_py.backends.yarn.client.app_spec import YarnOptions, build_application_spec, docker_env
from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

pytest.importorskip("skein", reason="skein is not installed (pip install '.[yarn]')")

SPEC = {
    "name": "dockered",
    "docker": {"image": "localhost/subm-test:bookworm", "mounts": ["/data:/data:ro", "/scratch:/scratch:rw"]},
    "roles": {
        "ps": {"command": "python3 ps.py", "docker": {"image": "localhost/ps-image:2", "network": "bridge"}},
        "worker": {"instances": 2, "command": "python3 w.py"},
        "tensorboard": {"command": "sleep 1", "docker": {"image": "localhost/tb:1"}},
    },
}


@pytest.mark.unit
def test_every_role_with_an_image_gets_the_docker_runtime_variables():
    plan = make_plan(spec_from_dict(SPEC))
    worker = docker_env(plan.task("worker", 0))
    assert worker == {
        "YARN_CONTAINER_RUNTIME_TYPE": "docker",
        "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE": "localhost/subm-test:bookworm",
        "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK": "host",
        "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS": "/data:/data:ro,/scratch:/scratch:rw",
    }
    ps = docker_env(plan.task("ps", 0))  # a role's own image overrides the job's; mounts inherited
    assert ps["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "localhost/ps-image:2"
    assert ps["YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK"] == "bridge"
    assert ps["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"] == "/data:/data:ro,/scratch:/scratch:rw"


@pytest.mark.unit
def test_the_skein_spec_runs_the_executor_with_the_images_python():
    plan = make_plan(spec_from_dict(SPEC))
    spec = build_application_spec(plan, YarnOptions(job_file="/tmp/job.json", rm_urls=("http://rm:8088",)))
    worker = spec.services["worker"]
    assert worker.env["YARN_CONTAINER_RUNTIME_TYPE"] == "docker"
    # The image's python3 (not the submitter's interpreter) runs the executor and is the task's python.
    assert worker.script.startswith("SUBM_PY=$(command -v python3) || ")
    assert worker.script.endswith('export PATH="$PWD/.subm-bin:$PATH"\nexec "$SUBM_PY" -S subm_executor.py')
    assert worker.env["SUBM_PYTHON_WRAPPER"] == "1"
    assert "docker" not in " ".join(spec.master.env)  # the AM runs outside images


def _rig() -> str:
    if not YARN_CONF_DIR:
        return "no YARN cluster: set HADOOP_CONF_DIR (bash scripts/rig.sh up DIR)"
    from submarine_py.backends.yarn.hadoop.addresses import rm_address

    try:
        requests.get(rm_address(YARN_CONF_DIR) + "/ws/v1/cluster/info", timeout=3).raise_for_status()
    except requests.RequestException as exc:
        return f"the YARN ResourceManager does not answer: {exc}"
    return ""


@pytest.mark.yarn
def test_a_task_in_an_image_asks_yarn_for_the_docker_runtime_with_its_image_network_and_mounts(tmp_path):
    """The container YARN launches for a task in an image is asked for with the Docker runtime,
    the job's image, the network (host by default) and every mount, exactly as the job file says
    and nothing more of the runtime's: the NodeManager's launch_container.sh exports these and
    no other YARN_CONTAINER_RUNTIME_* variable."""
    why = _rig()
    if why:
        pytest.skip(why)
    job = write_job(tmp_path / "job", """
        name: docker-on-yarn
        docker: {image: localhost/subm-test:bookworm, mounts: ["/tmp:/tmp:ro", "/opt/data:/data:rw"]}
        roles:
          worker:
            resources: {memory: 256 MiB}
            command: echo launched
    """)
    rc, report, err = run_json("run", str(job), "--backend", "yarn", env={"HADOOP_CONF_DIR": YARN_CONF_DIR})
    assert rc == 0, err  # (launched: its launch_container.sh is in its log folder)
    task = report["tasks"][0]
    node = task["log"].split("/node/")[0]
    cid = task["log"].rstrip("/").split("/")[-2]
    launch = requests.get(f"{node}/ws/v1/node/containers/{cid}/logs/launch_container.sh", timeout=10)
    assert launch.status_code == 200, launch.text
    runtime = re.findall(r'^export (YARN_CONTAINER_RUNTIME_\w+)="(.*)"$', launch.text, re.M)
    assert sorted(runtime) == sorted({
        "YARN_CONTAINER_RUNTIME_TYPE": "docker",
        "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE": "localhost/subm-test:bookworm",
        "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK": "host",
        "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS": "/tmp:/tmp:ro,/opt/data:/data:rw",
    }.items()), f"the runtime variables {cid} was launched with: {runtime}"
