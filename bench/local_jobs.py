#!/usr/bin/env python3
"""How long a local job takes to restart after a failed process, and to get GPUs another job
gave back, each beside a floor or a peer measured in the same run. No YARN: the local backend.

The tests say what happens (tests/test_a_task_of_several_processes_is_one_task.py,
tests/test_local_jobs_take_turns_on_the_machines_gpus.py); this says how long it takes.
Seconds, medians of ``--reps``:

* **a failed local rank** (2 workers of 2 processes each, ``restart: gang``; local rank 1 of
  worker 0 raises once all four processes run, the others run until stopped; each process
  writes the time of its start, of its SIGTERM and of its failure to the job's shared folder):
  - failure -> the last of the other three has its SIGTERM (its handler ran). Floor: a bare
    ``kill``: this process sends SIGTERM to a Python process with the same handler, until the
    handler has written its time;
  - failure -> the last of attempt 2's four processes started. Floor: a new Python process
    reaching its first line (``python -c`` printing ``time.time()``, from ``Popen``);
  - ``subm run`` of that job, start to exit. Peer: ``subm run`` of the same job where nothing
    fails (one attempt).
* **GPUs handed over** (``SUBM_LOCAL_GPUS=0,1``; job A, 2 tasks of 1 GPU each, holds both
  GPUs for ``--hold`` seconds; job B, the same shape, is submitted meanwhile and queues):
  - A's ``queued_seconds`` (its gang fits at once: admission through the machine's GPU
    ledger). Peer: ``queued_seconds`` of the same job asking for no GPU (no ledger);
  - hand-over: A's last task ends -> B's first task starts (B's AM, queued, asks again every
    ``ADMIT_EVERY_SECONDS``, printed beside). Peer: A's own ``subm run --detach`` started ->
    its first task starts (a job started afresh on free GPUs).

    python3 bench/local_jobs.py [--reps 3] [--hold 3]

Every job runs in a ``SUBM_HOME`` of its own and is killed on the way out. The figures are
comparable only within one run (docs/benchmarks.md, "local_jobs.py", keeps them).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from submarine_py.am.allocation import ADMIT_EVERY_SECONDS  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt(seconds: float, sign: str = "") -> str:
    return f"{seconds:{sign}.4f}" if abs(seconds) < 0.1 else f"{seconds:{sign}.3f}"


def row(figure: str, seconds: float, floor_name: str, floor: float) -> None:
    print(f"| {figure} | {fmt(seconds)} | {floor_name} | {fmt(floor)} | {fmt(seconds - floor, '+')} |", flush=True)


class Subm:
    """``subm`` as a new process, in a SUBM_HOME of its own; remembers the jobs to kill."""

    def __init__(self, home: Path) -> None:
        self.env = dict(os.environ, SUBM_HOME=str(home),
                        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        self.jobs: List[Tuple[str, Dict[str, str]]] = []

    def __call__(self, *args: str, env: Optional[Dict[str, str]] = None, expect: int = 0) -> str:
        proc = subprocess.run([sys.executable, "-m", "submarine_py.cli", *args], env=dict(self.env, **(env or {})),
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != expect:
            raise SystemExit(f"subm {' '.join(args)}: exit {proc.returncode}, expected {expect}\n{proc.stderr[-2000:]}")
        return proc.stdout

    def detach(self, job: Path, env: Optional[Dict[str, str]] = None) -> str:
        app_id = json.loads(self("run", str(job), "--backend", "local", "--detach", "--output", "json",
                                 env=env))["app_id"]
        self.jobs.append((app_id, env or {}))
        return app_id

    def wait(self, app_id: str, env: Optional[Dict[str, str]] = None) -> dict:
        return json.loads(self("wait", app_id, "--output", "json", env=env))

    def kill_all(self) -> None:
        for app_id, env in self.jobs:
            subprocess.run([sys.executable, "-m", "submarine_py.cli", "kill", app_id], env=dict(self.env, **env),
                           capture_output=True, timeout=120)


# -- a failed local rank -------------------------------------------------------------------

FAILS_ONCE_JOB = """\
    name: bench-fails-once
    framework: pytorch
    restart: {policy: gang, max_restarts: 1}
    roles:
      worker:
        instances: 2
        processes: 2
        resources: {memory: 256 MiB}
        command: python fails_once.py
        env: {FAIL: "{{ fail }}"}
    files: {fails_once.py: fails_once.py}
"""

#: Marks: started-, stopped- (its SIGTERM), failing- + INDEX-LOCAL_RANK-ATTEMPT, holding time.time().
FAILS_ONCE = """\
import os, pathlib, signal, sys, time

local, index, attempt = os.environ["LOCAL_RANK"], os.environ["SUBM_INDEX"], int(os.environ["SUBM_ATTEMPT"])
shared = pathlib.Path(os.environ["SUBM_SHARED_DIR"])

def mark(what):
    (shared / f"{what}-{index}-{local}-{attempt}").write_text(repr(time.time()))

def on_term(signum, frame):
    mark("stopped")
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)
mark("started")
if attempt > 0 or os.environ["FAIL"] == "0":
    sys.exit(0)
if (index, local) == ("0", "1"):
    while len(list(shared.glob("started-*-0"))) < 4:
        time.sleep(0.02)
    mark("failing")
    raise ValueError("loss is nan in local rank 1")
while True:
    time.sleep(0.05)
"""

#: The floor of a stop: the same handler, in a process this bench signals itself.
STOPPED_BY_HAND = """\
import pathlib, signal, sys, time
mark = pathlib.Path(sys.argv[1])

def on_term(signum, frame):
    mark.write_text(repr(time.time()))
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def marks(shared: Path, pattern: str) -> List[float]:
    return [float(p.read_text()) for p in shared.glob(pattern)]


def bare_kill(folder: Path) -> float:
    mark = folder / "stopped-by-hand"
    mark.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_BY_HAND, str(mark)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return float(mark.read_text()) - sent


def python_reaches_its_first_line() -> float:
    started = time.time()
    out = subprocess.run([sys.executable, "-c", "import time; print(repr(time.time()))"], capture_output=True,
                         text=True, check=True).stdout
    return float(out) - started


def bench_failed_local_rank(reps: int, folder: Path, subm: Subm) -> None:
    job_dir = folder / "fails-once"
    job_dir.mkdir()
    (job_dir / "fails_once.py").write_text(FAILS_ONCE)
    job = job_dir / "job.yaml"
    job.write_text(textwrap.dedent(FAILS_ONCE_JOB))
    home = Path(subm.env["SUBM_HOME"])
    stopped, restarted, failing_run, clean_run = [], [], [], []
    for rep in range(reps):
        log(f"  repetition {rep + 1} of {reps}")
        for fail, runs in (("1", failing_run), ("0", clean_run)):
            started = time.perf_counter()
            report = json.loads(subm("run", str(job), "--backend", "local", "--set", f"fail={fail}",
                                     "--output", "json"))
            runs.append(time.perf_counter() - started)
            assert report["state"] == "SUCCEEDED" and report["attempts"] == (2 if fail == "1" else 1), report
            if fail == "1":
                shared = home / "local" / report["app_id"] / "shared"
                [failed] = marks(shared, "failing-*")
                stopped.append(max(marks(shared, "stopped-*-0")) - failed)
                restarted.append(max(marks(shared, "started-*-1")) - failed)
    kill_floor = statistics.median(bare_kill(folder) for _ in range(max(reps, 5)))
    start_floor = statistics.median(python_reaches_its_first_line() for _ in range(max(reps, 5)))
    row("a local rank fails -> the last other process has its SIGTERM", statistics.median(stopped),
        "a bare `kill` -> its handler", kill_floor)
    row("a local rank fails -> the last of attempt 2's processes started", statistics.median(restarted),
        "a new `python` -> its first line", start_floor)
    row("`subm run`, one failure, gang restart", statistics.median(failing_run),
        "`subm run`, the same job, no failure", statistics.median(clean_run))


# -- GPUs handed over ------------------------------------------------------------------------

GPU_JOB = """\
    name: bench-{name}
    roles:
      worker:
        instances: 2
        resources: {{memory: 128 MiB, gpus: {gpus}}}
        command: echo "start=$(date +%s.%N)"; sleep {sleep}; echo "end=$(date +%s.%N)"
"""
GPUS = {"SUBM_LOCAL_GPUS": "0,1"}


def gpu_job(folder: Path, name: str, gpus: int, sleep: float) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(GPU_JOB.format(name=name, gpus=gpus, sleep=sleep)))
    return path


def said(report: dict, key: str) -> List[float]:
    """Each task's ``key=`` time, from its stdout."""
    found = []
    for task in report["tasks"]:
        for line in Path(task["log"]).read_text().splitlines():
            if line.startswith(key + "="):
                found.append(float(line.split("=", 1)[1]))
    return found


def holding_both(subm: Subm, app_id: str) -> bool:
    tasks = json.loads(subm("status", app_id, "--output", "json", env=GPUS))["tasks"]
    return [t["state"] for t in tasks] == ["RUNNING", "RUNNING"]


def bench_gpu_hand_over(reps: int, folder: Path, subm: Subm, hold: float) -> None:
    first, second = gpu_job(folder, "holds", 1, hold), gpu_job(folder, "queues", 1, 0.5)
    without = gpu_job(folder, "no-gpu", 0, 0.5)
    queued_a, queued_none, hand_over, fresh = [], [], [], []
    for rep in range(reps):
        log(f"  repetition {rep + 1} of {reps}")
        submitted = time.time()
        a = subm.detach(first, env=GPUS)
        deadline = time.monotonic() + 120
        while not holding_both(subm, a):
            if time.monotonic() > deadline:
                raise SystemExit(f"{a} did not start its two tasks within 120 s")
            time.sleep(0.1)
        b = subm.detach(second, env=GPUS)
        report_a, report_b = subm.wait(a, env=GPUS), subm.wait(b, env=GPUS)
        assert report_b["timings"].get("queued_seconds"), f"{b} did not queue: raise --hold"
        queued_a.append(report_a["timings"].get("queued_seconds") or 0.0)
        hand_over.append(min(said(report_b, "start")) - max(said(report_a, "end")))
        fresh.append(min(said(report_a, "start")) - submitted)
        c = subm.detach(without, env=GPUS)
        queued_none.append(subm.wait(c, env=GPUS)["timings"].get("queued_seconds") or 0.0)
    row("a gang that fits at once: `queued_seconds`, 2 GPUs (the ledger)", statistics.median(queued_a),
        "the same, no GPU (no ledger)", statistics.median(queued_none))
    row("GPUs handed over: A's last task ends -> queued B's first task starts", statistics.median(hand_over),
        "A's `subm run --detach` -> its first task starts", statistics.median(fresh))
    print(f"# a queued gang asks again every ADMIT_EVERY_SECONDS = {ADMIT_EVERY_SECONDS:g} s", flush=True)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hold", type=float, default=3.0, help="seconds job A holds both GPUs")
    args = parser.parse_args(argv or None)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, medians of {args.reps}, seconds", flush=True)
    print("| figure | seconds | floor or peer | seconds | difference |\n|---|---:|---|---:|---:|", flush=True)
    with tempfile.TemporaryDirectory(prefix="subm-local-jobs-") as tmp:
        folder = Path(tmp)
        subm = Subm(folder / "subm-home")
        try:
            log("a failed local rank ...")
            bench_failed_local_rank(args.reps, folder, subm)
            log("GPUs handed over ...")
            bench_gpu_hand_over(args.reps, folder, subm, args.hold)
        finally:
            subm.kill_all()
    print(f"# load average after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
