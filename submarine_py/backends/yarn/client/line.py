"""The line of waiting gangs on a YARN cluster, read once for ``subm queue`` and ``subm status``
of a waiting job (never by what polls).

Requests, whatever the cluster's size: the RM's list of this tool's jobs (slim), its running
nodes (the GPUs free now, and the fewest nodes a gang can span), and each running subm job's
AM report through the RM's proxy (its declared ``timeouts.job_seconds``, when its gang was
ready, what it waits for): one per job, eight at a time. Expected run lengths come from the
job history of whoever runs ``subm queue`` (``SUBM_HISTORY``: a shared one on HDFS knows
every user's runs).
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ....admission import fewest_nodes, line
from ....errors import SubmarineError
from ....executor import protocol
from ....forecast import Expected, Holder, Waiter, expected, expected_end, forecast, runs_by_job
from ....queue_view import QueueView, Running, Waiting, positions
from ....report import JobReport
from ....states import JobState
from ..capacity import leaf_queue, node_room, node_totals, parse_gang_tag, waiting_gangs
from ..hadoop.resourcemanager import AppState, ResourceManager
from ..protocol import ASKED_BELOW, TAG

log = logging.getLogger("subm.yarn")

#: AM reports read at a time.
READERS = 8


def history_runs() -> Dict[Tuple[str, str], List[float]]:
    """Earlier SUCCEEDED runs by (name, user), from the history (none where it cannot be read)."""
    from ....history import History

    try:
        return runs_by_job(History().rows(state=JobState.SUCCEEDED.value))
    except (SubmarineError, ImportError, OSError) as exc:
        log.debug("no history for the forecast: %s", exc)
        return {}


def read_line(rm: ResourceManager, now: float, parse: Any,
              runs: Optional[Mapping[Tuple[str, str], Sequence[float]]] = None) -> QueueView:
    """The line and the GPUs held now (``parse``: an AM's JSON as a :class:`JobReport` or None)."""
    apps = rm.apps(tags=[TAG], states=[AppState.ACCEPTED.value, AppState.RUNNING.value], slim=True)
    listed = rm.nodes(running_only=True)
    free = sum(n.gpus for n in node_room(listed).values()) if listed else None
    totals = node_totals(listed)
    running = [a for a in apps if a.get("state") == AppState.RUNNING and parse_gang_tag(a.get("applicationTags"))]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        reports = dict(zip((a["id"] for a in running),
                           pool.map(lambda a: _report(rm, a["id"], parse), running)))
    runs = history_runs() if runs is None else runs
    return view_of(apps, reports, totals, free, runs, now)


def _report(rm: ResourceManager, app_id: str, parse: Any) -> Optional[JobReport]:
    try:
        return parse(rm.proxy_get(app_id, protocol.PATH_STATUS))
    except SubmarineError:
        return None


def view_of(apps: Sequence[Mapping[str, Any]], reports: Mapping[str, Optional[JobReport]],
            totals: Mapping[str, Any], free_gpus: Optional[int],
            runs: Mapping[Tuple[str, str], Sequence[float]], now: float) -> QueueView:
    """The view from what was read (pure): the line in admission's order, its forecast."""
    by_id = {str(a.get("id")): a for a in apps}
    gangs = line(waiting_gangs(apps, me=""))
    holders: List[Holder] = []
    shown: List[Running] = []
    waiting = {g.job for g in gangs}
    for a in apps:
        needs = parse_gang_tag(a.get("applicationTags"))
        app_id = str(a.get("id"))
        if (not needs or app_id in waiting or a.get("state") != AppState.RUNNING
                or float(a.get("progress") or 0) < ASKED_BELOW):
            continue
        report = reports.get(app_id)
        how_long = _expected(a, report, runs)
        end, basis = expected_end(how_long, started_at=_started(a, report), ready_at=_ready(report), now=now)
        gpus = sum(n.gpus for n in needs)
        if gpus:
            holders.append(Holder(app_id, gpus, end, basis))
            shown.append(Running(app_id, a.get("user"), a.get("name"), leaf_queue(str(a.get("queue") or "")),
                                 gpus, end, basis))
    # Each gang whole, as its tag says (an asked gang's needs are only what it still lacks).
    wholes = {g.job: parse_gang_tag(by_id[g.job].get("applicationTags")) or g.needs for g in gangs}
    waiters = []
    for g in gangs:
        held = sum(n.gpus for n in g.holding)
        whole = wholes[g.job]
        if g.asked:  # an asked gang's needs are what it still lacks
            held = sum(n.gpus for n in whole) - sum(n.gpus for n in g.needs)
        waiters.append(Waiter(g.job, sum(n.gpus for n in g.needs[len(g.holding):]),
                              _expected(by_id[g.job], reports.get(g.job), runs), held=held))
    etas = forecast(waiters, holders, free_gpus, now)
    out = []
    for g, w, eta, pos in zip(gangs, waiters, etas, positions([g.queue for g in gangs])):
        a, whole = by_id[g.job], wholes[g.job]
        report = reports.get(g.job)
        out.append(Waiting(position=pos, app_id=g.job, user=a.get("user"), name=a.get("name"), queue=g.queue,
                           gpus=sum(n.gpus for n in whole), containers=len(whole),
                           nodes=fewest_nodes(whole, totals) if totals else None, waiting_since=g.submitted_at,
                           asked=g.asked, held_gpus=w.held, waiting_for=report.waiting_for if report else None,
                           expected_start=eta.start, basis=eta.basis))
    return QueueView(at=now, free_gpus=free_gpus, waiting=tuple(out), running=tuple(shown))


def _expected(app: Mapping[str, Any], report: Optional[JobReport],
              runs: Mapping[Tuple[str, str], Sequence[float]]) -> Expected:
    return expected(app.get("name"), app.get("user"), runs, report.job_seconds if report else None)


def _started(app: Mapping[str, Any], report: Optional[JobReport]) -> Optional[float]:
    if report is not None and report.started_at:
        return report.started_at
    launched = app.get("launchTime") or app.get("startedTime")
    return float(launched) / 1000.0 if launched else None


def _ready(report: Optional[JobReport]) -> Optional[float]:
    """When the running job's gang was ready (its submission plus its gang-ready seconds)."""
    if report is None or report.submitted_at is None or report.timings.gang_ready_seconds is None:
        return None
    return report.submitted_at + report.timings.gang_ready_seconds
