#!/usr/bin/env python3
"""The environment that travels: what the first job, the next ones and a code change cost.

On a rig whose nodes share nothing (``RIG_ISOLATED=1 scripts/rig.sh up DIR``), from the
environment that runs this script (a venv; with PyTorch for the DDP example), it runs
``subm run JOB --backend yarn`` and prints, for each run, the wall time from ``subm run`` to
the end, the report's ``gang_ready_seconds``, and what ``subm`` said it packed, uploaded or
reused with the time each took:

1. first: after deleting ``/user/<you>/.subm/environments`` (pack, upload, YARN's first
   localization; a node's cache survives unless the rig is new, so run it on a fresh rig),
   packing it again (``SUBM_PACK_CACHE``, a new folder: no archive kept from an earlier
   submission helps);
2. the next ``--runs`` - 1: everything reused (a node that has not run the job yet still
   localizes the environment once: the AM and the tasks may land on another node);
3. ``--preinstalled CONF_DIR``: as many runs of the same job on a rig whose nodes see this
   environment at its path (a plain rig, or the same one), with ``SUBM_SHIP_ENVIRONMENT=no``:
   the reference the goal compares with.

    source DIR/env.sh && python bench/environment_travel.py --job examples/pytorch-ddp/job.yaml \\
        --set epochs=1 [--preinstalled /tmp/plain-rig/conf]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple


def run(job: str, sets: List[str], env: Dict[str, str]) -> Tuple[float, dict, List[str]]:
    argv = [sys.executable, "-m", "submarine_py.cli", "run", job, "--backend", "yarn", "--output", "json"]
    for s in sets:
        argv += ["--set", s]
    began = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - began
    try:
        report = json.loads(done.stdout)
    except ValueError:
        sys.exit(f"subm run did not report (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    said = [line[len("subm: "):] for line in done.stderr.splitlines()
            if re.match(r"subm: (environment|interpreter|code): ", line)]
    return wall, report, said


def show(name: str, wall: float, report: dict, said: List[str]) -> None:
    ready = (report.get("timings") or {}).get("gang_ready_seconds")
    print(f"{name:<14} {report.get('state'):<10} wall {wall:6.1f} s   gang ready {ready if ready is None else round(ready, 1)} s")
    for line in said:
        print(f"{'':14} {re.sub(r'hdfs://[^ ]*/', '.../', line)}")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--job", default="examples/pytorch-ddp/job.yaml")
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument("--preinstalled", help="HADOOP_CONF_DIR of a rig whose nodes see this environment")
    p.add_argument("--keep", action="store_true", help="do not delete the uploaded parts first")
    p.add_argument("--runs", type=int, default=3, help="jobs with the environment travelling (first included)")
    args = p.parse_args()
    env = dict(os.environ)
    env.pop("SUBM_SHIP_ENVIRONMENT", None)
    if not args.keep:
        from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user

        env["SUBM_PACK_CACHE"] = tempfile.mkdtemp(prefix="subm-bench-packed.")

        subprocess.run(["hdfs", "dfs", "-rm", "-r", "-f", "-skipTrash", f"/user/{yarn_user()}/.subm/environments"],
                       env=env, capture_output=True, timeout=300)
    print(f"environment: {sys.prefix} ({sys.version.split()[0]}); job {args.job} {' '.join(args.sets)}")
    for n in range(args.runs):
        show("first" if n == 0 else f"again {n}", *run(args.job, args.sets, env))
    if args.preinstalled:
        plain = dict(env, HADOOP_CONF_DIR=args.preinstalled, SUBM_SHIP_ENVIRONMENT="no")
        for n in range(args.runs):
            show(f"preinstalled {n + 1}", *run(args.job, args.sets, plain))


if __name__ == "__main__":
    main()
