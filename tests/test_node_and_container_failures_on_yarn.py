"""Faults on a real YARN: a node that dies, containers that never start, an AM that is lost.

Like ``test_jobs_run_end_to_end_on_yarn.py``, against the cluster ``HADOOP_CONF_DIR`` names. Killing a node needs a
multi-node rig made by ``scripts/rig.sh`` whose ``RIG_DIR`` is
exported (``source $RIG_DIR/env.sh`` does it) and whose conf is ``HADOOP_CONF_DIR``: CI's rig.
The shared rig in /tmp/yarn-rig is left alone unless ``SUBM_RIG_KILLABLE=1``.

    source $RIG_DIR/env.sh && python3 -m pytest -m yarn tests/test_node_and_container_failures_on_yarn.py
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import requests

from conftest import REPO, YARN_CONF_DIR, preinstalled_python, wait_for
from test_jobs_run_end_to_end_on_yarn import (  # noqa: F401 (apps: a fixture)
    JOBS, RM, apps, detach, rm_app, rm_get, rm_nodes, run_job, wait_final)

pytestmark = pytest.mark.yarn


def am_report(app_id: str) -> Optional[Dict[str, Any]]:
    """The AM's own report (events included), through the RM's web proxy; None while it starts."""
    try:
        resp = requests.get(f"{RM}/proxy/{app_id}/pages/subm/v1/status", timeout=5)
        return resp.json() if resp.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def events(report: Optional[Dict[str, Any]]) -> str:
    return "\n".join(e["message"] for e in (report or {}).get("events") or [])


def gang_running(app_id: str, n: int, attempt: int = 1) -> Optional[Dict[str, Any]]:
    """The AM's report once ``n`` tasks run at ``attempt`` or later (counted from 1, as reports show)."""
    report = am_report(app_id)
    tasks = (report or {}).get("tasks") or []
    if len(tasks) == n and all(t["state"] == "RUNNING" and t["attempt"] >= attempt for t in tasks):
        return report
    return None


def cluster_picture(app_id: str) -> str:
    """What a fault test saw when it gave up: the AM's tasks and decisions, the nodes, the apps."""
    report = am_report(app_id) or {}
    tasks = [f"{t['role']}:{t['index']} {t['state']} attempt {t['attempt']} on {t.get('host')}"
             for t in report.get("tasks") or []]
    nodes = [f"{n['nodeHostName']} {n['state']} used {n.get('usedMemoryMB')} MiB, free {n.get('availMemoryMB')} MiB, "
             f"{n.get('numContainers')} containers" for n in rm_nodes()]
    running = (rm_get("/ws/v1/cluster/apps", states="ACCEPTED,RUNNING").get("apps") or {}).get("app") or []
    apps = [f"{a['id']} {a['name']} {a['state']} {a.get('allocatedMB')} MiB" for a in running]
    return "\n".join(["tasks: " + "; ".join(tasks), "nodes: " + "; ".join(nodes), "apps: " + "; ".join(apps),
                      "events:", events(report)])


def app_attempts(app_id: str) -> List[Dict[str, Any]]:
    return ((rm_get(f"/ws/v1/cluster/apps/{app_id}/appattempts").get("appAttempts") or {})
            .get("appAttempt") or [])


# -- a rig whose nodes this test may kill --------------------------------------------------

def killable_rig() -> Optional[Dict[str, Any]]:
    """``{"node_sh", "rig_dir", "nodes": {host: n}}`` of the rig behind HADOOP_CONF_DIR, or None."""
    rig_dir = os.environ.get("RIG_DIR")
    if not rig_dir or not YARN_CONF_DIR or not (Path(rig_dir) / "env.sh").is_file():
        return None
    rig = Path(rig_dir).resolve()
    if Path(YARN_CONF_DIR).resolve() != rig / "conf":
        return None
    if rig == Path("/tmp/yarn-rig") and os.environ.get("SUBM_RIG_KILLABLE") != "1":
        return None  # the rig everyone on this machine shares
    node_sh = REPO / "scripts" / "rig" / "node.sh"
    nodes = {}
    for conf in sorted(rig.glob("node*/conf/yarn-site.xml")):
        for prop in ET.parse(conf).getroot().iter("property"):
            if prop.findtext("name") == "yarn.nodemanager.hostname":
                nodes[prop.findtext("value")] = int(conf.parent.parent.name[len("node"):])
    return {"node_sh": node_sh, "rig_dir": rig, "nodes": nodes} if len(nodes) >= 2 else None


RIG = killable_rig()
# In CI (CI=true) a skip is reported as a failure (conftest): CI's rig is killable.
needs_killable_rig = pytest.mark.skipif(
    RIG is None,
    reason="no multi-node rig of this test's own to kill a node of: export RIG_DIR of a rig of "
           "scripts/rig.sh (RIG_NODES>=2) whose conf is HADOOP_CONF_DIR (CI's rig does)")


def node_sh(action: str, n: int, force: bool = False) -> None:
    env = dict(os.environ, RIG_DIR=str(RIG["rig_dir"]), **({"FORCE": "1"} if force else {}))
    subprocess.run(["bash", str(RIG["node_sh"]), action, str(n)], env=env, check=True, timeout=120,
                   capture_output=True, start_new_session=True)  # a restarted NM must not share our fate


def die_tasks_first(n: int, marker: Path) -> None:
    """Node ``n`` dies as a machine may: its tasks first (their shells, whose command names
    ``marker``), then a moment later its daemons and the executors (``node.sh stop``). The
    order node.sh itself kills in is /proc's sorted by name, so a task often goes first there too."""
    local = f"{RIG['rig_dir'] / f'node{n}' / 'nm-local'}/"

    def processes() -> Dict[int, bytes]:
        found = {}
        for d in Path("/proc").iterdir():
            try:
                if d.name.isdigit() and os.readlink(d / "cwd").startswith(local):
                    found[int(d.name)] = (d / "cmdline").read_bytes()
            except OSError:
                pass
        return found

    # A task is RUNNING in the AM's report once the AM has sent its executor the command: its shell may not run yet.
    tasks = wait_for(lambda: [pid for pid, cmdline in processes().items() if str(marker).encode() in cmdline],
                     timeout=60, what=f"the job's tasks' processes on node {n}", interval=0.1)
    for pid in tasks:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)  # time enough for an executor to notice its task's end, as on a slow death
    # Then the machine: its daemons and the executors at once. The NodeManager goes first, so that
    # it cannot report the executors' containers ended (a NodeManager that outlives them by a
    # tenth of a second does: Hadoop 3.4's reports a container's end within milliseconds).
    for pidf in sorted((RIG["rig_dir"] / f"node{n}" / "pids").glob("*.pid")):
        try:
            os.kill(int(pidf.read_text().strip()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    for pid in processes():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    node_sh("stop", n, force=True)


# -- a node that dies ---------------------------------------------------------------------------

@needs_killable_rig
def test_a_node_that_dies_is_noticed_and_its_tasks_run_again_on_other_nodes_spending_no_max_restarts(
        shared_tmp_path, apps):
    node_mb = max(int(n.get("usedMemoryMB", 0)) + int(n.get("availMemoryMB", 0)) for n in rm_nodes())
    marker = shared_tmp_path / "go"
    app_id = detach(JOBS / "spread-workers.yaml", apps, marker=marker, memory_mb=int(node_mb * 0.4))
    report = wait_for(lambda: gang_running(app_id, 4), timeout=180, what="4 workers running", interval=0.5,
                      explain=lambda: cluster_picture(app_id))
    # Nodes by address: a task's host may be a name /etc/hosts gives that address (the secure
    # rig names 127.0.0.80-82 and leaves the names behind).
    ip = socket.gethostbyname
    am_host = ip(rm_app(app_id)["amHostHttpAddress"].rsplit(":", 1)[0])
    hosts = [t["host"] for t in report["tasks"]]
    victim = next(h for h in hosts if ip(h) != am_host)  # at most 2 workers fit beside the AM
    lost = sorted(t["index"] for t in report["tasks"] if t["host"] == victim)
    # kill -9 its tasks, then their executors, its NodeManager: the executors, told nothing, may
    # see their task killed, and report that as a program's failure only if they outlive it long.
    die_tasks_first(RIG["nodes"][ip(victim)], marker)
    try:
        # YARN still lists the node as RUNNING (for 10 minutes); the AM's heartbeats notice.
        after = wait_for(lambda: gang_running(app_id, 4, attempt=2), timeout=180,
                         what="the gang running again after the node died", interval=0.5,
                         explain=lambda: cluster_picture(app_id))
        assert "RUNNING" in [n["state"] for n in rm_nodes() if ip(n["nodeHostName"]) == ip(victim)]
    finally:
        node_sh("start", RIG["nodes"][ip(victim)])
    assert victim not in [t["host"] for t in after["tasks"]]
    log = events(after)
    assert f"no heartbeat from its executor on {victim}" in log, log
    assert "restarting the gang: attempt 2" in log and "restarting the gang: attempt 3" not in log, \
        "the workers lost with one node are one failure"
    assert {t["restarts"] for t in after["tasks"]} == {1}
    assert lost, "the killed node ran workers"
    # The job has max_restarts 0: a lost node is the cluster's fault, under max_cluster_restarts.
    assert any(f"worker:{i} was lost with its node (attempt 1)" in log for i in lost), log
    assert "(the cluster's fault: restart 1 of at most 10 for the cluster's faults" in log
    assert after["restarts_by_cause"] == {"node_lost": 1}
    marker.touch()
    app = wait_final(app_id, timeout=120)
    assert app["finalStatus"] == "SUCCEEDED", app["diagnostics"]


# -- containers that never start ----------------------------------------------------------------

def missing_interpreter(folder: Path) -> Path:
    """An interpreter that exists for the AM and is missing for executors (exit 127 on start),
    in ``folder``, which every node sees (shared_tmp_path)."""
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nif [ -n "$SUBM_ROLE" ]; then exec /nonexistent/subm-test/python3 "$@"; fi\n'
                       f'exec {preinstalled_python()} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_a_container_that_cannot_start_fails_a_never_restart_job_at_once_with_yarns_reason(shared_tmp_path, apps):
    rc, report, err = run_job(JOBS / "missing-interpreter.yaml", python=missing_interpreter(shared_tmp_path))
    apps.append(report.get("app_id"))
    assert rc == 1, err
    assert report["state"] == "FAILED" and report["attempts"] == 1
    diag = report["diagnostics"]
    assert "failed with its container ended before the executor registered (exit code 127" in diag, diag
    assert "exit status 127" in diag and "/nonexistent/subm-test/python3" in diag  # YARN's word, the log's tail
    assert "restart policy 'never'" in diag
    app = rm_app(report["app_id"])
    assert (app["finalStatus"], len(app_attempts(report["app_id"]))) == ("FAILED", 1)
    assert diag in app["diagnostics"]


def test_launches_that_keep_failing_end_the_job_before_its_restarts_are_spent(shared_tmp_path, apps):
    rc, report, err = run_job(JOBS / "missing-interpreter.yaml", python=missing_interpreter(shared_tmp_path),
                              policy="gang", max_restarts=20, timeout=300)
    apps.append(report.get("app_id"))
    assert rc == 1, err
    assert report["state"] == "FAILED"
    assert "failed to launch 3 times in a row" in report["diagnostics"], report["diagnostics"]
    assert report["attempts"] == 3  # two launch failures were restarts; the third ends the job


# -- the ApplicationMaster lost ------------------------------------------------------------------

def am_pids(app_id: str) -> List[int]:
    """The Python AM's process (on this machine's rig): cwd in the AM container, running am/main.py."""
    container = app_attempts(app_id)[-1]["containerId"]
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd").endswith(container) \
                    and b"backends.yarn.am.main" in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_an_am_killed_is_replaced_by_a_new_attempt_that_restarts_the_gang(shared_tmp_path, apps):
    marker = shared_tmp_path / "go"
    app_id = detach(JOBS / "am-loss.yaml", apps, marker=marker)
    wait_for(lambda: gang_running(app_id, 2), timeout=180, what="both workers running", interval=0.5)
    pids = am_pids(app_id)
    assert len(pids) == 1, f"the AM process of {app_id} on this machine: {pids}"
    os.kill(pids[0], signal.SIGKILL)
    after = wait_for(lambda: gang_running(app_id, 2, attempt=2), timeout=180,
                     what="a new AM attempt with the gang running again", interval=0.5)
    log = events(after)
    assert "the ApplicationMaster was lost" in log and "gang ready: all 2 tasks registered (attempt 1)" in log
    assert after["attempts"] == 2
    marker.touch()
    app = wait_final(app_id, timeout=120)
    assert app["finalStatus"] == "SUCCEEDED", app["diagnostics"]
    assert len(app_attempts(app_id)) == 2
