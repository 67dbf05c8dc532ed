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

from conftest import YARN_CONF_DIR, require_yarn, run_json, skip_without_yarn, subm, write_job

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
        skip_without_yarn(f"needs at least 2 free GPUs, the cluster has {have}")
    report = sweep(tmp_path, "sweep-fewer", trials=2 * have + 2, parallel=have + 2)
    assert len(containers(report)) <= have  # it ran on what it got, and finished
