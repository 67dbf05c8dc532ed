#!/usr/bin/env python3
"""Elastic jobs (docs/elastic.md): how soon an elastic job trains with ``min`` tasks while the
rest cannot be placed, and how soon it trains with the bigger world once room comes back.

A PyTorch gloo job (``tests/programs/elastic_allreduce.py``, one all-reduce step every 0.5 s,
checkpointed) with ``instances: {min: MIN, max: MAX}`` is submitted while the GPUs of the
other MAX - MIN tasks are held by someone else; once it trains with MIN, they are given back.
Figures per run, then medians:

* **submit -> training (min)**: ``subm run --detach`` called -> rank 0's ``training world=MIN``
  (the program's own clock, after ``init_process_group``);
* **room back -> asked**: the holder gave the GPUs back -> the AM's "fits: asking for its
  container" (admission asks every 2 s while a task waits);
* **asked -> training (max)**: that decision -> rank 0's ``training world=MAX``: the new
  container starts and registers, the world settles, the gang restarts with the bigger world
  and resumes from its checkpoint (the restart's stop and the program's start included);
* **room back -> training (max)**: the two together.

``timeouts.settle_seconds`` is 2 s, and the room comes back after that has passed since the
world started, so it adds nothing here.

Local backend (default): ``SUBM_LOCAL_GPUS`` stands for MAX GPUs and a ledger entry of this
process holds MAX - MIN of them. YARN (``--backend yarn``, with ``source $RIG_DIR/env.sh``): a
job of MAX - MIN workers of 2 GPUs each holds them on a rig with 2 GPUs a node
(``RIG_NODES=3 RIG_GPUS=2``, MIN 1, MAX 3), and ends to give them back.

    python3 bench/elastic.py [--reps 3] [--min 2 --max 3] [--backend local|yarn]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROGRAM = REPO / "tests" / "programs" / "elastic_allreduce.py"
PYTHON = sys.executable


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def subm(*args: str, env: Dict[str, str], timeout: float = 300) -> str:
    proc = subprocess.run([PYTHON, "-m", "submarine_py.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"subm {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def wait(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError(f"timed out waiting for {what}")


def worlds(path: Path) -> Dict[int, float]:
    """World size -> when (epoch) rank 0 first trained with it."""
    out: Dict[int, float] = {}
    if path.exists():
        for size, at in re.findall(r"training world=(\d+) from step=\d+ at=([\d.]+)", path.read_text()):
            out.setdefault(int(size), float(at))
    return out


def asked_at(events: List[Dict], after: float) -> Optional[float]:
    """When the AM asked for a growth container, after ``after`` (epoch)."""
    for e in events:
        if "fits: asking for its container (growing" in e["message"] and e["time"] >= after:
            return float(e["time"])
    return None


JOB = """\
    name: bench-elastic
    framework: pytorch
    restart: {{policy: gang, max_restarts: 0}}
    timeouts: {{settle_seconds: 2}}
    {shared}
    files:
      elastic_allreduce.py: {program}
    roles:
      worker:
        instances: {{min: {low}, max: {high}}}
        resources: {{memory: 768 MiB, vcores: 1, gpus: {gpus}}}
        env: {{ELASTIC_STEPS: "{steps}", ELASTIC_STEP_SECONDS: "0.5"}}
        command: python3 elastic_allreduce.py
"""

HOLDER = """\
    name: bench-elastic-holder
    roles:
      worker:
        instances: {n}
        resources: {{memory: 256 MiB, vcores: 1, gpus: 2}}
        command: for i in $(seq 6000); do [ -e "{marker}" ] && exit 0; sleep 0.1; done
"""


def run_local(low: int, high: int, work: Path) -> Dict[str, float]:
    from submarine_py.backends.local.gpu_ledger import GpuLedger, ledger_path

    home = work / "home"
    home.mkdir()
    env = dict(os.environ, SUBM_HOME=str(home), SUBM_LOCAL_GPUS=str(high),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    holder = GpuLedger(ledger_path(str(home)), [str(i) for i in range(high)], "bench-holder")
    assert holder.reserve({f"held:{i}": 1 for i in range(high - low)}, time.time() - 60).granted
    job = work / "job.yaml"
    job.write_text(textwrap.dedent(JOB.format(shared="", program=PROGRAM, low=low, high=high, gpus=1, steps=60)))
    submitted = time.time()
    app_id = subm("run", str(job), "--backend", "local", "--detach", env=env).strip()
    said = home / "local" / app_id / "shared" / "elastic-worlds.txt"
    try:
        first = wait(lambda: worlds(said).get(low), 180, f"training with {low}")
        time.sleep(max(0.0, first + 2.5 - time.time()))  # past settle_seconds since the world started
        back = time.time()
        holder.release()
        bigger = wait(lambda: worlds(said).get(high), 180, f"training with {high}")
        report = json.loads((home / "local" / app_id / "report.json").read_text()) \
            if (home / "local" / app_id / "report.json").exists() else None
        events = report["events"] if report else _live_events(app_id, env)
        asked = asked_at(events, back)
    finally:
        subprocess.run([PYTHON, "-m", "submarine_py.cli", "kill", app_id], env=env, capture_output=True, timeout=120)
    return _figures(submitted, first, back, asked, bigger)


def _live_events(app_id: str, env: Dict[str, str]) -> List[Dict]:
    import requests

    url = json.loads(subm("status", app_id, "--output", "json", env=env))["status_url"]
    return requests.get(url + "/v1/status", timeout=10).json()["events"]


def run_yarn(low: int, high: int, work: Path) -> Dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    shared = work / "shared"
    shared.mkdir()
    marker = work / "go"
    holder_job = work / "holder.yaml"
    holder_job.write_text(textwrap.dedent(HOLDER.format(n=high - low, marker=marker)))
    holder = subm("run", str(holder_job), "--backend", "yarn", "--detach", env=env).strip()
    wait(lambda: _running(holder, env) == high - low, 240, "the holder running", interval=0.5)
    job = work / "job.yaml"
    job.write_text(textwrap.dedent(JOB.format(shared=f"shared_dir: {shared}", program=PROGRAM, low=low,
                                              high=high, gpus=2, steps=120)))
    submitted = time.time()
    app_id = subm("run", str(job), "--backend", "yarn", "--detach", env=env).strip()
    try:
        said = shared / app_id / "elastic-worlds.txt"
        first = wait(lambda: worlds(said).get(low), 300, f"training with {low}", interval=0.2)
        time.sleep(max(0.0, first + 2.5 - time.time()))
        back = time.time()
        marker.touch()  # the holder's workers end: YARN takes its containers back
        bigger = wait(lambda: worlds(said).get(high), 300, f"training with {high}", interval=0.2)
        asked = asked_at(_live_events(app_id, env), back)
    finally:
        for app in (app_id, holder):
            subprocess.run([PYTHON, "-m", "submarine_py.cli", "kill", app], env=env, capture_output=True, timeout=120)
    return _figures(submitted, first, back, asked, bigger)


def _running(app_id: str, env: Dict[str, str]) -> int:
    report = json.loads(subm("status", app_id, "--output", "json", env=env))
    return sum(1 for t in report["tasks"] if t["state"] == "RUNNING")


def _figures(submitted: float, first: float, back: float, asked: Optional[float], bigger: float) -> Dict[str, float]:
    out = {"submit -> training (min)": first - submitted, "room back -> training (max)": bigger - back}
    if asked is not None:
        out["room back -> asked"] = asked - back
        out["asked -> training (max)"] = bigger - asked
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--backend", choices=("local", "yarn"), default="local")
    parser.add_argument("--min", type=int, default=None)
    parser.add_argument("--max", type=int, default=None)
    args = parser.parse_args()
    low = args.min or (1 if args.backend == "yarn" else 2)
    high = args.max or 3
    runs: List[Dict[str, float]] = []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="bench-elastic-") as tmp:
            figures = (run_yarn if args.backend == "yarn" else run_local)(low, high, Path(tmp))
        log(f"run {rep + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in figures.items()))
        runs.append(figures)
    print(f"elastic job, {args.backend} backend, instances {{min: {low}, max: {high}}}, {args.reps} run(s): medians")
    for key in ("submit -> training (min)", "room back -> asked", "asked -> training (max)",
                "room back -> training (max)"):
        values = [r[key] for r in runs if key in r]
        if values:
            print(f"  {key:<30} {statistics.median(values):6.2f} s   (runs: {', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
