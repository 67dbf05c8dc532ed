#!/usr/bin/env python3
"""Recovery from faults on a multi-node YARN rig: a node that dies, launches that fail, a lost AM.

Needs a rig of your own made by ``scripts/rig.sh`` with RIG_NODES >= 3 (it kills one of
its nodes): ``RIG_DIR`` exported and its conf as ``HADOOP_CONF_DIR`` (``source $RIG_DIR/env.sh``).
For R repetitions it measures, from the AM's decision log (its events, stamped by the AM's
clock, which is this machine's):

* node death: 4 workers of 40 % of a node's memory (so at most 2 share a node), gang policy;
  a node running workers and not the AM is killed like a dying machine (``FORCE=1 node.sh
  stop N``: NodeManager and container processes ``kill -9``). Figures: kill -> the AM's
  "no heartbeat" decision (noticed), and kill -> "gang ready ... (attempt 2)" (the gang runs
  again in new containers on the other nodes). Goal: noticed within 10 s, running again within
  15 s, never more than 30 s.
* failed launch: 2 workers whose interpreter is missing where executors run (exit 127 before
  the executor starts), policy ``never``: the first container's exit (its log file's last
  write) -> the AM's verdict, and submission -> YARN's final state. Goal: under a minute.
* AM killed: the Python AM's process gets ``kill -9``: kill -> the new AM attempt's "gang
  ready ... (attempt 2)" (attempts as reports show them, from 1).
* verdict repeated: a job that fails after its one restart in YARN attempt 1 (of 2): the AM's
  verdict -> YARN's final state (skein unregisters only from the last attempt, so one more
  AM attempt repeats the verdict).

    source $RIG_DIR/env.sh && python3 bench/faults.py [--reps 2]

Applications are tagged subm-bench and killed on the way out; the killed node is started again.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Optional

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from submarine_py.backends.yarn.hadoop.nodemanager import node_log  # noqa: E402
from submarine_py.backends.yarn.hadoop.resourcemanager import rm_address  # noqa: E402

RM = rm_address()
STARTED: List[str] = []


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rm(path: str) -> Dict[str, Any]:
    return requests.get(RM + path, headers={"Accept": "application/json"}, timeout=10).json()


def nodes() -> List[Dict[str, Any]]:
    return (rm("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []


def wait_idle(timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(n.get("usedMemoryMB", 0) == 0 for n in nodes() if n["state"] == "RUNNING"):
            return
        time.sleep(0.5)
    log("warning: the cluster is not idle; figures may include queueing")


def subm(*args: str, check: bool = True) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "submarine_py.cli", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    if check and proc.returncode != 0:
        raise RuntimeError(f"subm {' '.join(args)}: {proc.stderr[-2000:]}")
    return proc.stdout


def submit(job: Path, **variables: Any) -> str:
    sets = [x for k, v in variables.items() for x in ("--set", f"{k}={v}")]
    app_id = subm("run", str(job), "--backend", "yarn", "--detach", *sets).strip()
    STARTED.append(app_id)
    return app_id


def am_report(app_id: str) -> Optional[Dict[str, Any]]:
    try:
        resp = requests.get(f"{RM}/proxy/{app_id}/pages/subm/v1/status", timeout=5)
        return resp.json() if resp.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def gang_running(app_id: str, n: int, attempt: int) -> Optional[Dict[str, Any]]:
    r = am_report(app_id)
    tasks = (r or {}).get("tasks") or []
    ok = len(tasks) == n and all(t["state"] == "RUNNING" and t["attempt"] >= attempt for t in tasks)
    return r if ok else None


def event_time(report: Dict[str, Any], text: str, after: float = 0.0) -> Optional[float]:
    return next((e["time"] for e in report.get("events") or [] if text in e["message"] and e["time"] >= after), None)


def app_final(app_id: str) -> Dict[str, Any]:
    return wait(lambda: (lambda a: a if a["state"] in ("FINISHED", "FAILED", "KILLED") else None)(
        rm(f"/ws/v1/cluster/apps/{app_id}")["app"]), 300, f"{app_id} to end")


def final_report(app_id: str) -> Dict[str, Any]:
    """The AM's final report (events included): subm-report.json beside the last AM's log."""
    attempt = rm(f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"][-1]
    data = node_log(attempt["nodeHttpAddress"], attempt["containerId"], "subm-report.json")
    return json.loads(data) if data else {}


def kill_app(app_id: str) -> None:
    try:
        requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"}, timeout=10)
    except requests.RequestException:
        pass


# -- the rig ------------------------------------------------------------------------------

def rig() -> Dict[str, Any]:
    rig_dir = Path(os.environ.get("RIG_DIR") or "")
    node_sh = REPO / "scripts" / "rig" / "node.sh"
    hosts = {}
    for conf in sorted(rig_dir.glob("node*/conf/yarn-site.xml")):
        for prop in ET.parse(conf).getroot().iter("property"):
            if prop.findtext("name") == "yarn.nodemanager.hostname":
                hosts[prop.findtext("value")] = int(conf.parent.parent.name[len("node"):])
    if len(hosts) < 3 or not node_sh.is_file():
        sys.exit("needs RIG_DIR of a rig of scripts/rig.sh with RIG_NODES >= 3")
    return {"dir": rig_dir, "node_sh": node_sh, "hosts": hosts}


def node_sh(r: Dict[str, Any], action: str, n: int, force: bool = False) -> None:
    env = dict(os.environ, RIG_DIR=str(r["dir"]), **({"FORCE": "1"} if force else {}))
    subprocess.run(["bash", str(r["node_sh"]), action, str(n)], env=env, check=True, timeout=120,
                   capture_output=True, start_new_session=True)  # a restarted NM must not share our fate


# -- the measurements -----------------------------------------------------------------------

JOB = """\
name: bench-{name}
tags: [subm-bench]
restart: {{policy: {policy}, max_restarts: {restarts}}}
{extra}
roles:
  worker:
    instances: {n}
    resources: {{memory: {memory_mb} MiB, vcores: 1}}
    command: {command}
"""
WAIT_MARKER = "'for i in $(seq 6000); do [ -e {marker} ] && exit 0; sleep 0.1; done; exit 3'"


def write(path: Path, **kw: Any) -> Path:
    kw.setdefault("extra", "")
    path.write_text(JOB.format(**kw))
    return path


def node_death(r: Dict[str, Any], work: Path) -> Dict[str, Optional[float]]:
    node_mb = max(n.get("usedMemoryMB", 0) + n.get("availMemoryMB", 0) for n in nodes())
    marker = work / "go-node"
    job = write(work / "node.yaml", name="node-death", policy="gang", restarts=2, n=4,
                memory_mb=int(node_mb * 0.4), command=WAIT_MARKER.format(marker=marker))
    app_id = submit(job)
    report = wait(lambda: gang_running(app_id, 4, 1), 300, "4 workers running")
    am_host = rm(f"/ws/v1/cluster/apps/{app_id}")["app"]["amHostHttpAddress"].rsplit(":", 1)[0]
    victim = next(t["host"] for t in report["tasks"] if t["host"] != am_host)
    on_victim = sum(t["host"] == victim for t in report["tasks"])
    killed = time.time()
    node_sh(r, "stop", r["hosts"][victim], force=True)
    try:
        after = wait(lambda: gang_running(app_id, 4, 2), 300, "the gang running again")
    finally:
        node_sh(r, "start", r["hosts"][victim])
    marker.touch()
    final = app_final(app_id)
    noticed, ready = event_time(after, "no heartbeat", killed), event_time(after, "registered (attempt 2)", killed)
    log(f"  node death: {on_victim} of 4 workers on {victim}; noticed +{noticed - killed:.2f} s, "
        f"gang running +{ready - killed:.2f} s; job {final['finalStatus']}")
    return {"noticed": noticed - killed, "running again": ready - killed, "workers lost": on_victim}


def failed_launch(work: Path) -> Dict[str, Optional[float]]:
    wrapper = work / "python"
    wrapper.write_text(f'#!/bin/sh\nif [ -n "$SUBM_ROLE" ]; then exec /nonexistent/bench/python3 "$@"; fi\n'
                       f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    job = write(work / "launch.yaml", name="failed-launch", policy="never", restarts=0, n=2, memory_mb=256,
                extra=f"environment: {{python: {wrapper}}}", command="sleep 1")
    submitted = time.time()
    app_id = submit(job)
    final = app_final(app_id)
    verdict = next((e["time"] for e in final_report(app_id).get("events") or []
                    if e["message"].startswith("job FAILED")), None)
    exits = [p.stat().st_mtime for p in Path(os.environ["RIG_DIR"]).glob(f"node*/nm-logs/{app_id}/*/worker.log")]
    first_exit = min(exits) if exits else None
    out = {"exit -> verdict": (verdict - first_exit) if verdict and first_exit else None,
           "submit -> final": final["finishedTime"] / 1000 - submitted}
    log(f"  failed launch: {final['finalStatus']}; exit -> verdict {fmt(out['exit -> verdict'])} s, "
        f"submit -> YARN final {out['submit -> final']:.2f} s")
    return out


def am_killed(work: Path) -> Dict[str, Optional[float]]:
    marker = work / "go-am"
    job = write(work / "am.yaml", name="am-killed", policy="gang", restarts=1, n=2, memory_mb=256,
                command=WAIT_MARKER.format(marker=marker))
    app_id = submit(job)
    wait(lambda: gang_running(app_id, 2, 1), 300, "2 workers running")
    attempts = rm(f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"]
    container = attempts[-1]["containerId"]
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _am_process(p, container)]
    killed = time.time()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    after = wait(lambda: gang_running(app_id, 2, 2), 300, "the gang running again")
    marker.touch()
    final = app_final(app_id)
    ready = event_time(after, "registered (attempt 2)", killed)
    log(f"  AM killed: gang running +{ready - killed:.2f} s; job {final['finalStatus']}")
    return {"running again": ready - killed}


def _am_process(proc: Path, container: str) -> bool:
    try:
        return os.readlink(proc / "cwd").endswith(container) and b"backends.yarn.am.main" in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def verdict_repeated(work: Path) -> Dict[str, Optional[float]]:
    job = write(work / "fails.yaml", name="verdict", policy="gang", restarts=1, n=2, memory_mb=256,
                command="'sleep 1; exit 3'")
    app_id = submit(job)
    final = app_final(app_id)
    verdict = next((e["time"] for e in final_report(app_id).get("events") or []
                    if e["message"].startswith("job FAILED")), None)
    out = {"verdict -> final": final["finishedTime"] / 1000 - verdict if verdict else None}
    log(f"  verdict repeated: {final['finalStatus']}; AM verdict -> YARN final {fmt(out['verdict -> final'])} s")
    return out


def fmt(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--only", default="node,launch,am,verdict")
    args = parser.parse_args()
    r = rig()
    only = set(args.only.split(","))
    results: Dict[str, List[Dict[str, Optional[float]]]] = {k: [] for k in ("node", "launch", "am", "verdict")}
    try:
        with tempfile.TemporaryDirectory(prefix="subm-bench-faults-") as tmp:
            for rep in range(args.reps):
                log(f"repetition {rep + 1}/{args.reps}")
                for name, fn in (("node", lambda: node_death(r, Path(tmp))), ("launch", lambda: failed_launch(Path(tmp))),
                                 ("am", lambda: am_killed(Path(tmp))), ("verdict", lambda: verdict_repeated(Path(tmp)))):
                    if name in only:
                        wait_idle()
                        for f in Path(tmp).glob("go-*"):
                            f.unlink()
                        results[name].append(fn())
    finally:
        for app_id in STARTED:
            kill_app(app_id)
    print(f"{'figure':45} {'median s':>9} {'max s':>7}   (n)")
    for name, rows in results.items():
        for key in (rows[0] if rows else {}):
            values = [row[key] for row in rows if row.get(key) is not None]
            if values:
                print(f"{name + ': ' + key:45} {statistics.median(values):9.2f} {max(values):7.2f}   ({len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
