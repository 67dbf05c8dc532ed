"""The line of waiting gangs as people, scripts and Prometheus see it (pure; ``subm queue`` and
``subm status`` of a waiting job).

A backend that keeps a shared line (YARN: ``backends/yarn/client/line.py``) reads a
:class:`QueueView`: the waiting gangs in admission's order (``admission.line``), each with its
expected start (``forecast.py``), and the running jobs holding GPUs with their expected ends.
Here it is rendered: text, JSON (``--output json``) and Prometheus' text exposition format
(``--output prometheus``, for node_exporter's textfile collector).

The metrics are gauges of the moment: waiting gangs and the GPUs they ask, the oldest wait,
the GPUs held by gangs asked for and not all granted, and the GPUs running jobs hold, per queue;
the cluster's free GPUs. No admission or preemption counters: a cumulative count would need a
record kept across runs of ``subm queue`` (the RM forgets finished jobs, the history is each
user's), which a one-shot read does not have.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .report import Ahead, Place


@dataclass(frozen=True)
class Waiting:
    """A gang in the line, with its expected start."""

    #: In its queue's line: 1 is the head.
    position: int
    app_id: str
    user: Optional[str]
    name: Optional[str]
    queue: str
    #: The GPUs its whole gang asks, in how many containers, and the fewest nodes those can span
    #: on this cluster (None: unknown).
    gpus: int
    containers: int
    nodes: Optional[int]
    waiting_since: float
    #: Asked for and arriving (admitted, not all granted), and the GPUs it holds already.
    asked: bool
    held_gpus: int
    #: What its AM says it waits for (None: it has not said, e.g. its AM is not up yet).
    waiting_for: Optional[str]
    expected_start: Optional[float]
    basis: str


@dataclass(frozen=True)
class Running:
    """A running job holding GPUs, with its expected end."""

    app_id: str
    user: Optional[str]
    name: Optional[str]
    queue: str
    gpus: int
    expected_end: Optional[float]
    basis: str


@dataclass(frozen=True)
class QueueView:
    """The line (every queue, in admission's order) and the GPUs held, read at ``at``."""

    at: float
    free_gpus: Optional[int]
    waiting: Tuple[Waiting, ...]
    running: Tuple[Running, ...]

    def of_queue(self, queue: Optional[str]) -> "QueueView":
        """Only ``queue``'s gangs and jobs (None: every queue)."""
        if queue is None:
            return self
        return replace(self, waiting=tuple(w for w in self.waiting if w.queue == queue),
                       running=tuple(r for r in self.running if r.queue == queue))

    def queues(self) -> List[str]:
        return sorted({w.queue for w in self.waiting} | {r.queue for r in self.running})


def positions(queues: Sequence[str]) -> List[int]:
    """Each gang's position in its own queue's line, given the queues of the whole line in order."""
    seen: Dict[str, int] = {}
    out = []
    for q in queues:
        seen[q] = seen.get(q, 0) + 1
        out.append(seen[q])
    return out


def place_of(view: QueueView, app_id: str) -> Optional[Place]:
    """``app_id``'s place in its queue's line (None: not in the line)."""
    me = next((w for w in view.waiting if w.app_id == app_id), None)
    if me is None:
        return None
    ahead = tuple(Ahead(w.app_id, w.user, w.gpus, w.waiting_since) for w in view.waiting
                  if w.queue == me.queue and w.position < me.position)
    return Place(queue=me.queue, position=me.position, ahead=ahead, free_gpus=view.free_gpus, gpus=me.gpus,
                 containers=me.containers, nodes=me.nodes, expected_start=me.expected_start, basis=me.basis)


# --------------------------------------------------------------------- text
def when(t: Optional[float], now: float) -> str:
    """``12:04:31 UTC (in 3.2m)``, or ``unknown``."""
    if t is None:
        return "unknown"
    clock = dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime("%H:%M:%S UTC")
    left = t - now
    return f"{clock} (now)" if left < 1 else f"{clock} (in {_span(left)})"


def _span(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.1f}m" if s < 7200 else f"{s / 3600:.1f}h"


def place_lines(place: Place, now: float) -> List[str]:
    """A waiting job's place, for ``subm status``."""
    nodes = f" on at least {place.nodes} node{'s' if place.nodes != 1 else ''}" if place.nodes else ""
    free = "unknown" if place.free_gpus is None else str(place.free_gpus)
    lines = [f"Line: position {place.position} in queue {place.queue}; it needs {place.gpus} GPU"
             f"{'s' if place.gpus != 1 else ''} in {place.containers} container(s){nodes}, {free} free now"]
    for a in place.ahead:
        lines.append(f"  ahead: {a.app_id} of {a.user or '?'}, {a.gpus} GPUs, waiting {_span(now - a.waiting_since)}")
    lines.append(f"Expected start: {when(place.expected_start, now)}; basis: {place.basis}")
    return lines


def format_queue(view: QueueView) -> str:
    """The line per queue, then the running jobs holding GPUs."""
    now = view.at
    free = "unknown" if view.free_gpus is None else str(view.free_gpus)
    lines = [f"GPUs free in the cluster: {free}"]
    for queue in view.queues():
        mine = view.of_queue(queue)
        lines.append(f"Queue {queue}: {len(mine.waiting)} waiting, {len(mine.running)} running")
        if mine.waiting:
            rows = [["POS", "APP_ID", "USER", "NAME", "GPUS", "WAITING", "EXPECTED START", "BASIS"]]
            for w in mine.waiting:
                rows.append([str(w.position), w.app_id, w.user or "-", w.name or "-",
                             f"{w.gpus}" + (f" ({w.held_gpus} held)" if w.held_gpus else ""),
                             _span(now - w.waiting_since), when(w.expected_start, now), w.basis])
            lines += _table(rows)
            lines += [f"  {w.app_id}: {w.waiting_for}" for w in mine.waiting if w.waiting_for]
        if mine.running:
            rows = [["RUNNING", "USER", "NAME", "GPUS", "EXPECTED END", "BASIS"]]
            rows += [[r.app_id, r.user or "-", r.name or "-", str(r.gpus), when(r.expected_end, now), r.basis]
                     for r in mine.running]
            lines += _table(rows)
    if not view.queues():
        lines.append("no gang waits and no job of subm holds GPUs")
    return "\n".join(lines)


def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


# --------------------------------------------------------------------- JSON
def queue_json(view: QueueView) -> Dict[str, Any]:
    """``subm queue --output json``: per queue, the line in order and the running jobs."""
    return {"at": view.at, "free_gpus": view.free_gpus,
            "queues": {q: {"waiting": [asdict(w) for w in view.of_queue(q).waiting],
                           "running": [asdict(r) for r in view.of_queue(q).running]}
                       for q in view.queues()}}


# --------------------------------------------------------------------- Prometheus
#: name -> (help, what per queue).
METRICS = (
    ("subm_waiting_gangs", "Gangs of subm jobs waiting for room (queued or asked and arriving)."),
    ("subm_waiting_gpus", "GPUs the waiting gangs ask (whole gangs)."),
    ("subm_oldest_wait_seconds", "How long the oldest waiting gang has waited."),
    ("subm_partial_gang_gpus", "GPUs held by gangs asked for and not all granted yet."),
    ("subm_running_gpus", "GPUs the running subm jobs hold."),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _per_queue(view: QueueView, queue: str) -> Dict[str, float]:
    mine = view.of_queue(queue)
    return {"subm_waiting_gangs": len(mine.waiting),
            "subm_waiting_gpus": sum(w.gpus for w in mine.waiting),
            "subm_oldest_wait_seconds": round(max((view.at - w.waiting_since for w in mine.waiting), default=0.0), 3),
            "subm_partial_gang_gpus": sum(w.held_gpus for w in mine.waiting if w.asked),
            "subm_running_gpus": sum(r.gpus for r in mine.running)}


def queue_prometheus(view: QueueView, queues: Sequence[str] = ()) -> str:
    """The figures in Prometheus' text exposition format (gauges), per queue: those of the view
    and ``queues`` (named ones show 0 while nothing waits in them)."""
    names = sorted(set(view.queues()) | set(queues))
    figures = {q: _per_queue(view, q) for q in names}
    lines: List[str] = []
    for metric, words in METRICS:
        lines += [f"# HELP {metric} {words}", f"# TYPE {metric} gauge"]
        lines += [f'{metric}{{queue="{_label(q)}"}} {_number(figures[q][metric])}' for q in names]
    if view.free_gpus is not None:
        lines += ["# HELP subm_free_gpus GPUs free in the cluster.", "# TYPE subm_free_gpus gauge",
                  f"subm_free_gpus {view.free_gpus}"]
    return "\n".join(lines) + "\n"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
