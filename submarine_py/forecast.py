"""When a waiting gang is expected to start (pure; ``subm status`` and ``subm queue`` show it).

Like Slurm's ``squeue --start``, an estimate with its basis, never a promise:

* A running job's expected end (:func:`expected_end`) is when its gang was ready plus the
  median run (gang ready to end) of the earlier SUCCEEDED runs of the same job name by the same
  user in the job history (``history.py``); else when it started plus its declared limit
  (``timeouts.job_seconds``, which the AM counts from its start); else unknown.
* The line (:func:`forecast`) is walked in admission's order (``admission.line``): a gang
  starts once the GPUs free now plus those the running jobs give back at their expected ends,
  earliest first, cover what it still needs; it then holds them until its own expected end
  (its own history, or its declared limit).

Simple on purpose: GPUs are counted in aggregate (not per node, not per queue: a gang that
needs them on fewer nodes, or a queue at its maximum, may start later), gangs start strictly
in line order (admission lets a younger gang pass for a while, ``admission.STARVE_SECONDS``),
and memory and vcores are not weighed (a gang asking no GPU waits for them: its start is
unknown). A start that depends on an end with no basis is unknown, and so is every start
after it in the line.
"""
from __future__ import annotations

import datetime as dt
import heapq
import statistics
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .states import JobState

#: The basis of an estimate that has none (the word every unknown basis starts with).
UNKNOWN = "unknown"
#: The basis of a start that needs nothing to end first.
FREE_NOW = "the GPUs it needs are free now"


@dataclass(frozen=True)
class Expected:
    """How long a job is expected to hold its gang (seconds), and why; None: unknown."""

    seconds: Optional[float]
    basis: str
    #: Whether the seconds are a declared limit (counted from the AM's start) rather than a run
    #: measured from the gang's readiness to the job's end.
    declared: bool = False


@dataclass(frozen=True)
class Holder:
    """A running job holding GPUs: what it gives back and when it is expected to (None: unknown)."""

    job: str
    gpus: int
    end: Optional[float]
    basis: str


@dataclass(frozen=True)
class Waiter:
    """A gang in the line (in line order): the GPUs it still needs and how long it will hold them."""

    job: str
    gpus: int
    expected: Expected
    #: GPUs it holds already (an asked gang's granted part): given back with the rest at its end.
    held: int = 0


@dataclass(frozen=True)
class Eta:
    """A waiting gang's expected start (epoch seconds; None: unknown) and its basis."""

    job: str
    start: Optional[float]
    basis: str


def run_seconds(row: Mapping[str, Any]) -> Optional[float]:
    """How long a finished run held its gang: from gang ready to its end (``total_seconds``
    less ``gang_ready_seconds``, both counted from submission), else from its start to its end."""
    total, ready = row.get("total_seconds"), row.get("gang_ready_seconds")
    if total is not None and ready is not None and total >= ready:
        return float(total) - float(ready)
    started, finished = row.get("started_at"), row.get("finished_at")
    if isinstance(started, dt.datetime) and isinstance(finished, dt.datetime) and finished >= started:
        return (finished - started).total_seconds()
    return None


def runs_by_job(rows: Iterable[Mapping[str, Any]]) -> Dict[Tuple[str, str], List[float]]:
    """The run lengths (:func:`run_seconds`) of the SUCCEEDED history rows, by (name, user)."""
    out: Dict[Tuple[str, str], List[float]] = {}
    for row in rows:
        seconds = run_seconds(row)
        if row.get("state") == JobState.SUCCEEDED and seconds is not None and row.get("name"):
            out.setdefault((str(row["name"]), str(row.get("user") or "")), []).append(seconds)
    return out


def expected(name: Optional[str], user: Optional[str], runs: Mapping[Tuple[str, str], Sequence[float]],
             job_seconds: Optional[float]) -> Expected:
    """How long job ``name`` of ``user`` is expected to hold its gang: the median of its earlier
    runs (``runs``: :func:`runs_by_job`), else its declared limit, else unknown."""
    earlier = runs.get((name or "", user or ""), ())
    if earlier:
        n = len(earlier)
        return Expected(statistics.median(earlier),
                        f"history: median of {n} earlier run{'s' if n != 1 else ''} of {name} by {user}")
    if job_seconds:
        return Expected(float(job_seconds), "declared: timeouts.job_seconds", declared=True)
    return Expected(None, f"{UNKNOWN}: no earlier run of {name or '?'} by {user or '?'} in the history "
                          f"and no timeouts.job_seconds")


def expected_end(how_long: Expected, *, started_at: Optional[float], ready_at: Optional[float],
                 now: float) -> Tuple[Optional[float], str]:
    """A running job's expected end (epoch seconds, never before ``now``: a job past its
    estimate is expected to end any moment) and its basis: a measured run counts from when its
    gang was ready (else its start), a declared limit from its start."""
    origin = started_at if how_long.declared else (ready_at if ready_at is not None else started_at)
    if how_long.seconds is None or origin is None:
        return None, how_long.basis if how_long.seconds is None else f"{UNKNOWN}: when it started is not known"
    return max(now, origin + how_long.seconds), how_long.basis


def forecast(line: Sequence[Waiter], holders: Sequence[Holder], free_gpus: Optional[int],
             now: float) -> Tuple[Eta, ...]:
    """Each waiting gang's expected start, in line order (see the module's docstring)."""
    if free_gpus is None:
        return tuple(Eta(w.job, None, f"{UNKNOWN}: the cluster's free GPUs could not be read") for w in line)
    # Releases to come: (time, order, GPUs, basis); an end with no basis comes last, never.
    releases: List[Tuple[float, int, int, str]] = []
    for n, h in enumerate(holders):
        heapq.heappush(releases, (h.end if h.end is not None else float("inf"), n, h.gpus,
                                  h.basis if h.end is not None else f"{UNKNOWN}: {h.job}'s end ({h.basis})"))
    free, clock, order = free_gpus, now, len(holders)
    since: List[str] = []  # what brought the clock to where it is (nothing: it is now)
    out: List[Eta] = []
    blocked = ""  # once a start is unknown, every later one is
    for w in line:
        if blocked:
            out.append(Eta(w.job, None, blocked))
            continue
        if w.gpus <= 0:
            out.append(Eta(w.job, None, f"{UNKNOWN}: it asks no GPU and waits for memory or vcores, "
                                        f"which this estimate does not weigh"))
            continue
        bases: List[str] = []
        while free < w.gpus and releases and releases[0][0] != float("inf"):
            at, _, gpus, basis = heapq.heappop(releases)
            clock, free = max(clock, at), free + gpus
            if basis not in bases:
                bases.append(basis)
        if free < w.gpus:
            blocked = releases[0][3] if releases else f"{UNKNOWN}: the cluster has fewer GPUs than it needs"
            out.append(Eta(w.job, None, blocked))
            continue
        since = bases or since  # a gang that needs nothing more starts when the one before it did
        free -= w.gpus
        out.append(Eta(w.job, clock, "; ".join(since) or FREE_NOW))
        order += 1
        if w.expected.seconds is not None:
            heapq.heappush(releases, (clock + w.expected.seconds, order, w.gpus + w.held, w.expected.basis))
        else:
            heapq.heappush(releases, (float("inf"), order, w.gpus + w.held,
                                      f"{UNKNOWN}: {w.job}'s end ({w.expected.basis})"))
    return tuple(out)
