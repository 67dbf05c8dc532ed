"""On a machine with an NVIDIA GPU: the local backend finds it through NVML, hands it to the
task that asks for it (``CUDA_VISIBLE_DEVICES``), samples its use into the report, counts a
silent task busy on its GPU as working (not hung), and runs PyTorch and Lightning on it.

These need a real GPU and its driver; elsewhere (CI, a laptop) they skip, saying so. The
stand-in GPUs of the other tests (``SUBM_LOCAL_GPUS``) check the same paths without one.
"""
from pathlib import Path

import pytest

from conftest import NO_GPU, run_json, write_job

pytest.importorskip("torch")
from submarine_py.gpus import nvml_gpus  # noqa: E402

GPUS = nvml_gpus() or []
pytestmark = [pytest.mark.local, pytest.mark.torch, pytest.mark.gpu,
              pytest.mark.skipif(not GPUS, reason=f"{NO_GPU}: NVML found none here")]

#: Busy on the task's one GPU for argv[1] seconds, saying first (or not) what it sees.
CUDA_PROGRAM = """\
import os, sys, time
import torch
assert torch.cuda.is_available(), "CUDA is not available to the task"
if sys.argv[2] == "say":
    print("sees", os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count(),
          torch.cuda.get_device_name(0), "local_rank", os.environ["LOCAL_RANK"], flush=True)
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        x = torch.tanh(x @ x)
    torch.cuda.synchronize()
print("cuda done", float(x.abs().mean()), flush=True)
"""

#: A Lightning program as its tutorials have it: Trainer(accelerator="gpu", devices=...).
LIGHTNING_PROGRAM = """\
import os
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset

class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

torch.manual_seed(0)
x = torch.randn(512, 32)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=64)
trainer = pl.Trainer(accelerator="gpu", devices=int(os.environ["LOCAL_WORLD_SIZE"]),
                     num_nodes=int(os.environ["GROUP_WORLD_SIZE"]), max_epochs=2,
                     enable_progress_bar=False, enable_checkpointing=False, logger=False)
model = Model()
trainer.fit(model, data)
print("lightning trained on", trainer.strategy.root_device, "global rank", trainer.global_rank, flush=True)
"""

SAMPLING = {"SUBM_GPU_SAMPLE_SECONDS": "1"}


def stdout_of(report) -> str:
    """The one task's stdout, from the log file the report names."""
    return Path(report["tasks"][0]["log"]).read_text()


def test_subm_cluster_lists_the_machines_gpus():
    rc, info, _ = run_json("cluster", "--backend", "local")
    assert rc == 0 and info["nvml"] is True
    assert [g["name"] for g in info["gpus"]] == [g["name"] for g in GPUS]
    assert all(g["memory_mb"] > 0 for g in info["gpus"])


def test_a_task_trains_on_its_gpu_and_its_use_reaches_the_report(tmp_path):
    job = write_job(tmp_path, """\
        name: on-a-gpu
        framework: pytorch
        roles:
          worker:
            instances: 1
            resources: {memory: 4 GiB, gpus: 1}
            command: python busy.py 12 say
        files: {busy.py: busy.py}
        """, {"busy.py": CUDA_PROGRAM})
    rc, report, err = run_json("run", str(job), "--backend", "local", env=SAMPLING, timeout=240)
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    task = report["tasks"][0]
    gpu = task["gpu"]
    assert gpu["devices"] and gpu["samples"] >= 3, gpu
    assert gpu["peak_utilization"] > 0 and gpu["peak_memory_mb"] > 0, gpu
    out = stdout_of(report)
    assert "sees 0 1" in out or f"sees {gpu['devices'][0]} 1" in out, out
    assert "local_rank 0" in out and "cuda done" in out, out


def test_a_silent_task_busy_on_its_gpu_is_not_hung_but_a_silent_idle_one_is(tmp_path):
    spec = """\
        name: {name}
        framework: pytorch
        restart: {{max_restarts: 0}}
        timeouts: {{hang_seconds: 10}}
        roles:
          worker:
            instances: 1
            resources: {{memory: 4 GiB, gpus: 1}}
            command: {command}
        files: {{busy.py: busy.py}}
        """
    busy = write_job(tmp_path / "busy", spec.format(name="silent-busy", command="python busy.py 30 quiet"),
                     {"busy.py": CUDA_PROGRAM})
    rc, report, err = run_json("run", str(busy), "--backend", "local", env=SAMPLING, timeout=240)
    assert rc == 0, f"a task busy on its GPU was stopped: {report.get('diagnostics')}\n{err}"
    assert report["tasks"][0]["gpu"]["peak_utilization"] > 0

    idle = write_job(tmp_path / "idle", spec.format(
        name="silent-idle", command="python -c 'import time; time.sleep(60)'"), {"busy.py": CUDA_PROGRAM})
    rc, report, err = run_json("run", str(idle), "--backend", "local", env=SAMPLING, timeout=240)
    assert rc == 1 and report["state"] == "FAILED", report
    assert "no output" in report["diagnostics"] or "printed nothing" in report["diagnostics"], report["diagnostics"]


def test_a_lightning_program_trains_on_the_gpu_with_one_process_per_gpu(tmp_path):
    job = write_job(tmp_path, """\
        name: lightning-gpu
        framework: pytorch
        roles:
          worker:
            instances: 1
            processes: gpus
            resources: {memory: 8 GiB, gpus: %d}
            command: python fit.py
        files: {fit.py: fit.py}
        """ % len(GPUS), {"fit.py": LIGHTNING_PROGRAM})
    rc, report, err = run_json("run", str(job), "--backend", "local", env=SAMPLING, timeout=300)
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    out = stdout_of(report)
    assert "lightning trained on cuda:0 global rank 0" in out, out
