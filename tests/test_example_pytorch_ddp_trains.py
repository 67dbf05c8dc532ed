"""The README's first command: the PyTorch DDP example on the local backend."""
import importlib.util
import re
from pathlib import Path

import pytest

from conftest import REPO, processes_of, run_json, subm

EXAMPLE = REPO / "examples" / "pytorch-ddp"

pytestmark = [
    pytest.mark.torch, pytest.mark.local,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"),
    pytest.mark.skipif(not (EXAMPLE / "job.yaml").exists(), reason="examples/pytorch-ddp/job.yaml is not written yet"),
]


def test_the_example_validates():
    rc, out, err = subm("validate", str(EXAMPLE / "job.yaml"))
    assert rc == 0, err
    assert "MASTER_ADDR=" in out and "WORLD_SIZE=" in out


def test_ddp_example_trains_and_the_loss_falls(subm_home, no_leftovers):
    rc, report, err = run_json("run", str(EXAMPLE / "job.yaml"), "--backend", "local", timeout=300)
    no_leftovers.append(report["app_id"])
    logs = {f"{t['role']}:{t['index']}": Path(t["log"]) for t in report["tasks"]}
    detail = "\n".join(f"--- {k}\n{p.with_suffix('.stderr').read_text()[-3000:]}" for k, p in logs.items())
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{detail}"
    # The README's first command trains in one go: a restart says why (the first attempt's words).
    first = "\n".join(f"--- {k}\n{p.with_suffix('.stderr').read_text()[:4000]}" for k, p in logs.items())
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()[-4000:]
    assert report["attempts"] == 1, f"{report}\n{first}\n--- am.log\n{am_log}"
    assert len(report["tasks"]) >= 2
    rank0 = next(t for t in report["tasks"] if t["index"] == 0 and t["role"] in ("master", "chief", "worker"))
    losses = [float(x) for x in re.findall(r"^epoch \d+ loss ([0-9.eE+-]+)", Path(rank0["log"]).read_text(), re.M)]
    assert len(losses) >= 2, Path(rank0["log"]).read_text()
    assert losses[-1] < losses[0], losses
    assert processes_of(report["app_id"]) == []
