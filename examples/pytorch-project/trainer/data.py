"""The data set: labelled 2-D points from a CSV file, split across ranks."""
from __future__ import annotations

import csv
from pathlib import Path

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load_points(path: str | Path) -> TensorDataset:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    x = torch.tensor([[float(r["x"]), float(r["y"])] for r in rows])
    y = torch.tensor([int(r["label"]) for r in rows])
    return TensorDataset(x, y)


def make_loader(dataset: TensorDataset, batch_size: int, distributed: bool) -> DataLoader:
    """Each rank iterates over its own share of the data (DistributedSampler), reshuffled per epoch."""
    sampler = DistributedSampler(dataset) if distributed else None
    return DataLoader(dataset, batch_size=batch_size, shuffle=sampler is None, sampler=sampler)
