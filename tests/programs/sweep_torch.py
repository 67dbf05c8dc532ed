"""A sweep's trial that trains for real with PyTorch: a linear model fit by SGD with the trial's
learning rate (SUBM_PARAM_LR), as one process of torch.distributed (gloo, the world torchrun's
variables describe: one task), printing ``val_loss=... step=N`` each epoch.

It ends without tearing gloo down: a barrier (every rank is done), then ``os._exit(0)``. torch
2.13's gloo aborts a finished rank now and then in its teardown (``terminate called without an
active exception``, exit 134: docs/processes.md), which failed a trial of this sweep in CI."""
import os
import sys

import torch
import torch.distributed as dist

from submarine_py import report_metric

dist.init_process_group("gloo")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from the task's environment
torch.manual_seed(0)
x = torch.randn(256, 4)
y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(256)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=float(os.environ["SUBM_PARAM_LR"]))
for epoch in range(int(os.environ.get("EPOCHS", "5"))):
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        report_metric("val_loss", torch.nn.functional.mse_loss(model(x).squeeze(1), y).item(), step=epoch)
dist.barrier()
sys.stdout.flush()
os._exit(0)
