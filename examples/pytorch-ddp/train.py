"""Data-parallel training with torch.distributed (DDP, gloo backend, CPU).

A 2-layer MLP learns to classify four Gaussian blobs. The data set is made
from a fixed seed, so every rank builds the same one and DistributedSampler
gives each rank its own share of it.

subm gives every task the env:// rendezvous variables (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK) and SUBM_ATTEMPT, the number of
restarts so far. Rank 0 writes ``checkpoint.pt`` in its working directory after
every epoch; on a restarted attempt (SUBM_ATTEMPT > 0) it reads it back and
sends it to the other ranks, so training goes on from the last finished epoch
instead of starting over. That is what ``restart: {policy: gang}`` is for.

Run it alone (one process, no subm) with ``python train.py --epochs 3``.
To see a restart: ``subm run job.yaml --set crash_once_at=2``; the last rank
exits with code 3 after epoch 2 of the first attempt, subm restarts the gang,
and attempt 2 resumes at epoch 3.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CHECKPOINT = "checkpoint.pt"
FEATURES, CLASSES = 16, 4


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--crash-once-at", type=int, default=0, metavar="EPOCH",
                   help="demo: on the first attempt, the last rank exits with code 3 after this epoch (0: never)")
    return p.parse_args()


def make_blobs(n: int, seed: int) -> TensorDataset:
    """Four overlapping Gaussian blobs in 16 dimensions: easy to learn, not trivial."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 0.7
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    x = centers[labels] + torch.randn(n, FEATURES, generator=g)
    return TensorDataset(x, labels)


def load_checkpoint(rank: int, attempt: int) -> Optional[Dict[str, Any]]:
    """Rank 0 reads its checkpoint on a restarted attempt and every rank gets a copy."""
    state = None
    if rank == 0 and attempt > 0 and os.path.exists(CHECKPOINT):
        state = torch.load(CHECKPOINT, map_location="cpu")
    box = [state]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save_checkpoint(state: Dict[str, Any]) -> None:
    tmp = CHECKPOINT + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, CHECKPOINT)  # atomic: a crash never leaves half a checkpoint


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    # Without subm (a plain `python train.py`) run as a world of one.
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    attempt = int(os.environ.get("SUBM_ATTEMPT", "0"))
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    prefix = "" if rank == 0 else f"[rank {rank}] "

    def say(msg: str) -> None:
        print(prefix + msg, flush=True)

    say(f"rank {rank}/{world}, attempt {attempt + 1}, master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")

    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    data = make_blobs(args.samples, args.seed)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    first_epoch = 1
    state = load_checkpoint(rank, attempt)
    if state is not None:
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
        say(f"resumed from {CHECKPOINT}: epoch {state['epoch']} done, loss {state['loss']:.4f}")

    loss = float("nan")
    for epoch in range(first_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every rank
        model.train()
        totals = torch.zeros(2)  # sum of losses, number of samples
        for x, y in loader:
            opt.zero_grad()
            batch_loss = loss_fn(model(x), y)
            batch_loss.backward()  # DDP averages the gradients across ranks here
            opt.step()
            totals += torch.tensor([batch_loss.item() * len(y), len(y)])
        dist.all_reduce(totals)  # the mean loss over every rank's samples
        loss = (totals[0] / totals[1]).item()
        say(f"epoch {epoch} loss {loss:.4f}")
        if rank == 0:
            save_checkpoint({"epoch": epoch, "loss": loss, "model": model.module.state_dict(),
                             "optimizer": opt.state_dict()})
        dist.barrier()  # the checkpoint is on disk before anyone goes on (or crashes, below)
        if attempt == 0 and epoch == args.crash_once_at and rank == world - 1:
            say(f"crashing on purpose after epoch {epoch} (--crash-once-at); subm should restart the gang")
            sys.stdout.flush()
            os._exit(3)

    dist.destroy_process_group()
    say(f"done: final loss {loss:.4f} after {args.epochs} epochs, {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
