"""The model: a small MLP for 2-D points."""
from __future__ import annotations

from torch import nn


def make_model(hidden: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(2, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )
