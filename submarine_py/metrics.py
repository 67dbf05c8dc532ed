"""How a trial of a sweep reports its metric: by printing ``name=value`` on its stdout.

The convention (Katib's stdout collector's): any line of the trial's stdout may carry
``name=value`` pairs separated by spaces or commas, and optionally ``step=N``::

    epoch 3: step=3 val_loss=0.4210 accuracy=0.91

A value with a step is an intermediate value (what early stopping compares); the last value
the trial printed is its result. :func:`report_metric` prints such a line; programs may print
it themselves. Standard library only: a trial imports it without the package's dependencies.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

__all__ = ["report_metric", "parse_line", "values_of"]

STEP = "step"


def report_metric(name: str, value: float, step: Optional[int] = None) -> None:
    """Print ``name=value`` (and ``step=N``) on stdout, flushed, for the sweep to read."""
    line = f"{name}={float(value)!r}" + (f" {STEP}={int(step)}" if step is not None else "")
    print(line, flush=True)


def parse_line(line: str) -> Tuple[Dict[str, float], Optional[int]]:
    """The ``name=value`` pairs of one line whose value is a number, and its ``step`` (or None)."""
    values: Dict[str, float] = {}
    step: Optional[int] = None
    for token in line.replace(",", " ").split():
        name, sep, raw = token.partition("=")
        if not sep or not name or not raw:
            continue
        raw = raw.rstrip(";:")
        try:
            number = float(raw)
        except ValueError:
            continue
        if name == STEP:
            if number.is_integer():
                step = int(number)
            continue
        values[name] = number  # nan or inf too: a trial that diverged says so (the AM decides)
    return values, step


def values_of(metric: str, lines: List[str]) -> List[Tuple[float, Optional[int]]]:
    """Every value of ``metric`` in ``lines``, in order, each with its step (or None)."""
    out: List[Tuple[float, Optional[int]]] = []
    for line in lines:
        values, step = parse_line(line)
        if metric in values:
            out.append((values[metric], step))
    return out
