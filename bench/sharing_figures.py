"""bench/sharing.py's pure part: the seeded trace, the ideal schedule of it, and the figures of a
replay computed from what it recorded (``raw.json``); no cluster, so unit tests drive it alone."""
from __future__ import annotations

import datetime
import math
import os
import random
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

TEAMS = ("teama", "teamb")
GPU_CHOICES = (1, 2, 4, 6)
GPU_WEIGHTS = (0.3, 0.3, 0.25, 0.15)
FAIL_AFTER = 3.0  # seconds into its first attempt a restarting gang's worker 0 exits 1

# -- the trace ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TraceJob:
    name: str
    team: str
    arrival: float         # seconds after the replay's start
    gpus: int              # tasks of 1 GPU each
    duration: float        # seconds each task works (its successful attempt)
    fail_after: Optional[float]  # the first attempt's worker 0 exits 1 after this; None: no restart
    framework: str

    @property
    def work(self) -> float:
        """Seconds the gang must run with no start-up cost: its failed attempt, then its full run."""
        return self.duration + (self.fail_after or 0.0)


def make_trace(seed: int = 25, jobs: int = 24, span: float = 300.0, time_scale: float = 1.0,
               restart_share: float = 0.35) -> List[TraceJob]:
    """A seeded trace: arrivals uniform over ``span`` seconds (the first at 0), durations
    10 to 60 s; ``time_scale`` multiplies both (the fail time stays 3 s)."""
    rng = random.Random(seed)
    arrivals = sorted([0.0] + [rng.uniform(0, span) for _ in range(jobs - 1)])
    out = []
    for i, arrival in enumerate(arrivals):
        team = rng.choice(TEAMS)
        gpus = rng.choices(GPU_CHOICES, GPU_WEIGHTS)[0]
        duration = round(rng.uniform(10, 60) * time_scale, 1)
        restart = rng.random() < restart_share and gpus > 1  # a gang, not a lone task
        framework = rng.choice(("custom", "pytorch"))
        out.append(TraceJob(name=f"share-{i:02d}-{team}-{gpus}g", team=team, arrival=round(arrival * time_scale, 1),
                            gpus=gpus, duration=duration, fail_after=FAIL_AFTER if restart else None,
                            framework=framework))
    return out


# -- the ideal schedule (pure) -----------------------------------------------------------------

@dataclass(frozen=True)
class Scheduled:
    name: str
    start: float
    end: float


def _list_schedule(jobs: Sequence[TraceJob], total_gpus: int, backfill: bool) -> List[Scheduled]:
    """FIFO on a pool of ``total_gpus`` with known run times and no start-up cost. Without
    ``backfill`` no job starts before an earlier-arrived one. With it (EASY backfilling), the
    first waiting job gets a reservation at the earliest time enough GPUs are free, and a later
    job starts now if it fits now and either ends by that time or leaves the head's GPUs free."""
    for j in jobs:
        if j.gpus > total_gpus:
            raise ValueError(f"{j.name} needs {j.gpus} GPUs, the cluster has {total_gpus}")
    queue = sorted(jobs, key=lambda j: (j.arrival, j.name))
    running: List[Tuple[float, int]] = []  # (end, gpus)
    done: List[Scheduled] = []
    waiting: List[TraceJob] = []
    now = queue[0].arrival if queue else 0.0
    i = 0
    while True:
        running = [(e, g) for e, g in running if e > now]
        while i < len(queue) and queue[i].arrival <= now:
            waiting.append(queue[i])
            i += 1
        while waiting:
            job = _next_to_start(waiting, running, total_gpus, now, backfill)
            if job is None:
                break
            waiting.remove(job)
            running.append((now + job.work, job.gpus))
            done.append(Scheduled(job.name, now, now + job.work))
        if i >= len(queue) and not waiting:
            break
        now = min([e for e, _ in running] + ([queue[i].arrival] if i < len(queue) else []))
    return done


def _next_to_start(waiting: Sequence[TraceJob], running: Sequence[Tuple[float, int]], total_gpus: int,
                   now: float, backfill: bool) -> Optional[TraceJob]:
    free = total_gpus - sum(g for _, g in running)
    head = waiting[0]
    if head.gpus <= free:
        return head
    if not backfill:
        return None
    shadow, avail = now, free  # the head's reservation: the earliest time enough GPUs are free
    for end, g in sorted(running):
        avail += g
        shadow = end
        if avail >= head.gpus:
            break
    extra = avail - head.gpus  # GPUs free at that time beyond the head's
    for job in waiting[1:]:
        if job.gpus <= free and (now + job.work <= shadow or job.gpus <= extra):
            return job
    return None


def ideal_schedule(jobs: Sequence[TraceJob], total_gpus: int) -> Dict[str, object]:
    """The better (by makespan) of FIFO and FIFO with backfilling; makespan from the first
    arrival to the last end. Returns ``{"policy", "makespan", "schedule", "fifo", "backfill"}``."""
    if not jobs:
        return {"policy": "fifo", "makespan": 0.0, "schedule": [], "fifo": 0.0, "backfill": 0.0}
    first = min(j.arrival for j in jobs)
    spans = {}
    schedules = {}
    for policy, backfill in (("fifo", False), ("backfill", True)):
        schedules[policy] = _list_schedule(jobs, total_gpus, backfill)
        spans[policy] = max(s.end for s in schedules[policy]) - first
    best = min(spans, key=lambda p: (spans[p], p != "fifo"))
    return {"policy": best, "makespan": spans[best], "schedule": schedules[best],
            "fifo": spans["fifo"], "backfill": spans["backfill"]}


# -- partial gangs (pure) ----------------------------------------------------------------------

def overlap(a: float, b: float, intervals: Sequence[Tuple[float, float]]) -> float:
    """Seconds of [a, b) covered by the (disjoint) intervals."""
    return sum(max(0.0, min(b, e) - max(a, s)) for s, e in intervals)


def gang_running_intervals(stamps: Dict[Tuple[int, int], Tuple[float, Optional[float]]], tasks: int,
                           app_end: float) -> List[Tuple[float, float]]:
    """When every task of one attempt ran at once: per attempt, from its last task's start to
    its first task's end (a task stopped by a restart writes no end: the app's end bounds it)."""
    out = []
    for attempt in sorted({a for _, a in stamps}):
        mine = [v for (i, a), v in stamps.items() if a == attempt]
        if len(mine) < tasks:
            continue
        start = max(s for s, _ in mine)
        end = min([e for _, e in mine if e is not None] or [app_end])
        if end > start:
            out.append((start, end))
    return out


def held_gpu_seconds(samples: Sequence[Tuple[float, int]], needs: int,
                     running: Sequence[Tuple[float, float]]) -> Dict[str, float]:
    """GPU-seconds an application held, from samples (time, GPUs held) each standing until the
    next: ``allocated``, ``incomplete`` (0 < held < needs) and ``idle_complete`` (the whole gang
    held while its tasks were not all running)."""
    allocated = incomplete = idle = 0.0
    for (t, g), (t2, _) in zip(samples, samples[1:]):
        dt = t2 - t
        if g <= 0 or dt <= 0:
            continue
        allocated += g * dt
        if g < needs:
            incomplete += g * dt
        else:
            idle += g * (dt - overlap(t, t2, running))
    return {"allocated": allocated, "incomplete": incomplete, "idle_complete": idle}


# -- what a replay recorded, and its figures ------------------------------------------------------

class Recorded:
    """What a replay recorded, as kept in ``raw.json`` (bench/sharing.py's ``record``): ``figures``
    computes from this alone, so ``--from DIR`` recomputes the figures of a replay that already ran."""

    def __init__(self, raw: dict):
        self.raw = raw
        self.trace = [TraceJob(**j) for j in raw["trace"]]
        self.t0: float = raw["t0"]
        self.app_ids: Dict[str, str] = raw["app_ids"]
        self.submitted: Dict[str, float] = raw["submitted"]
        self.samples = {a: [tuple(x) for x in v] for a, v in raw["samples"].items()}
        self.states = [tuple(x) for x in raw["states"]]
        self.final: Dict[str, dict] = raw["final"]

    def stamps(self, app_id: str) -> Dict[Tuple[int, int], Tuple[float, Optional[float]]]:
        out = {}
        for key, (start, end) in (self.raw["stamps"].get(app_id) or {}).items():
            index, attempt = key.split(".")
            out[(int(index), int(attempt))] = (start, end)
        return out


def nodes_needed(gpus: int, per_node: int) -> int:
    return math.ceil(gpus / per_node)


def figures(rec: Recorded) -> dict:
    reports: Dict[str, dict] = rec.raw["reports"]
    history: Dict[str, dict] = rec.raw["history"]
    total_gpus, per_node = rec.raw["gpus"], rec.raw["gpus_per_node"]
    trace = rec.trace
    ideal = ideal_schedule(trace, total_gpus)
    ideal_start = {s.name: s.start for s in ideal["schedule"]}
    by_job = []
    totals = {"allocated": 0.0, "incomplete": 0.0, "idle_complete": 0.0}
    for job in trace:
        app_id = rec.app_ids.get(job.name)
        row: dict = {"name": job.name, "team": job.team, "gpus": job.gpus, "duration": job.duration,
                     "restart_once": bool(job.fail_after), "arrival": job.arrival, "app_id": app_id}
        if app_id is None:
            row["state"] = "NOT SUBMITTED"
            by_job.append(row)
            continue
        report = reports.get(app_id) or {}
        final = rec.final.get(app_id) or {}
        submitted = rec.submitted[job.name]
        samples = rec.samples.get(app_id) or [(rec.t0, 0)]
        end = final.get("finishedTime", 0) / 1000 or samples[-1][0]  # killed at the deadline: last seen
        stamps = rec.stamps(app_id)
        running = gang_running_intervals(stamps, job.gpus, end)
        held = held_gpu_seconds(samples, job.gpus, running)
        for k in totals:
            totals[k] += held[k]
        hosts = {t.get("host") for t in report.get("tasks") or [] if t.get("host")}
        row.update({
            "state": report.get("state") or final.get("finalStatus") or "UNKNOWN",
            "attempts": report.get("attempts"),
            "restarts_by_cause": report.get("restarts_by_cause"),
            "diagnostics": (report.get("diagnostics") or "")[:300],
            "submit_lag": submitted - (rec.t0 + job.arrival),
            "queueing_delay": (running[0][0] - submitted) if running else None,
            "ideal_delay": ideal_start[job.name] - job.arrival,
            "gang_ready_seconds": (report.get("timings") or {}).get("gang_ready_seconds"),
            "am_wait": am_wait(history.get(app_id) or {}, submitted),
            "end": end - rec.t0,
            "nodes": len(hosts) or None, "nodes_min": nodes_needed(job.gpus, per_node),
            "gpu_seconds": held,
            "history_state": (history.get(app_id) or {}).get("state"),
        })
        by_job.append(row)
    delays = [r["queueing_delay"] for r in by_job if r.get("queueing_delay") is not None]
    ideal_delays = [r["ideal_delay"] for r in by_job if "ideal_delay" in r]
    first = rec.t0 + min(j.arrival for j in trace)
    ends = [r["end"] + rec.t0 for r in by_job if "end" in r]
    makespan = max(ends) - first if ends else None
    spanned = [r for r in by_job if r.get("nodes") and r.get("queueing_delay") is not None]  # gangs that ran
    partial = totals["incomplete"] + totals["idle_complete"]
    failed = [r for r in by_job if r.get("state") != "SUCCEEDED"]
    return {
        "t0": rec.t0, "jobs": len(trace), "gpus": total_gpus, "gpus_per_node": per_node,
        "failed": len(failed), "failed_jobs": [{k: r.get(k) for k in ("name", "app_id", "state", "diagnostics")}
                                                for r in failed],
        "gpu_seconds_allocated": totals["allocated"],
        "gpu_seconds_partial": partial,
        "gpu_seconds_incomplete_gang": totals["incomplete"],
        "gpu_seconds_idle_complete_gang": totals["idle_complete"],
        "partial_share": partial / totals["allocated"] if totals["allocated"] else None,
        "incomplete_share": totals["incomplete"] / totals["allocated"] if totals["allocated"] else None,
        "gpu_seconds_work": sum(j.gpus * j.work for j in trace),
        "queueing_delay_mean": statistics.mean(delays) if delays else None,
        "queueing_delay_max": max(delays) if delays else None,
        "gangs_never_complete": len(trace) - len(delays),
        "ideal_delay_mean": statistics.mean(ideal_delays) if ideal_delays else None,
        "ideal_delay_max": max(ideal_delays) if ideal_delays else None,
        "makespan": makespan, "ideal_makespan": ideal["makespan"], "ideal_policy": ideal["policy"],
        "ideal_fifo": ideal["fifo"], "ideal_backfill": ideal["backfill"],
        "makespan_ratio": makespan / ideal["makespan"] if makespan and ideal["makespan"] else None,
        "gangs_on_more_nodes_than_needed": sum(1 for r in spanned if r["nodes"] > r["nodes_min"]),
        "nodes_spanned": sum(r["nodes"] for r in spanned), "nodes_min": sum(r["nodes_min"] for r in spanned),
        "gangs_placed": len(spanned),
        "ams_running_max": max((r for _, _, r in rec.states), default=0),
        "ams_waiting_max": max((w for _, w, _ in rec.states), default=0),
        "am_wait_seconds": [r.get("am_wait") for r in by_job],
        "submit_lag_max": max((r["submit_lag"] for r in by_job if "submit_lag" in r), default=None),
        "by_job": by_job,
    }


def am_wait(row: dict, submitted: float) -> Optional[float]:
    """Seconds from `subm run` to the AM's start (the history's ``started_at``)."""
    try:
        started = datetime.datetime.fromisoformat(str(row["started_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    if started.tzinfo is None:
        started = started.replace(tzinfo=datetime.timezone.utc)
    return started.timestamp() - submitted


def fmt(x: Optional[float], spec: str = ".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def print_text(f: dict, args: dict) -> None:
    print(f"# sharing a GPU cluster: {f['jobs']} jobs (seed {args['seed']}, span {args['span_seconds']:g} s, "
          f"time scale {args['time_scale']:g}, gang_seconds {args['gang_seconds'] or 'default'}), "
          f"{datetime.datetime.fromtimestamp(f['t0']):%Y-%m-%d %H:%M}")
    print(f"# cluster {args['rm']}: {f['gpus']} GPUs, {f['gpus_per_node']} per node; preemption monitor "
          f"{'on' if args['preemption'] else 'off'}; load average {args['load']:.1f} at the end on "
          f"{os.cpu_count()} CPUs; submissions late by at most {fmt(f['submit_lag_max'])} s")
    print("  job                  GPUs  dur  restart  state       att  delay  ideal  nodes  held GPU-s  partial")
    for r in f["by_job"]:
        g = r.get("gpu_seconds") or {}
        part = g.get("incomplete", 0) + g.get("idle_complete", 0)
        print(f"  {r['name']:<20} {r['gpus']:>4} {r['duration']:>4.0f}  {'once' if r['restart_once'] else '-':>7}  "
              f"{r.get('state', '?'):<11} {r.get('attempts') or '-':>3}  {fmt(r.get('queueing_delay')):>5}  "
              f"{fmt(r.get('ideal_delay')):>5}  {r.get('nodes') or '-'}/{r.get('nodes_min', '-')}    "
              f"{g.get('allocated', 0):>8.0f}  {part:>7.0f}")
    share = f["partial_share"]
    print(f"jobs failed: {f['failed']} of {f['jobs']} (goal 0)")
    print(f"GPU-s held in partial gangs: {f['gpu_seconds_partial']:.0f} of {f['gpu_seconds_allocated']:.0f} allocated "
          f"= {fmt(share * 100 if share is not None else None)}% (goal <= 1%): incomplete gangs "
          f"{f['gpu_seconds_incomplete_gang']:.0f} ({fmt((f['incomplete_share'] or 0) * 100)}%), whole gangs with "
          f"tasks not all running {f['gpu_seconds_idle_complete_gang']:.0f}; the trace's work: "
          f"{f['gpu_seconds_work']:.0f} GPU-s")
    print(f"queueing delay (submission -> every task running): mean {fmt(f['queueing_delay_mean'])} s, max "
          f"{fmt(f['queueing_delay_max'])} s ({f['gangs_never_complete']} gangs never complete); ideal schedule: mean "
          f"{fmt(f['ideal_delay_mean'])} s, max {fmt(f['ideal_delay_max'])} s")
    print(f"makespan: {fmt(f['makespan'])} s against ideal {fmt(f['ideal_makespan'])} s ({f['ideal_policy']}; FIFO "
          f"{fmt(f['ideal_fifo'])}, backfill {fmt(f['ideal_backfill'])}) = {fmt(f['makespan_ratio'], '.2f')}x "
          f"(goal <= 1.15x)")
    print(f"nodes spanned: {f['nodes_spanned']} for the {f['gangs_placed']} gangs that ran against {f['nodes_min']} at "
          f"fewest; "
          f"{f['gangs_on_more_nodes_than_needed']} gangs on more nodes than needed")
    waits = [w for w in f["am_wait_seconds"] if w is not None]
    print(f"AMs: at most {f['ams_running_max']} running at once, at most {f['ams_waiting_max']} waiting for YARN to "
          f"start them (ACCEPTED); submission -> AM started: mean {fmt(statistics.mean(waits) if waits else None)} s, "
          f"max {fmt(max(waits, default=None))} s")
    for r in f["failed_jobs"]:
        print(f"  failed: {r['name']} {r['app_id']} {r['state']}: {r['diagnostics']}")
