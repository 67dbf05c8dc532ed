"""A sweep on the local backend with GPUs (``SUBM_LOCAL_GPUS`` stands in for the machine's):
it starts with the GPUs free, never waiting for ``parallel`` of them, takes more as they come
free, and leaves nothing in the machine's GPU ledger (docs/sweeps.md)."""
import json
import time
from pathlib import Path

import pytest

from conftest import run_json, write_job

pytestmark = pytest.mark.local

GPUS = {"SUBM_LOCAL_GPUS": "0,1"}
OBJECTIVE = Path(__file__).parent / "programs" / "sweep_objective.py"


def test_a_sweep_runs_on_the_one_gpu_free_and_takes_the_second_when_it_comes_free(tmp_path, subm_home):
    blocker = write_job(tmp_path / "blocker", """\
        name: blocker
        roles: {worker: {resources: {memory: 256 MiB, gpus: 1}, command: "sleep 4"}}
        """)
    rc, out, err = run_json("run", str(blocker), "--detach", env=GPUS)
    assert rc == 0, err
    blocked_until = time.time() + 4
    job = write_job(tmp_path / "sweep", f"""\
        name: gpu-sweep
        roles:
          worker:
            command: echo "devices=[$CUDA_VISIBLE_DEVICES]" && python3 objective.py --print
            env: {{STEPS: "4", STEP_SECONDS: "0.2"}}
            resources: {{memory: 256 MiB, gpus: 1}}
        files:
          objective.py: {OBJECTIVE}
        sweep:
          metric: val_loss
          algorithm: random
          trials: 10
          parallel: 4
          seed: 2
          params:
            x: {{low: -5.0, high: 5.0}}
        """)
    rc, report, err = run_json("run", str(job), env=GPUS, timeout=240)
    assert rc == 0 and report["state"] == "SUCCEEDED", err
    first = min(t["number"] for t in report["trials"])
    full = json.loads((subm_home / "local" / report["app_id"] / "report.json").read_text())
    trials = {t["number"]: t for t in full["sweep"]["trials"]}
    started = {}
    for t in trials.values():
        started.setdefault(t["container"], t["started_at"])
    assert len(started) == 2  # two GPUs, never more containers, whatever parallel says
    one, two = sorted(started.values())
    assert trials[first]["started_at"] < blocked_until - 1  # it did not wait for a second GPU
    assert two > blocked_until - 1  # the second came once the blocker gave its GPU back
    ledger = json.loads((subm_home / "local" / "gpu-ledger.json").read_text())
    assert not any(e.get("job") == report["app_id"] for e in ledger["gpus"].values())
    assert report["app_id"] not in json.dumps(ledger.get("waiting"))
