"""Several clusters, a ResourceManager that restarts, and who did what: real YARN.

Besides the cluster ``HADOOP_CONF_DIR`` names (cluster A, the multi-node rig), these tests
start a second rig of their own (cluster B: ``scripts/rig.sh``, 2 nodes, on free loopback
addresses, RM recovery and simple HTTP authentication on, as production clusters run it),
whose ResourceManager they may restart, and stop it afterwards.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_jobs_reach_the_right_cluster_and_ride_out_rm_restarts.py
"""
from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
import requests

from conftest import REPO, YARN_CONF_DIR, run_json, start_subm, subm, wait_for
from submarine_py.backends.yarn.hadoop.addresses import rm_address
from submarine_py.backends.yarn.client.skein_driver import stop_driver

pytestmark = pytest.mark.yarn

JOBS = Path(__file__).resolve().parent / "yarn_jobs"
FINAL = ("FINISHED", "FAILED", "KILLED")


@dataclass(frozen=True)
class Rig:
    dir: Path
    conf_dir: str
    rm: str

    def app(self, app_id: str) -> Optional[Dict[str, Any]]:
        """What this cluster's RM knows of ``app_id`` (None: it has never heard of it)."""
        resp = requests.get(f"{self.rm}/ws/v1/cluster/apps/{app_id}", headers={"Accept": "application/json"},
                            timeout=10)
        return None if resp.status_code == 404 else resp.json()["app"]

    def resource_manager(self, action: str) -> None:
        """Stop or start this rig's ResourceManager (the daemon, as an operator would)."""
        script = (f'source "{self.dir}/env.sh"; export YARN_RESOURCEMANAGER_USER=$(id -un); '
                  f'yarn --daemon {action} resourcemanager')
        subprocess.run(["bash", "-c", script], check=True, timeout=120, capture_output=True)


@pytest.fixture(scope="module")
def cluster_b():
    """A second YARN of the tests' own (2 nodes), stopped after the module.

    Its folder is not one of pytest's temporary ones: pytest removes those of older
    sessions, and other sessions may start meanwhile."""
    directory = Path(tempfile.mkdtemp(prefix="subm-rig-b."))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_") and k != "HADOOP_CONF_DIR"}
    env.update(RIG_NODES="2")
    up = subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "up", str(directory)], env=env,
                        capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, f"the second rig did not start:\n{up.stderr[-3000:]}"
        conf_dir = str(directory / "conf")
        yield Rig(directory, conf_dir, rm_address(conf_dir))
    finally:
        if (directory / "conf" / "yarn-site.xml").exists():
            stop_driver(str(directory / "conf"))  # the skein driver the tests' `subm run` started for B
        subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "down", str(directory)], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(directory, ignore_errors=True)


def on(rig_conf: str, **extra: str) -> Dict[str, str]:
    """subm's environment for a job on the rig ``rig_conf``. Cluster B is a plain rig: its nodes
    see this machine's folders, so the environment need not travel there, even from a pass whose
    own rig (A) has isolated nodes."""
    plain = {} if rig_conf == YARN_CONF_DIR else {"SUBM_SHIP_ENVIRONMENT": "no"}
    return {"HADOOP_CONF_DIR": rig_conf, **plain, **extra}


def detach(job: str, conf_dir: str, *sets: str) -> str:
    rc, out, err = subm("run", str(JOBS / job), "--backend", "yarn", "--detach", *sets, env=on(conf_dir))
    assert rc == 0, err
    return out.strip()


def kill_quietly(rig_rm: str, app_id: str) -> None:
    try:
        requests.put(f"{rig_rm}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"},
                     params={"user.name": getpass.getuser()}, timeout=10)
    except requests.RequestException:
        pass


def running_tasks(app_id: str, conf_dir: str, n: int) -> bool:
    rc, report, err = run_json("status", app_id, env=on(conf_dir))
    return rc == 0 and [t["state"] for t in report["tasks"]].count("RUNNING") == n


# -- the right cluster ------------------------------------------------------------------

def test_each_job_reaches_the_cluster_hadoop_conf_dir_names(cluster_b):
    rm_a = rm_address(YARN_CONF_DIR)
    rig_a = Rig(Path(YARN_CONF_DIR), YARN_CONF_DIR, rm_a)
    apps = []
    try:
        # A first: its skein driver starts (or runs already) for A. Then B, then A again.
        for rig, other in ((rig_a, cluster_b), (cluster_b, rig_a), (rig_a, cluster_b)):
            app_id = detach("forever.yaml", rig.conf_dir)
            apps.append((rig, app_id))
            assert rig.app(app_id) is not None, f"{app_id} is not on the cluster HADOOP_CONF_DIR names"
            assert other.app(app_id) is None, f"{app_id} reached the other cluster"
            rc, report, err = run_json("kill", app_id, env=on(rig.conf_dir))
            assert rc == 0 and report["state"] == "KILLED", err
    finally:
        for rig, app_id in apps:
            kill_quietly(rig.rm, app_id)
    # One skein driver per cluster, each with its own log, in the user's SUBM_SKEIN_HOME.
    home = Path(os.environ["SUBM_SKEIN_HOME"])
    logs = sorted(home.glob("*/driver.log"))
    assert len(logs) >= 2, list(home.iterdir())


# -- who did it ---------------------------------------------------------------------------

def test_yarn_records_the_user_who_killed_a_job(cluster_b):
    app_id = detach("forever.yaml", cluster_b.conf_dir)
    try:
        wait_for(lambda: running_tasks(app_id, cluster_b.conf_dir, 2), timeout=180, what="both workers running",
                 interval=0.5)
        rc, report, err = run_json("kill", app_id, env=on(cluster_b.conf_dir))
        assert rc == 0, err
        assert report["state"] == "KILLED"
        app = cluster_b.app(app_id)
        assert app["state"] == "KILLED"
        assert f"killed by user {getpass.getuser()}" in app["diagnostics"], app["diagnostics"]
        assert "dr.who" not in app["diagnostics"]
    finally:
        kill_quietly(cluster_b.rm, app_id)


# -- a ResourceManager restart ------------------------------------------------------------

def test_run_status_and_logs_ride_out_a_resource_manager_restart(cluster_b, shared_tmp_path):
    """Work-preserving RM recovery keeps the job; the client waits for the RM instead of failing."""
    marker = shared_tmp_path / "go"
    env = on(cluster_b.conf_dir)
    run = start_subm("run", str(JOBS / "wait-for-marker.yaml"), "--backend", "yarn", "--output", "json",
                     "--set", "name=rm-restart", "--set", f"marker={marker}", "--set", "max_seconds=300", env=env)
    follow = status = None
    app_id = ""
    try:
        app_id = wait_for(lambda: _submitted(cluster_b, "yarn-wait-rm-restart"), timeout=120,
                          what="the application on cluster B", interval=0.5)
        wait_for(lambda: running_tasks(app_id, cluster_b.conf_dir, 2), timeout=180, what="both workers running",
                 interval=0.5)
        follow = start_subm("logs", app_id, "--role", "worker", "--follow", env=env)
        cluster_b.resource_manager("stop")
        status = start_subm("status", app_id, "--output", "json", env=env)
        time.sleep(3)  # an outage of a few seconds at least, whatever the machine's speed
        assert status.poll() is None, "subm status gave up while the RM was down"
        cluster_b.resource_manager("start")
        status_out, status_err = status.communicate(timeout=200)
        marker.touch()
        out, err = run.communicate(timeout=300)
        logs_out, logs_err = follow.communicate(timeout=120)
    finally:
        for proc in (run, follow, status):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        if app_id:
            kill_quietly(cluster_b.rm, app_id)
    assert run.returncode == 0, err
    assert '"state": "SUCCEEDED"' in out
    assert f"the YARN ResourceManager at {cluster_b.rm} does not answer" in err
    assert "answers again" in err
    assert status.returncode == 0, status_err
    assert '"state": "RUNNING"' in status_out
    assert follow.returncode == 0, logs_err
    assert "worker 0 up, waiting for" in logs_out and "worker 1 up, waiting for" in logs_out
    assert cluster_b.app(app_id)["finalStatus"] == "SUCCEEDED"


def _submitted(rig: Rig, name: str) -> str:
    resp = requests.get(f"{rig.rm}/ws/v1/cluster/apps", params={"applicationTags": "subm-test"},
                        headers={"Accept": "application/json"}, timeout=10)
    apps = [a for a in ((resp.json().get("apps") or {}).get("app") or []) if a["name"] == name
            and a["state"] not in FINAL]
    return apps[0]["id"] if apps else ""
