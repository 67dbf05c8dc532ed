#!/usr/bin/env python3
"""A real TensorFlow MultiWorkerMirroredStrategy job on YARN: where users wait.

1 chief + 2 workers train a small Keras model with ``MultiWorkerMirroredStrategy``
(collective all-reduce over gRPC between the three containers). Every task writes
a timestamp to a shared folder when its first training step is done, and worker 1
raises ``RuntimeError`` after a few steps of attempt 0. Figures (seconds):

* submit -> commands started: ``subm run`` started -> every task's command started (the
  first line of the script, before ``import tensorflow``): what subm and YARN cost;
* submit -> training: ``subm run`` started -> every task finished its first step;
* raise -> client exits: restart policy ``never``: the raise -> ``subm run`` returned;
* raise -> app final: the same, until YARN reports the application FINISHED;
* raise -> training again: restart policy ``gang`` (max_restarts 1): the raise ->
  every task of attempt 1 finished its first step (the gang restart in the same containers);
  raise -> commands started again is subm's share of it (stop with the grace, re-register,
  start), the rest is TensorFlow's start-up (import, strategy, first collective step).

Environments: the preinstalled interpreter (the submitting one, on every node), and
``environment.archive`` (``--archive``: a packed virtualenv with TensorFlow), first with
an empty node cache (first run), then again (the cache holds it). ``--grace`` also runs
the restart with an explicit ``timeouts.stop_grace_seconds`` (e.g. 10, the old fixed grace).

    source /tmp/yarn-rig/env.sh
    python3 bench/tf_multiworker.py [--archive /tmp/tfenv.tar.gz] [--grace 10] [--reps 1]

Tasks and the bench share the folder, so this assumes a single-machine rig (all nodes on
this machine, as scripts/rig.sh's). Applications are tagged ``subm-bench`` and killed
on the way out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from submarine_py.backends.yarn.hadoop.resourcemanager import rm_address  # noqa: E402

RM = rm_address()
STARTED: List[str] = []

TRAIN = """\
import os, pathlib, sys, time

shared, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
role, index, attempt = os.environ["SUBM_ROLE"], int(os.environ["SUBM_INDEX"]), int(os.environ["SUBM_ATTEMPT"])
(shared / f"start-{attempt}-{role}-{index}").write_text(repr(time.time()))
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.zeros((16, 1)))
    b = tf.Variable(0.0)


@tf.function
def train_step(x, y):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
        grads = tape.gradient(loss, [w, b])
        grads = tf.distribute.get_replica_context().all_reduce("mean", grads)  # across the 3 tasks
        w.assign_sub(0.01 * grads[0])
        b.assign_sub(0.01 * grads[1])
        return loss
    return strategy.run(replica_step, args=(x, y))


x = tf.random.uniform((64, 16))
y = tf.reduce_sum(x, axis=1, keepdims=True)
steps = 60 if mode == "ok" or attempt > 0 else 100000
for step in range(steps):
    train_step(x, y)
    if step == 0:
        (shared / f"train-{attempt}-{role}-{index}").write_text(repr(time.time()))
        print(f"{role}:{index} attempt {attempt}: training", flush=True)
    if mode != "ok" and attempt == 0 and (role, index, step) == ("worker", 1, 20):
        (shared / f"raise-{attempt}").write_text(repr(time.time()))
        raise RuntimeError("injected failure")
    time.sleep(0.05)
print(f"{role}:{index} attempt {attempt}: done", flush=True)
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def job_yaml(shared: Path, mode: str, archive: Optional[str], cache: Optional[str],
             grace: Optional[float]) -> str:
    policy = "never" if mode == "raise" else "gang"
    env = f"environment: {{archive: {archive}, cache_dir: {cache}}}" if archive else ""
    grace_line = f"timeouts: {{stop_grace_seconds: {grace}}}" if grace is not None else ""
    role = ("    instances: {n}\n    resources: {{memory: 2 GiB, vcores: 1}}\n"
            f"    command: python train.py {shared} {mode}\n")
    return textwrap.dedent(f"""\
        name: bench-tf-mwms
        framework: tensorflow
        tags: [subm-bench]
        restart: {{policy: {policy}, max_restarts: {0 if policy == 'never' else 1}}}
        {grace_line}
        {env}
        files: {{train.py: train.py}}
        roles:
          chief:
        """) + role.format(n=1) + "  worker:\n" + role.format(n=2)


def stamps(shared: Path, attempt: int, what: str = "train") -> List[float]:
    return [float(p.read_text()) for p in shared.glob(f"{what}-{attempt}-*")]


def app_final_time(app_id: str, timeout: float = 120) -> Optional[float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app = requests.get(f"{RM}/ws/v1/cluster/apps/{app_id}", timeout=10).json()["app"]
        if app["state"] in ("FINISHED", "FAILED", "KILLED"):
            return app["finishedTime"] / 1000.0
        time.sleep(0.1)
    return None


def run(label: str, mode: str, archive: Optional[str] = None, cache: Optional[str] = None,
        grace: Optional[float] = None) -> Dict[str, Optional[float]]:
    with tempfile.TemporaryDirectory(prefix="subm-bench-tf-") as tmp:
        shared = Path(tmp) / "shared"
        shared.mkdir()
        (Path(tmp) / "train.py").write_text(TRAIN)
        (Path(tmp) / "job.yaml").write_text(job_yaml(shared, mode, archive, cache, grace))
        env = dict(os.environ, PYTHONPATH=str(REPO))
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-m", "submarine_py.cli", "run", str(Path(tmp) / "job.yaml"),
                               "--backend", "yarn", "--output", "json", "--quiet"],
                              capture_output=True, text=True, env=env, timeout=900)
        t_exit = time.time()
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            log(f"{label}: no report (rc {proc.returncode}): {proc.stderr[-2000:]}")
            return {}
        app_id = report.get("app_id")
        if app_id:
            STARTED.append(app_id)
        first = stamps(shared, 0)
        started = stamps(shared, 0, "start")
        out: Dict[str, Optional[float]] = {
            "submit -> commands started": max(started) - t0 if len(started) == 3 else None,
            "submit -> training": max(first) - t0 if len(first) == 3 else None}
        raised = shared / "raise-0"
        if raised.exists():
            t_raise = float(raised.read_text())
            if mode == "raise":
                out["raise -> client exits"] = t_exit - t_raise
                final = app_final_time(app_id) if app_id else None
                out["raise -> app final"] = final - t_raise if final else None
            else:
                again, restarted = stamps(shared, 1), stamps(shared, 1, "start")
                out["raise -> commands started again"] = max(restarted) - t_raise if len(restarted) == 3 else None
                out["raise -> training again"] = max(again) - t_raise if len(again) == 3 else None
        log(f"{label}: {report.get('state')} {app_id}; " + ", ".join(
            f"{k} {v:.2f}" for k, v in out.items() if v is not None))
        return out


def median(values: List[Optional[float]]) -> str:
    found = [v for v in values if v is not None]
    return f"{statistics.median(found):.1f}" if found else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", help="a packed virtualenv (.tar.gz/.zip) with TensorFlow")
    parser.add_argument("--grace", type=float, action="append", default=[],
                        help="also run the restart with this timeouts.stop_grace_seconds")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    rows: Dict[str, Dict[str, List[Optional[float]]]] = {}

    def add(row: str, figures: Dict[str, Optional[float]]) -> None:
        for k, v in figures.items():
            rows.setdefault(row, {}).setdefault(k, []).append(v)

    try:
        for rep in range(args.reps):
            log(f"-- repetition {rep + 1}")
            add("preinstalled", run("preinstalled, gang restart", "raise-once"))
            add("preinstalled", run("preinstalled, failure", "raise"))
            for grace in args.grace:
                add(f"preinstalled, stop grace {grace:g} s", run(f"grace {grace:g}", "raise-once", grace=grace))
            if args.archive:
                cache = tempfile.mkdtemp(prefix="subm-bench-envcache-")
                add("archive, first run (empty cache)",
                    run("archive, first run", "raise-once", args.archive, cache))
                add("archive, second run", run("archive, second run", "raise-once", args.archive, cache))
                add("archive, second run", run("archive, failure", "raise", args.archive, cache))
                subprocess.run(["rm", "-rf", cache])
    finally:
        for app_id in STARTED:
            try:
                requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"}, timeout=10)
            except requests.RequestException:
                pass
    columns = ["submit -> commands started", "submit -> training", "raise -> commands started again",
               "raise -> training again", "raise -> client exits", "raise -> app final"]
    print("| run | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for row, figures in rows.items():
        print(f"| {row} | " + " | ".join(median(figures.get(c, [])) for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
