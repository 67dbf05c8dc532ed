"""A sweep on YARN (the 3-node rig of CI, 2 GPUs a node): one application runs every trial on
containers it asks for one at a time and reuses; with fewer GPUs free than ``parallel`` it runs
on what it gets and finishes; a container with nothing left to run goes back before the end;
the trials are in ``subm status`` (docs/sweeps.md).

    source /tmp/sweeps-rig/env.sh && python3 -m pytest -m yarn tests/test_sweeps_run_on_yarn.py
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import requests

from conftest import YARN_CONF_DIR, require_yarn, run_json, subm, write_job

RM = require_yarn()
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR or ""}
OBJECTIVE = Path(__file__).resolve().parent / "programs" / "sweep_objective.py"

pytestmark = pytest.mark.yarn


def free_gpus() -> int:
    resp = requests.get(RM + "/ws/v1/cluster/nodes", headers={"Accept": "application/json"}, timeout=10)
    nodes = (resp.json().get("nodes") or {}).get("node") or []
    return sum(int(i.get("value") or 0) for n in nodes if n.get("state") == "RUNNING"
               for i in ((n.get("availableResource") or {}).get("resourceInformations") or {}).get(
                   "resourceInformation", []) if i.get("name") == "yarn.io/gpu")


def sweep(tmp_path: Path, name: str, trials: int, parallel: int, gpus: int = 1,
          extra: str = "") -> Tuple[Dict, Dict[str, Dict]]:
    """Run the sweep (detached, then ``subm wait``) while reading what the RM grants it:
    (the report, :func:`granted_to`'s containers)."""
    job = write_job(tmp_path / name, f"""\
        name: {name}
        roles:
          worker:
            command: python3 objective.py --print
            env: {{STEPS: "6", STEP_SECONDS: "0.3"}}
            resources: {{memory: 256 MiB, vcores: 1, gpus: {gpus}}}
        files:
          objective.py: {OBJECTIVE}
        sweep:
          metric: val_loss
          algorithm: random
          trials: {trials}
          parallel: {parallel}
          seed: 3
          params:
            x: {{low: -5.0, high: 5.0}}
          {extra}
        """)
    rc, started, err = run_json("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    granted = granted_to(started["app_id"])
    rc, report, err = run_json("wait", started["app_id"], "--timeout", "120", env=YARN, timeout=150)
    assert rc == 0 and report["state"] == "SUCCEEDED", err[-3000:]
    return report, granted


def granted_to(app_id: str, timeout: float = 600) -> Dict[str, Dict]:
    """Every container the RM granted the application for its tasks (its AM's left out), from
    the RM's own records of each attempt's containers
    (``/ws/v1/cluster/apps/APP/appattempts/ATTEMPT/containers``), read until the application
    ends. The RM lists a container only while it lives, so this reads every 0.2 s: a trial's
    container lives seconds, and one that ran a trial unseen fails :func:`trials_per_container`.
    (The containers' numbers count no grants: the scheduler numbers its reservations too.)"""
    seen: Dict[str, Dict] = {}
    ams = set()
    deadline = time.monotonic() + timeout
    while True:
        state = rm_get(f"/ws/v1/cluster/apps/{app_id}")["app"]["state"]
        for attempt in listed_as_list(rm_get(f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"]):
            if attempt.get("containerId"):  # (none yet while the attempt waits for it)
                ams.add(attempt["containerId"])
            name = attempt.get("appAttemptId") or f"appattempt_{app_id[12:]}_{int(attempt['id']):06d}"
            listed = requests.get(f"{RM}/ws/v1/cluster/apps/{app_id}/appattempts/{name}/containers",
                                  headers={"Accept": "application/json"}, timeout=10)
            if listed.status_code == 200:  # (an attempt that ended lists none, or is not found)
                for c in listed_as_list(listed.json().get("container")):
                    seen.setdefault(c["containerId"], c)
        if state in ("FINISHED", "FAILED", "KILLED"):
            break
        assert time.monotonic() < deadline, f"{app_id} still {state} after {timeout} s"
        time.sleep(0.2)
    return {cid: c for cid, c in seen.items() if cid not in ams}


def listed_as_list(listed) -> List[Dict]:
    """A REST list as a list: the RM's JSON gives a list of one as that one object."""
    return [listed] if isinstance(listed, dict) else list(listed or [])


def rm_get(path: str) -> Dict:
    resp = requests.get(RM + path, headers={"Accept": "application/json"}, timeout=10)
    resp.raise_for_status()
    return resp.json()


def trials_per_container(report: Dict, granted: Dict[str, Dict]) -> Dict[str, int]:
    """How many trials ran in each container the RM granted the sweep (0: it came when none was
    left, and went back). Every trial ran in one of them, on that container's node."""
    counts = dict.fromkeys(granted, 0)
    for t in report["trials"]:
        assert t["container"] in granted, (t, sorted(granted))
        assert t["host"] == granted[t["container"]]["assignedNodeId"].rsplit(":", 1)[0], (t, granted[t["container"]])
        counts[t["container"]] += 1
    return counts


def test_one_application_runs_every_trial_on_containers_it_reuses(tmp_path):
    report, granted = sweep(tmp_path, "sweep-reuse", trials=8, parallel=3)
    assert len(report["trials"]) == 8 and all(t["state"] == "SUCCEEDED" for t in report["trials"])
    # The RM granted it at most `parallel` containers (the cluster has room for more), not one
    # a trial: the 8 trials ran in those, one after another.
    counts = trials_per_container(report, granted)
    assert 1 <= len(granted) <= 3 and sum(counts.values()) == 8, counts
    assert report["best"]["value"] == min(t["value"] for t in report["trials"])
    code, out, _ = subm("status", report["app_id"], env=YARN)
    assert "Best so far: trial" in out
    code, out, _ = subm("logs", report["app_id"], env=YARN, timeout=120)
    assert "has no trial left to run: it goes back to the cluster" in out, out[-3000:]


def test_with_fewer_gpus_free_than_parallel_the_sweep_runs_on_what_it_gets(tmp_path):
    have = free_gpus()
    if have < 2:
        pytest.skip(f"needs at least 2 free GPUs, the cluster has {have}")
    trials, parallel = 2 * have + 2, have + 2
    report, granted = sweep(tmp_path, "sweep-fewer", trials=trials, parallel=parallel)
    assert len(report["trials"]) == trials and all(t["state"] == "SUCCEEDED" for t in report["trials"])
    # The RM granted it no more containers than there were GPUs (fewer than `parallel`), and
    # every trial ran in those: it ran on what it got, and finished.
    counts = trials_per_container(report, granted)
    assert 1 <= len(granted) <= have < parallel and sum(counts.values()) == trials, (have, counts)


def am_pids(app_id: str) -> List[int]:
    """The Python AM's process (on this machine's rig): cwd in the AM container, running am/main.py."""
    import os

    attempts = requests.get(f"{RM}/ws/v1/cluster/apps/{app_id}/appattempts", timeout=10).json()
    container = attempts["appAttempts"]["appAttempt"][-1]["containerId"]
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd").endswith(container) \
                    and b"backends.yarn.am.main" in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_a_new_am_attempt_goes_on_from_the_trials_so_far(tmp_path):
    import os
    import signal
    import time

    job = write_job(tmp_path, f"""\
        name: sweep-am-loss
        roles:
          worker:
            command: python3 objective.py --print
            env: {{STEPS: "10", STEP_SECONDS: "0.2"}}
            resources: {{memory: 256 MiB, vcores: 1}}
        files:
          objective.py: {OBJECTIVE}
        sweep:
          metric: val_loss
          algorithm: grid
          parallel: 2
          params:
            x: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """)
    rc, started, err = run_json("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    app_id = started["app_id"]
    deadline = time.monotonic() + 240
    before: Dict = {}
    while time.monotonic() < deadline:
        now = run_json("status", app_id, env=YARN)[1]
        done = [t for t in now.get("trials") or [] if t["state"] == "SUCCEEDED"]
        if len(done) >= 3:
            before = {t["number"]: t for t in done}
            break
        time.sleep(1)
    assert before, "three trials never succeeded"
    pids = am_pids(app_id)
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    rc, report, err = run_json("wait", app_id, "--timeout", "400", timeout=420, env=YARN)
    assert report["state"] == "SUCCEEDED", err[-3000:]
    after = {t["number"]: t for t in report["trials"]}
    for number, t in before.items():  # what the first AM finished is kept as it was
        assert after[number]["params"] == t["params"] and after[number]["value"] == t["value"]
    succeeded = sorted(t["params"]["x"] for t in report["trials"] if t["state"] == "SUCCEEDED")
    assert succeeded == list(range(10))  # every grid point once, trials lost with the AM run again
    assert report["best"]["params"] == {"x": 2}
    attempts = requests.get(f"{RM}/ws/v1/cluster/apps/{app_id}/appattempts", timeout=10).json()
    assert len(attempts["appAttempts"]["appAttempt"]) == 2  # YARN started a second AM
    code, out, _ = subm("logs", app_id, env=YARN, timeout=120)
    assert "going on with the sweep after 1 lost ApplicationMaster attempt(s)" in out
