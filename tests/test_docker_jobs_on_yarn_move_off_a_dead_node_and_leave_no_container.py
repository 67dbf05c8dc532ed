"""Docker jobs on YARN when things end early: a node that dies under the job (its NodeManager
and its containers killed like a machine that fails) moves the gang to other nodes, and
``subm kill`` leaves no Docker container behind, not even a stopped one.

Needs the Docker-mode rig with 2 nodes or more (``docker_yarn``: see tests/docker_rig.py); the
node is killed with scripts/rig/node.sh (``FORCE=1 node.sh stop N``) and started again.
"""
from __future__ import annotations

import os
import socket
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
import requests

from conftest import REPO, wait_for
from docker_rig import RigUser, docker_containers, docker_rig, rm_get

pytestmark = pytest.mark.docker_yarn

NODE_SH = REPO / "scripts" / "rig" / "node.sh"


@pytest.fixture(scope="module")
def user() -> RigUser:
    return RigUser(docker_rig(), "faults")


def am_status(rig: Dict[str, Any], app_id: str) -> Optional[Dict[str, Any]]:
    try:
        resp = requests.get(f"{rig['rm']}/proxy/{app_id}/pages/subm/v1/status", timeout=5)
        return resp.json() if resp.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def running(rig, app_id: str, n: int, attempt: int = 1):
    report = am_status(rig, app_id)
    tasks = (report or {}).get("tasks") or []
    if len(tasks) == n and all(t["state"] == "RUNNING" and t["attempt"] >= attempt for t in tasks):
        return report
    return None


def waiting_job(user: RigUser, name: str, instances: int, memory_mb: int = 256) -> Path:
    """Workers in the image that stay up until ``go`` appears in the job's shared folder."""
    return user.job(f"""
        name: {name}
        docker: {user.docker_block()}
        shared_dir: {user.shared}
        restart: {{policy: gang, max_restarts: 2}}
        timeouts: {{lost_after_seconds: 3, gang_seconds: 180}}
        roles:
          worker:
            instances: {instances}
            resources: {{memory: {memory_mb} MiB, vcores: 1}}
            command: >-
              echo "worker $SUBM_INDEX attempt $SUBM_ATTEMPT on $SUBM_HOST";
              for i in $(seq 3000); do [ -e "$SUBM_SHARED_DIR/go" ] && exit 0; sleep 0.1; done; exit 3
    """)


def submit(user: RigUser, job: Path) -> str:
    rc, report, err = user.run_json("run", str(job), "--backend", "yarn", "--detach")
    assert rc == 0, err
    return report["app_id"]


def ended(user: RigUser, app_id: str) -> Optional[Dict[str, Any]]:
    rc, report, err = user.run_json("status", app_id)
    return report if report.get("state") in ("SUCCEEDED", "FAILED", "KILLED") else None


def node_numbers(rig) -> Dict[str, int]:
    nodes = {}
    for i, d in enumerate(rig["node_dirs"], start=1):
        for prop in ET.parse(Path(d) / "conf" / "yarn-site.xml").getroot().iter("property"):
            if prop.findtext("name") == "yarn.nodemanager.hostname":
                nodes[socket.gethostbyname(prop.findtext("value"))] = i
    return nodes


def node_sh(rig, action: str, n: int, force: bool = False) -> None:
    env = dict(os.environ, RIG_DIR=rig["rig_dir"], **({"FORCE": "1"} if force else {}))
    subprocess.run(["bash", str(NODE_SH), action, str(n)], env=env, check=True, timeout=120, capture_output=True,
                   start_new_session=True)


def test_a_node_that_dies_under_a_docker_job_moves_the_gang(user):
    rig = user.rig
    nodes = node_numbers(rig)
    if len(nodes) < 2:
        pytest.fail(f"the Docker rig has {len(nodes)} node(s); this test needs 2 or more (RIG_NODES=3)")
    node_mb = max(n["usedMemoryMB"] + n["availMemoryMB"] for n in rm_get(rig, "/ws/v1/cluster/nodes")["nodes"]["node"])
    app_id = submit(user, waiting_job(user, "docker-node-dies", 2, memory_mb=int(node_mb * 0.6)))
    report = wait_for(lambda: running(rig, app_id, 2), timeout=180, what="both workers running", interval=0.5)
    # Nodes by address: a task's host may be a name /etc/hosts gives that address (the secure
    # rig names 127.0.0.80-82 and leaves the names behind).
    ip = socket.gethostbyname
    am_host = ip(rm_get(rig, f"/ws/v1/cluster/apps/{app_id}")["app"]["amHostHttpAddress"].rsplit(":", 1)[0])
    hosts = {t["host"] for t in report["tasks"]}
    assert len(hosts) == 2, f"one worker per node (each takes 60 % of one): {hosts}"
    victim = next(h for h in hosts if ip(h) != am_host)
    before = docker_containers(app_id)
    node_sh(rig, "stop", nodes[ip(victim)], force=True)
    try:
        after = wait_for(lambda: running(rig, app_id, 2, attempt=2), timeout=180,
                         what="the gang running again after the node died", interval=0.5)
    finally:
        node_sh(rig, "start", nodes[ip(victim)])
    assert victim not in {t["host"] for t in after["tasks"]}
    events = " | ".join(e["message"] for e in after.get("events") or [])
    assert f"no heartbeat from its executor on {victim}" in events, events
    assert len(before) == 2
    (user.shared / app_id / "go").touch()
    final = wait_for(lambda: ended(user, app_id), timeout=120, what="the job's end", interval=1)
    assert final["state"] == "SUCCEEDED", final.get("diagnostics")
    assert final["attempts"] == 2
    wait_for(lambda: docker_containers(app_id) == [], timeout=30, what="no container of the job left")


def test_subm_kill_leaves_no_docker_container(user):
    rig = user.rig
    app_id = submit(user, waiting_job(user, "docker-killed", 2))
    wait_for(lambda: running(rig, app_id, 2), timeout=180, what="both workers running", interval=0.5)
    assert len(docker_containers(app_id)) == 2
    rc, report, err = user.run_json("kill", app_id)
    assert rc == 0, err
    assert report["state"] == "KILLED"
    # YARN stops, then removes, each container ("docker rm"): none is left, not even a stopped one.
    wait_for(lambda: docker_containers(app_id) == [], timeout=15, what="no Docker container of the killed job",
             explain=lambda: subprocess.run(["docker", "ps", "-a"], capture_output=True, text=True).stdout)
