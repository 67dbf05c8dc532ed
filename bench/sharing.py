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
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sharing_figures import Recorded, TraceJob, figures, ideal_schedule, make_trace, print_text  # noqa: E402

WORKER_MB = 128
ENDED = ("FINISHED", "FAILED", "KILLED")
LIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


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


def gpus_held(app: dict) -> int:
    """yarn.io/gpu the application holds, from its ``resourceInfo`` (every partition)."""
    return sum(_gpu(part.get("used")) for part in (app.get("resourceInfo") or {}).get("resourceUsagesByPartition") or [])


def record(replay: Replay, reports: dict, history: dict, total: int, per_node: int, args: dict) -> Recorded:
    stamps = {a: {f"{i}.{t}": v for (i, t), v in replay.stamps(a).items()} for a in replay.app_ids.values()}
    return Recorded({"args": args, "trace": [asdict(j) for j in replay.trace], "t0": replay.t0,
                     "app_ids": replay.app_ids, "submitted": replay.submitted, "submit_errors": replay.submit_errors,
                     "samples": replay.samples, "states": replay.states, "final": replay.final, "stamps": stamps,
                     "reports": reports, "history": history, "gpus": total, "gpus_per_node": per_node})


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
    from submarine_py.backends.yarn.hadoop.resourcemanager import rm_address
    from submarine_py.backends.yarn.hadoop.conf import hadoop_conf

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
    recorded = record(replay, reports, history, total, per_node, settings)
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
