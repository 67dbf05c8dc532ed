"""A sweep on YARN (the 3-node rig of CI, 2 GPUs a node): one application runs every trial on
containers it asks for one at a time and reuses; with fewer GPUs free than ``parallel`` it runs
on what it gets and finishes; a container with nothing left to run goes back before the end;
the trials are in ``subm status`` (docs/sweeps.md).

    source /tmp/sweeps-rig/env.sh && python3 -m pytest -m yarn tests/test_sweeps_run_on_yarn.py
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

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


def sweep(tmp_path: Path, name: str, trials: int, parallel: int, gpus: int = 1, extra: str = "") -> Dict:
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
    rc, report, err = run_json("run", str(job), "--backend", "yarn", env=YARN, timeout=600)
    assert rc == 0 and report["state"] == "SUCCEEDED", err[-3000:]
    return report


def containers(report: Dict) -> List[str]:
    return sorted({t["container"] for t in report["trials"]})


def test_one_application_runs_every_trial_on_containers_it_reuses(tmp_path):
    report = sweep(tmp_path, "sweep-reuse", trials=8, parallel=3)
    assert len(report["trials"]) == 8 and all(t["state"] == "SUCCEEDED" for t in report["trials"])
    used = containers(report)
    assert 1 <= len(used) <= 3 and all(c.startswith("container_") for c in used)  # YARN's container ids
    assert report["best"]["value"] == min(t["value"] for t in report["trials"])
    assert len({t["host"] for t in report["trials"]}) >= 1
    code, out, _ = subm("status", report["app_id"], env=YARN)
    assert "Best so far: trial" in out
    code, out, _ = subm("logs", report["app_id"], env=YARN, timeout=120)
    assert "has no trial left to run: it goes back to the cluster" in out, out[-3000:]


def test_with_fewer_gpus_free_than_parallel_the_sweep_runs_on_what_it_gets(tmp_path):
    have = free_gpus()
    if have < 2:
        pytest.skip(f"needs at least 2 free GPUs, the cluster has {have}")
    report = sweep(tmp_path, "sweep-fewer", trials=2 * have + 2, parallel=have + 2)
    assert len(containers(report)) <= have  # it ran on what it got, and finished


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
