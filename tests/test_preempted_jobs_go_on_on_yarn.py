"""Preemption on a real YARN shared by two teams: a job that YARN's preemption monitor takes a
container from, for another queue's job, goes on without spending ``restart.max_restarts``.

The tests start a cluster of their own (``scripts/rig.sh``: 3 nodes with 2 GPUs each, queues
``teama`` and ``teamb`` at 50 % each, either free to grow to the whole cluster, and the
preemption monitor on) and stop it afterwards.

    python3 -m pytest -m yarn tests/test_preempted_jobs_go_on_on_yarn.py
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
import requests

from conftest import REPO, YARN_CONF_DIR, run_json, subm, wait_for

pytestmark = pytest.mark.yarn

JOBS = Path(__file__).resolve().parent / "yarn_jobs"
FINAL = ("FINISHED", "FAILED", "KILLED")


class Cluster:
    """A rig of the tests' own: its configuration and its ResourceManager's address."""

    def __init__(self, directory: Path):
        from submarine_py.backends.yarn.hadoop.addresses import rm_address

        self.dir = directory
        self.conf_dir = str(directory / "conf")
        self.rm = rm_address(self.conf_dir)
        # What its env.sh sets (HADOOP_HOME, JAVA_HOME, PATH): skein's driver runs `yarn` with Java 8 or 11.
        dump = subprocess.run(["bash", "-c", f'source "{directory}/env.sh" && env -0'], capture_output=True,
                              check=True, timeout=60).stdout.decode()
        rig_env = dict(line.split("=", 1) for line in dump.split("\0") if "=" in line)
        self.rig_env = {k: rig_env[k] for k in ("HADOOP_HOME", "JAVA_HOME", "PATH") if k in rig_env}
        self.isolated = rig_env.get("RIG_ISOLATED") == "1"

    def env(self) -> Dict[str, str]:
        # A plain rig's nodes see this machine's folders: the environment need not travel.
        plain = {} if self.isolated else {"SUBM_SHIP_ENVIRONMENT": "no"}
        return {**self.rig_env, "HADOOP_CONF_DIR": self.conf_dir, **plain}

    def app(self, app_id: str) -> Dict[str, Any]:
        resp = requests.get(f"{self.rm}/ws/v1/cluster/apps/{app_id}", headers={"Accept": "application/json"},
                            timeout=10)
        resp.raise_for_status()
        return resp.json()["app"]

    def final(self, app_id: str) -> Optional[Dict[str, Any]]:
        app = self.app(app_id)
        return app if app["state"] in FINAL else None

    def kill(self, app_id: str) -> None:
        try:
            if self.app(app_id)["state"] not in FINAL:
                requests.put(f"{self.rm}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"},
                             params={"user.name": os.environ.get("USER") or "root"}, timeout=10)
        except requests.RequestException:
            pass


@pytest.fixture(scope="module")
def two_teams():
    """3 nodes, 2 GPUs each; queues teama and teamb at 50 %; YARN's preemption monitor on: the
    rig HADOOP_CONF_DIR names where it is one (CI's preemption pass), else one of the module's own."""
    ours = os.environ.get("RIG_DIR")
    if (ours and YARN_CONF_DIR and Path(YARN_CONF_DIR).resolve() == Path(ours).resolve() / "conf"
            and os.environ.get("RIG_PREEMPTION") == "1" and os.environ.get("RIG_QUEUES") == "teama:50,teamb:50"
            and os.environ.get("RIG_GPUS") == "2" and os.environ.get("RIG_NODES") == "3"):
        yield Cluster(Path(ours))
        return
    directory = Path(tempfile.mkdtemp(prefix="subm-rig-teams."))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_") and k != "HADOOP_CONF_DIR"}
    env.update(RIG_NODES="3", RIG_GPUS="2", RIG_QUEUES="teama:50,teamb:50", RIG_PREEMPTION="1")
    up = subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "up", str(directory)], env=env,
                        capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, f"the rig with two queues did not start:\n{up.stderr[-3000:]}"
        yield Cluster(directory)
    finally:
        if (directory / "conf" / "yarn-site.xml").exists():
            from submarine_py.backends.yarn.client.skein_driver import stop_driver

            stop_driver(str(directory / "conf"))
        subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "down", str(directory)], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(directory, ignore_errors=True)


def detach(cluster: Cluster, job: str, **variables: Any) -> str:
    sets = [a for k, v in variables.items() for a in ("--set", f"{k}={v}")]
    rc, out, err = subm("run", str(JOBS / job), "--backend", "yarn", "--detach", *sets, env=cluster.env())
    assert rc == 0, err
    return out.strip()


def status(cluster: Cluster, app_id: str) -> Dict[str, Any]:
    rc, report, err = run_json("status", app_id, env=cluster.env())
    assert rc in (0, 1), err
    return report


def test_a_job_preempted_for_another_queue_goes_on_without_spending_max_restarts(two_teams):
    cluster = two_teams
    greedy = detach(cluster, "preemptible.yaml", queue="teama")  # every GPU of the cluster, max_restarts 0
    urgent = ""
    try:
        wait_for(lambda: [t["state"] for t in status(cluster, greedy)["tasks"]] == ["RUNNING"] * 3, timeout=240,
                 what="teama's 3 workers running on the cluster's 6 GPUs", interval=1)
        # teamb is under its share (none of its 3 guaranteed GPUs): YARN takes 2 back from teama.
        urgent = detach(cluster, "urgent.yaml", queue="teamb")
        done = wait_for(lambda: cluster.final(urgent), timeout=300, what="teamb's job to run and end", interval=1)
        assert done["finalStatus"] == "SUCCEEDED", done["diagnostics"]
        app = wait_for(lambda: cluster.final(greedy), timeout=400, what="teama's job to go on and end", interval=1)
    finally:
        for app_id in (greedy, urgent):
            if app_id:
                cluster.kill(app_id)
    report = status(cluster, greedy)
    assert app["finalStatus"] == "SUCCEEDED", report["diagnostics"]
    assert report["state"] == "SUCCEEDED"
    counts = report["restarts_by_cause"]
    assert counts["preempted"] >= 1 and counts["failed"] == 0, counts
    assert report["attempts"] == 1 + counts["preempted"]
    rc, text, err = subm("status", greedy, env=cluster.env())
    assert f"Restarts: {counts['preempted']} preempted (the cluster's faults spend no max_restarts)" in text, text
    rc, logs, err = subm("logs", greedy, env=cluster.env())
    decisions = "\n".join(line for line in logs.splitlines() if "preempt" in line or "restarting" in line)
    # YARN's word: its exit status (-102, or the NodeManager's -106), or where the NodeManager
    # has forgotten the container (as seen on the rig), the RM's diagnostics through skein.
    assert re.search(r"worker:\d was preempted \(attempt 1\): its container ended \((exit code -10[26]; )?"
                     r"YARN container \S+ on \S+ FAILED.*(exit status -10[26]|Container preempted by scheduler)",
                     decisions), decisions or logs[:3000]
    assert "restarting the gang: attempt 2 (the cluster's fault: restart 1 of at most 10" in decisions, decisions
