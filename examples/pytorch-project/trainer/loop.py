"""The training loop, torchrun-style: resume from the snapshot if there is one."""
from __future__ import annotations

import sys
import time
from typing import Any, Dict

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from . import snapshot


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, lr: float, snapshot_path: str,
                 save_every: int, rank: int, fail_at_epoch: int = 0):
        self.rank = rank
        self.loader = loader
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.snapshot_path = snapshot_path
        self.save_every = save_every
        self.fail_at_epoch = fail_at_epoch
        self.epochs_run = 0
        state = snapshot.load(snapshot_path)  # every rank loads it: all resume at the same epoch
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.epochs_run = state["epochs_run"]
            print(f"[rank {rank}] resuming from the snapshot at epoch {self.epochs_run}", flush=True)
        self.resumed = self.epochs_run > 0
        self.ddp = DistributedDataParallel(self.model) if dist.is_initialized() else self.model

    def _run_epoch(self, epoch: int) -> float:
        sampler = getattr(self.loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        total, batches = 0.0, 0
        for x, y in self.loader:
            self.optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.ddp(x), y)
            loss.backward()
            self.optimizer.step()
            total, batches = total + loss.item(), batches + 1
        return total / max(batches, 1)

    def _save(self, epochs_run: int) -> None:
        state: Dict[str, Any] = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                 "epochs_run": epochs_run}
        snapshot.save(state, self.snapshot_path)

    def train(self, epochs: int) -> None:
        started = time.monotonic()
        for epoch in range(self.epochs_run, epochs):
            loss = self._run_epoch(epoch)
            if self.rank == 0:
                print(f"epoch {epoch + 1}/{epochs} loss {loss:.3f}", flush=True)
                if (epoch + 1) % self.save_every == 0:
                    self._save(epoch + 1)
            if dist.is_initialized():
                dist.barrier()  # the snapshot of this epoch is written before anyone goes on
            if self.fail_at_epoch and epoch + 1 == self.fail_at_epoch and not self.resumed \
                    and self.rank == (dist.get_world_size() - 1 if dist.is_initialized() else 0):
                print(f"[rank {self.rank}] injected failure after epoch {epoch + 1}", file=sys.stderr, flush=True)
                sys.exit(3)
        if self.rank == 0:
            print(f"trained epochs {self.epochs_run + 1}..{epochs} in {time.monotonic() - started:.1f} s", flush=True)
