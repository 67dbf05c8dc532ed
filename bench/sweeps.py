#!/usr/bin/env python3
"""Sweeps: one job running every trial on reused containers, against one job per trial.

On the local backend (default) or YARN (``--backend yarn``, with HADOOP_CONF_DIR), with the
synthetic objective of the tests (tests/programs/sweep_objective.py: known optimum x = 2), it
measures

* a sweep of N trials (default 16, each about ``--steps`` x ``--step-seconds``), ``parallel``
  P (default 4): wall time (submission to the final report), the pool's busy fraction (the
  trials' run time over P containers x the sweep's wall time, and over P x the time from the
  first trial's start to the last one's end), and the gap between one trial's end and the
  next one's start in the same container (its processes started, as the executor tells the AM);
* the same N trials as N separate ``subm run`` jobs, all submitted at once (``--detach``, then
  waited for), and P at a time: wall time and busy fraction of P slots;
* early stopping: the same sweep (``--es-trials``, random and TPE, the same seed) with and
  without ``early_stop: {rule: median}``: steps run (compute), run time, and the best value.

    python3 bench/sweeps.py [--trials 16] [--parallel 4] [--backend local|yarn]

It prints the figures (docs/benchmarks.md, "sweeps.py", keeps them).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
OBJECTIVE = REPO / "tests" / "programs" / "sweep_objective.py"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def subm(args: List[str], env: Dict[str, str], timeout: float = 900) -> Tuple[int, str]:
    """``subm ARGS``: (exit code, stdout); stderr (progress lines) is logged when it fails."""
    proc = subprocess.run([sys.executable, "-m", "submarine_py.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode:
        log(proc.stderr[-2000:])
    return proc.returncode, proc.stdout


def job_file(folder: Path, name: str, steps: int, step_seconds: float, sweep: Optional[str], x: float = 0.0,
             backend: str = "local") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    env = f'STEPS: "{steps}", STEP_SECONDS: "{step_seconds}"'
    # One job per trial: its x given as a sweep would (a role's env may not set SUBM_ names).
    command = "python3 objective.py --print" if sweep else f"SUBM_PARAM_X={x} python3 objective.py --print"
    body = textwrap.dedent(f"""\
        name: {name}
        roles:
          worker:
            command: {command}
            env: {{{env}}}
            resources: {{memory: 256M, vcores: 1}}
        files:
          objective.py: {OBJECTIVE}
        """)
    if sweep:
        body += "sweep:\n" + textwrap.indent(textwrap.dedent(sweep).strip() + "\n", "  ")
    path = folder / f"{name}.yaml"
    path.write_text(body)
    return path


def final_report(app_id: str, env: Dict[str, str]) -> Dict[str, Any]:
    """The AM's full report (trials' start times and durations)."""
    if app_id.startswith("local_"):
        return json.loads((Path(env["SUBM_HOME"]) / "local" / app_id / "report.json").read_text())
    code, out = subm(["status", app_id, "--output", "json"], env)
    public = json.loads(out)
    return {**public, "sweep": {"trials": public["trials"]}}


def run_sweep(folder: Path, env: Dict[str, str], args: argparse.Namespace, name: str, sweep: str,
              trials: int) -> Dict[str, Any]:
    job = job_file(folder, name, args.steps, args.step_seconds, sweep)
    t0 = time.time()
    code, out = subm(["run", str(job), "--backend", args.backend, "--output", "json"], env)
    wall = time.time() - t0
    report = json.loads(out)
    full = final_report(report["app_id"], env)
    return {"wall": wall, "report": report, "full": full, "code": code}


def sweep_figures(result: Dict[str, Any], parallel: int) -> Dict[str, float]:
    trials = result["full"]["sweep"]["trials"]
    busy = sum(t["duration_seconds"] or 0 for t in trials)
    first = min(t["started_at"] for t in trials)
    last = max(t["started_at"] + (t["duration_seconds"] or 0) for t in trials)
    gaps: List[float] = []
    by_container: Dict[str, List[Dict[str, Any]]] = {}
    for t in sorted(trials, key=lambda t: t["started_at"]):
        by_container.setdefault(t["container"], []).append(t)
    for ts in by_container.values():
        for a, b in zip(ts, ts[1:]):
            gaps.append(b["started_at"] - (a["started_at"] + a["duration_seconds"]))
    return {"wall": result["wall"], "containers": len(by_container), "busy_s": busy,
            "busy_of_wall": busy / (parallel * result["wall"]),
            "busy_of_span": busy / (parallel * (last - first)),
            "gap_median": statistics.median(gaps) if gaps else float("nan"),
            "gap_max": max(gaps) if gaps else float("nan"),
            "trial_median": statistics.median(t["duration_seconds"] for t in trials)}


def separate_jobs(folder: Path, env: Dict[str, str], args: argparse.Namespace, at_once: int) -> Dict[str, float]:
    """N jobs of one trial each, ``at_once`` running at a time (each ``subm run``)."""
    xs = [-5 + 10 * i / max(1, args.trials - 1) for i in range(args.trials)]
    jobs = [job_file(folder, f"single-{i}", args.steps, args.step_seconds, None, x) for i, x in enumerate(xs)]
    t0 = time.time()

    def one(job: Path) -> float:
        s = time.time()
        code, out = subm(["run", "-q", str(job), "--backend", args.backend], env)
        if code != 0:
            raise SystemExit(f"{job.name} failed")
        return time.time() - s

    with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
        each = list(pool.map(one, jobs))
    wall = time.time() - t0
    trial = args.steps * args.step_seconds
    return {"wall": wall, "job_median": statistics.median(each),
            "busy_of_wall": args.trials * trial / (min(at_once, args.parallel) * wall)}


def steps_run(trials: List[Dict[str, Any]], steps: int) -> int:
    return sum((t.get("step") or 0) + 1 if t["state"] == "PRUNED" else steps for t in trials)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--step-seconds", type=float, default=0.1)
    ap.add_argument("--es-trials", type=int, default=24)
    ap.add_argument("--backend", default="local")
    ap.add_argument("--skip-separate", action="store_true")
    ap.add_argument("--skip-all-at-once", action="store_true", help="separate jobs only P at a time (a small rig)")
    ap.add_argument("--skip-early-stop", action="store_true")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="subm-bench-sweeps-"))
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args.backend == "local":
        env["SUBM_HOME"] = str(folder / "home")
    log(f"jobs in {folder}")

    sweep = f"""
        metric: val_loss
        algorithm: random
        trials: {args.trials}
        parallel: {args.parallel}
        seed: 1
        params:
          x: {{low: -5.0, high: 5.0}}
        """
    res = run_sweep(folder, env, args, "sweep", sweep, args.trials)
    f = sweep_figures(res, args.parallel)
    print(f"sweep of {args.trials} trials (each {args.steps} x {args.step_seconds:g} s), parallel {args.parallel}, "
          f"{args.backend}: {res['report']['state']}")
    print(f"  wall {f['wall']:.1f} s; {f['containers']} containers; trial median {f['trial_median']:.2f} s")
    print(f"  pool busy: {100 * f['busy_of_wall']:.0f}% of parallel x wall, {100 * f['busy_of_span']:.0f}% of "
          f"parallel x (first trial start .. last trial end)")
    print(f"  gap between trials in one container: median {1000 * f['gap_median']:.0f} ms, "
          f"max {1000 * f['gap_max']:.0f} ms")
    if not args.skip_separate:
        ways = [(args.trials, "all at once"), (args.parallel, f"{args.parallel} at a time")]
        for at_once, what in ways[1:] if args.skip_all_at_once else ways:
            s = separate_jobs(folder / f"separate-{at_once}", env, args, at_once)
            print(f"{args.trials} separate jobs, {what}: wall {s['wall']:.1f} s (job median {s['job_median']:.1f} s); "
                  f"busy {100 * s['busy_of_wall']:.0f}% of {min(at_once, args.parallel)} slots x wall")

    for algorithm in () if args.skip_early_stop else ("random", "tpe"):
        rows = {}
        for label, extra in (("no stopping", ""), ("median stopping", "early_stop: {rule: median, warmup_steps: 2, "
                                                                      "startup_trials: 4}\n")):
            sw = f"""
                metric: val_loss
                algorithm: {algorithm}
                trials: {args.es_trials}
                parallel: {args.parallel}
                seed: 7
                params:
                  x: {{low: -5.0, high: 5.0}}
                """
            sw = textwrap.dedent(sw) + extra
            r = run_sweep(folder / f"es-{algorithm}-{len(rows)}", env, args, f"es-{algorithm}", sw, args.es_trials)
            trials = r["full"]["sweep"]["trials"]
            rows[label] = {"wall": r["wall"], "steps": steps_run(trials, args.steps),
                           "busy": sum(t["duration_seconds"] or 0 for t in trials),
                           "pruned": sum(1 for t in trials if t["state"] == "PRUNED"),
                           "best": r["report"]["best"]["value"] if r["report"].get("best") else None}
        base = rows["no stopping"]
        print(f"early stopping, {algorithm}, {args.es_trials} trials, seed 7 (optimum: val_loss -> {1 / args.steps:g}):")
        for label, row in rows.items():
            print(f"  {label:16s} steps {row['steps']:4d} ({100 * row['steps'] / base['steps']:.0f}%), trial time "
                  f"{row['busy']:.1f} s, wall {row['wall']:.1f} s, pruned {row['pruned']}, best {row['best']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
