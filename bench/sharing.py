#!/usr/bin/env python3
"""Sharing a GPU cluster between two teams: a seeded trace of gangs replayed on YARN.

It generates a seeded trace (default 24 jobs from teams/queues ``teama`` and ``teamb``; 1, 2, 4
or 6 GPUs, one 1-GPU task each; 10 to 60 s of work; arrivals spread over ~5 minutes; some gangs
fail once, 3 s into their first attempt, and restart: ``restart: {policy: gang, max_restarts:
1}``), submits each job at its arrival time (``subm run --detach``), samples the RM's REST
every second (GPUs each application holds) until every job has ended, reads each job's report
(``subm status``, ``subm history``) and prints:

* jobs failed (goal 0);
* GPU-seconds held in partial gangs, as a share of the GPU-seconds allocated (goal <= 1%):
  held by an application that holds fewer GPUs than its gang needs, or all of them while its
  tasks are not all running (start-up, a gang restart, tasks done while others run);
* queueing delay, submission -> every task of the gang running (first attempt), mean and max;
* makespan against an ideal schedule computed offline: the better of FIFO and FIFO with (EASY)
  backfilling, list schedules of the same trace on the cluster's GPUs with no start-up cost;
* nodes spanned per gang that ran against the fewest possible (ceil(GPUs / GPUs per node)).

Tasks write their start and end times into the job's ``SUBM_SHARED_DIR`` (``shared_dir:`` a
folder under the bench's work directory, which every node of the rig on this machine sees).

    RIG_NODES=3 RIG_GPUS=2 RIG_QUEUES=teama:50,teamb:50 RIG_HOST=127.0.0.7 RIG_NODE_BASE=70 \\
      bash scripts/with-rig.sh .venv/bin/python bench/sharing.py          # [--jobs 8 --time-scale 0.5]

How: GPUs held come from ``/ws/v1/cluster/apps`` (each application's ``resourceInfo``, sampled
every second, each sample standing until the next); "every task running" from the tasks' stamps
(per attempt, from its last task's start to its first task's end); nodes from the report's task
hosts; the ideal schedule pools the cluster's GPUs (a gang may span nodes) and counts a restarting
gang's failed 3 s as work. It also says how many AMs ran at once and how many waited (ACCEPTED).

Progress goes to stderr, figures to stdout (``--json``: one JSON object). Everything recorded is
kept in ``raw.json`` in the work directory it names; ``--from DIR`` prints the figures again
from it. Every application it started is killed on the way out (Ctrl-C too).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TEAMS = ("teama", "teamb")
GPU_CHOICES = (1, 2, 4, 6)
GPU_WEIGHTS = (0.3, 0.3, 0.25, 0.15)
WORKER_MB = 128
FAIL_AFTER = 3.0  # seconds into its first attempt a restarting gang's worker 0 exits 1
ENDED = ("FINISHED", "FAILED", "KILLED")
LIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


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


# -- talking to the cluster --------------------------------------------------------------------

def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def subm_cmd(*args: str) -> List[str]:
    return [sys.executable, "-m", "submarine_py.cli", *args]


def subm_env(home: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["SUBM_HOME"] = str(home)  # a history of these jobs alone
    return env


#: The task: writes its start, sleeps (worker 0 of a restarting gang exits 1 at attempt 0), writes its end.
TASK = ('import os,sys,time; d=os.environ["SUBM_SHARED_DIR"]; i=os.environ["SUBM_INDEX"]; '
        'a=os.environ["SUBM_ATTEMPT"]; p=os.path.join(d,"w%s.a%s"%(i,a)); open(p,"w").write("%.3f\\n"%time.time()); '
        'fail=FAIL>0 and a=="0" and i=="0"; time.sleep(FAIL if fail else DUR); '
        'open(p,"a").write("%.3f\\n"%time.time()); sys.exit(1 if fail else 0)')


def job_yaml(job: TraceJob, shared: Path, gang_seconds: Optional[int]) -> str:
    code = TASK.replace("FAIL", repr(job.fail_after or 0.0)).replace("DUR", repr(job.duration))
    command = "python3 -c " + shlex.quote(code)
    lines = [f"name: {job.name}", f"framework: {job.framework}", f"queue: {job.team}",
             "tags: [subm-bench, sharing]", f"shared_dir: {shared}",
             f"restart: {{policy: gang, max_restarts: {1 if job.fail_after else 0}}}"]
    if gang_seconds:
        lines.append(f"timeouts: {{gang_seconds: {gang_seconds}}}")
    lines += ["roles:", "  worker:", f"    instances: {job.gpus}",
              f"    resources: {{memory: {WORKER_MB} MiB, vcores: 1, gpus: 1}}",
              f"    command: {json.dumps(command)}"]
    return "\n".join(lines) + "\n"


class Replay:
    def __init__(self, trace: List[TraceJob], workdir: Path, rm: str, gang_seconds: Optional[int]):
        import requests

        self.requests = requests
        self.trace, self.workdir, self.rm, self.gang_seconds = trace, workdir, rm, gang_seconds
        self.shared = workdir / "shared"
        self.shared.mkdir(parents=True)
        self.home = workdir / "home"
        self.submitted: Dict[str, float] = {}   # name -> wall time `subm run` was started
        self.app_ids: Dict[str, str] = {}       # name -> application id
        self.submit_errors: Dict[str, str] = {}
        self.samples: Dict[str, List[Tuple[float, int]]] = {}  # app id -> (time, GPUs held)
        self.final: Dict[str, dict] = {}         # app id -> the RM's app, once ended
        self.states: List[Tuple[float, int, int]] = []  # (time, ours ACCEPTED, ours RUNNING): AMs waiting, up
        self.lock = threading.Lock()

    def get(self, path: str, **params) -> dict:
        params.setdefault("user.name", "subm-bench")
        return self.requests.get(self.rm + path, params=params, headers={"Accept": "application/json"},
                                 timeout=10).json()

    def submit(self, job: TraceJob, t0: float) -> None:
        time.sleep(max(0.0, t0 + job.arrival - time.time()))
        path = self.workdir / f"{job.name}.yaml"
        path.write_text(job_yaml(job, self.shared, self.gang_seconds))
        started = time.time()
        proc = subprocess.run(subm_cmd("run", str(path), "--backend", "yarn", "--detach", "--output", "json"),
                              env=subm_env(self.home), capture_output=True, text=True, timeout=300)
        with self.lock:
            self.submitted[job.name] = started
            try:
                self.app_ids[job.name] = json.loads(proc.stdout)["app_id"]
            except (ValueError, KeyError, TypeError):
                self.submit_errors[job.name] = f"exit {proc.returncode}: {proc.stdout.strip()} {proc.stderr.strip()}"[-2000:]
        log(f"submitted {job.name} ({job.gpus} GPUs, {job.duration:g} s"
            f"{', fails once' if job.fail_after else ''}) as {self.app_ids.get(job.name, 'FAILED TO SUBMIT')} "
            f"in {time.time() - started:.1f} s")

    def sample(self) -> None:
        now = time.time()
        apps = (self.get("/ws/v1/cluster/apps", states=LIVE).get("apps") or {}).get("app") or []
        live = {a["id"]: a for a in apps}
        with self.lock:
            ours = set(self.app_ids.values())
        mine = [live[a]["state"] for a in ours if a in live]
        self.states.append((now, sum(1 for x in mine if x != "RUNNING"), mine.count("RUNNING")))
        for app_id in ours:
            if app_id in self.final:
                continue
            if app_id in live:
                self.samples.setdefault(app_id, []).append((now, gpus_held(live[app_id])))
            else:
                app = self.get(f"/ws/v1/cluster/apps/{app_id}").get("app") or {}
                if app.get("state") in ENDED:
                    self.final[app_id] = app
                    self.samples.setdefault(app_id, []).append((app.get("finishedTime", now * 1000) / 1000, 0))
                    log(f"{app_id} ended: {app.get('state')} {app.get('finalStatus')}")

    def run(self, deadline: float) -> None:
        t0 = time.time() + 2
        threads = [threading.Thread(target=self.submit, args=(j, t0), daemon=True) for j in self.trace]
        for t in threads:
            t.start()
        self.t0 = t0
        stop_at = time.time() + deadline
        while time.time() < stop_at:
            tick = time.time()
            try:
                self.sample()
            except (self.requests.RequestException, ValueError) as exc:
                log(f"warning: sampling the RM failed: {exc}")
            with self.lock:
                pending = len(self.app_ids) + len(self.submit_errors) < len(self.trace)
                ended = all(a in self.final for a in self.app_ids.values())
            if not pending and ended:
                break
            time.sleep(max(0.0, 1.0 - (time.time() - tick)))
        else:
            log(f"deadline of {deadline:g} s reached: killing what is left")

    def kill_all(self) -> None:
        for app_id in list(self.app_ids.values()):
            if app_id in self.final:
                continue
            try:
                self.requests.put(f"{self.rm}/ws/v1/cluster/apps/{app_id}/state", params={"user.name": "subm-bench"},
                                  json={"state": "KILLED"}, timeout=10)
            except self.requests.RequestException as exc:
                log(f"warning: could not kill {app_id}: {exc}")

    def stamps(self, app_id: str) -> Dict[Tuple[int, int], Tuple[float, Optional[float]]]:
        out = {}
        folder = self.shared / app_id
        for f in folder.glob("w*.a*") if folder.is_dir() else []:
            index, attempt = f.name[1:].split(".a")
            times = [float(x) for x in f.read_text().split()]
            if times:
                out[(int(index), int(attempt))] = (times[0], times[1] if len(times) > 1 else None)
        return out


def _gpu(resource: Optional[dict]) -> int:
    """yarn.io/gpu in one of the RM's resource objects."""
    infos = ((resource or {}).get("resourceInformations") or {}).get("resourceInformation") or []
    return sum(int(r.get("value", 0)) for r in infos if r.get("name") == "yarn.io/gpu")


class Recorded:
    """What a replay recorded, as kept in ``raw.json``: ``figures`` computes from this alone, so
    ``--from DIR`` recomputes the figures of a replay that already ran."""

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

    @classmethod
    def of(cls, replay: "Replay", reports: dict, history: dict, total: int, per_node: int, args: dict) -> "Recorded":
        stamps = {a: {f"{i}.{t}": v for (i, t), v in replay.stamps(a).items()} for a in replay.app_ids.values()}
        return cls({"args": args, "trace": [asdict(j) for j in replay.trace], "t0": replay.t0,
                    "app_ids": replay.app_ids, "submitted": replay.submitted, "submit_errors": replay.submit_errors,
                    "samples": replay.samples, "states": replay.states, "final": replay.final, "stamps": stamps,
                    "reports": reports, "history": history, "gpus": total, "gpus_per_node": per_node})


def gpus_held(app: dict) -> int:
    """yarn.io/gpu the application holds, from its ``resourceInfo`` (every partition)."""
    return sum(_gpu(part.get("used")) for part in (app.get("resourceInfo") or {}).get("resourceUsagesByPartition") or [])


# -- figures -----------------------------------------------------------------------------------

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


def cluster_gpus(replay: Replay) -> Tuple[int, int]:
    nodes = (replay.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
    per = []
    for n in nodes:
        if n.get("state") != "RUNNING":
            continue
        per.append(sum(_gpu(n.get(key)) for key in ("usedResource", "availableResource")))
    if not per or not sum(per):
        raise SystemExit(f"the cluster at {replay.rm} offers no yarn.io/gpu (RIG_GPUS=2)")
    return sum(per), max(per)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--span-seconds", type=float, default=300.0, help="arrivals spread over this")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiplies arrivals and durations")
    parser.add_argument("--restart-share", type=float, default=0.35, help="share of gangs (2+ GPUs) that fail once")
    parser.add_argument("--gang-seconds", type=int, default=None, help="timeouts.gang_seconds (default: the job's)")
    parser.add_argument("--deadline", type=float, default=2400.0, help="give up (kill what is left) after this")
    parser.add_argument("--trace", action="store_true", help="print the trace and its ideal schedule, run nothing")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout instead of text")
    parser.add_argument("--from", dest="from_dir", type=Path, help="recompute the figures of the replay kept in DIR")
    args = parser.parse_args()
    if args.from_dir:
        return report(Recorded(json.loads((args.from_dir / "raw.json").read_text())), args.json)
    trace = make_trace(args.seed, args.jobs, args.span_seconds, args.time_scale, args.restart_share)
    if args.trace:
        ideal = ideal_schedule(trace, 6)
        for j in trace:
            print(json.dumps(asdict(j)))
        print(json.dumps({k: v for k, v in ideal.items() if k != "schedule"}))
        return 0
    if not os.environ.get("HADOOP_CONF_DIR"):
        raise SystemExit("set HADOOP_CONF_DIR (scripts/with-rig.sh does)")
    from submarine_py.backends.yarn.rest import hadoop_conf, rm_address

    rm = rm_address()
    preemption = hadoop_conf("yarn-site.xml").get("yarn.resourcemanager.scheduler.monitor.enable") == "true"
    workdir = Path(tempfile.mkdtemp(prefix="subm-sharing-"))
    replay = Replay(trace, workdir, rm, args.gang_seconds)
    total, per_node = cluster_gpus(replay)
    if total != 6:
        log(f"note: the cluster has {total} GPUs ({per_node} per node); the ideal schedule uses that")
    log(f"replaying {len(trace)} jobs over {max(j.arrival for j in trace):.0f} s on {rm} ({total} GPUs); "
        f"work dir {workdir}")
    try:
        replay.run(args.deadline)
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        replay.kill_all()
    reports, history = {}, {}
    env = subm_env(replay.home)
    for name, app_id in replay.app_ids.items():
        proc = subprocess.run(subm_cmd("status", app_id, "--output", "json"), env=env, capture_output=True,
                              text=True, timeout=120)
        try:
            reports[app_id] = json.loads(proc.stdout)
        except ValueError:
            log(f"warning: subm status {app_id}: exit {proc.returncode} {proc.stderr.strip()[-300:]}")
    proc = subprocess.run(subm_cmd("history", "--output", "json"), env=env, capture_output=True, text=True,
                          timeout=300)
    try:
        history = {row["app_id"]: row for row in json.loads(proc.stdout)}
    except (ValueError, KeyError, TypeError):
        log(f"warning: subm history: exit {proc.returncode} {proc.stderr.strip()[-300:]}")
    for name, err in replay.submit_errors.items():
        log(f"submission failed: {name}: {err}")
    settings = {"seed": args.seed, "span_seconds": args.span_seconds, "time_scale": args.time_scale,
                "gang_seconds": args.gang_seconds, "rm": rm, "preemption": preemption, "load": os.getloadavg()[0]}
    recorded = Recorded.of(replay, reports, history, total, per_node, settings)
    (workdir / "raw.json").write_text(json.dumps(recorded.raw, default=str))
    log(f"what it recorded is kept in {workdir}/raw.json (--from {workdir} prints the figures again)")
    return report(recorded, args.json)


def report(recorded: Recorded, as_json: bool) -> int:
    f = figures(recorded)
    if as_json:
        print(json.dumps(f, default=str))
    else:
        print_text(f, recorded.raw["args"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
