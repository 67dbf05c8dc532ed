"""A small data-parallel PyTorch program, written by `subm init --framework pytorch`.

Every rank fits the line y = 3x + 1 on its own random samples; DistributedDataParallel
averages the gradients across ranks (gloo on CPUs, nccl on GPUs). Replace the model and
the data with yours and keep the parts subm relies on:

- ``init_process_group(init_method="env://")`` reads MASTER_ADDR, MASTER_PORT, RANK and
  WORLD_SIZE, which subm gives every task;
- after a restart SUBM_ATTEMPT is above 0: resume from the checkpoint this task wrote
  in its working directory (it is kept across attempts).

Alone, without subm, it runs as a world of one: ``python train.py --epochs 3``.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT = "checkpoint.pt"


def main() -> None:
    parser = argparse.ArgumentParser(description="fit y = 3x + 1 with DDP")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    for name, default in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"),
                          ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(name, default)

    gpu = torch.cuda.is_available()
    dist.init_process_group("nccl" if gpu else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if gpu else torch.device("cpu")
    model = nn.Linear(1, 1).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if gpu else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)

    first_epoch = 0
    attempt = int(os.environ.get("SUBM_ATTEMPT", "0"))
    if attempt > 0 and os.path.exists(CHECKPOINT):
        state = torch.load(CHECKPOINT, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
        print(f"rank {rank}: attempt {attempt + 1}, resuming at epoch {first_epoch + 1}", flush=True)

    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(512, 1, generator=generator)
    y = 3 * x + 1 + 0.05 * torch.randn(512, 1, generator=generator)
    for epoch in range(first_epoch, args.epochs):
        for i in range(0, len(x), 64):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(ddp(x[i:i + 64].to(device)), y[i:i + 64].to(device))
            loss.backward()
            optimizer.step()
        dist.all_reduce(loss.detach(), op=dist.ReduceOp.SUM)
        if rank == 0:
            w, b = model.weight.item(), model.bias.item()
            print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item() / world:.4f}, "
                  f"y = {w:.2f}x + {b:.2f} ({world} ranks)", flush=True)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                   CHECKPOINT)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
