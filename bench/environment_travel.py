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

4. ``--upgrade PKG==VERSION``: after those, ``pip install`` it into this environment and one
   more run: what a small upgrade ships (a delta layer above the rest, and the venv's own small
   archive); the version before is put back afterwards.

Beside them, in the same run, the physical floor for the same bytes (``--floor``): ``tar`` of the
venv through ``gzip -1`` and through ``zstd -1`` (the compressors at equal input), an
uncompressed ``tar``; ``hdfs dfs -put`` of the gzip archive; and, as a node does it, ``hdfs dfs
-get`` then ``tar -xzf`` (on this machine: the rig's nodes run here).

    source DIR/env.sh && python bench/environment_travel.py --job examples/pytorch-ddp/job.yaml \\
        --set epochs=1 --floor [--upgrade idna==3.7] [--preinstalled /tmp/plain-rig/conf]
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
            if re.match(r"subm: environment: (packed|uploaded|\d+ of)", line)]
    said += [f"shipping: {m['what']} {m['bytes'] / 1e6:.1f} MB in {m['seconds']} s ({m['mb_per_s']} MB/s), "
             f"{m['parts']} archive(s)" for m in (report.get("timings") or {}).get("shipping", [])]
    return wall, report, said


def show(name: str, wall: float, report: dict, said: List[str]) -> None:
    ready = (report.get("timings") or {}).get("gang_ready_seconds")
    print(f"{name:<14} {report.get('state'):<10} wall {wall:6.1f} s   gang ready {ready if ready is None else round(ready, 1)} s")
    for line in said:
        print(f"{'':14} {re.sub(r'hdfs://[^ ]*/', '.../', line)}")
    sys.stdout.flush()


def timed(argv: List[str], env: Dict[str, str], shell: bool = False) -> float:
    began = time.monotonic()
    done = subprocess.run(argv if not shell else " ".join(argv), env=env, shell=shell, capture_output=True,
                          timeout=3600)
    if done.returncode:
        sys.exit(f"{argv}: exit {done.returncode}: {done.stderr[-2000:]!r}")
    return time.monotonic() - began


def floor(env: Dict[str, str]) -> None:
    """The floor for this venv's bytes: pack, put, get and unpack with the plain tools."""
    import shutil

    from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user

    work = tempfile.mkdtemp(prefix="subm-bench-floor.")
    try:
        raw = sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(sys.prefix) for f in fs)
        print(f"floor          the venv: {raw / 1e9:.2f} GB")
        for name, cmd in (("tar", f"tar -cf - -C {sys.prefix} . > {work}/v.tar"),
                          ("tar | gzip -1", f"tar -cf - -C {sys.prefix} . | gzip -1 > {work}/v.tar.gz"),
                          ("tar | zstd -1", f"tar -cf - -C {sys.prefix} . | zstd -1 -T0 -q > {work}/v.tar.zst")):
            if "zstd" in cmd and shutil.which("zstd") is None:
                continue
            took = timed([cmd], env, shell=True)
            out = os.path.getsize(f"{work}/" + {"tar": "v.tar", "tar | gzip -1": "v.tar.gz",
                                                "tar | zstd -1": "v.tar.zst"}[name])
            print(f"floor          {name:<14} {took:6.1f} s  {out / 1e9:.2f} GB  ({raw / 1e6 / took:.0f} MB/s in)")
        target = f"/user/{yarn_user()}/subm-bench-floor.tar.gz"
        timed(["hdfs", "dfs", "-mkdir", "-p", f"/user/{yarn_user()}"], env)
        took = timed(["hdfs", "dfs", "-put", "-f", f"{work}/v.tar.gz", target], env)
        size = os.path.getsize(f"{work}/v.tar.gz")
        print(f"floor          hdfs dfs -put  {took:6.1f} s  ({size / 1e6 / took:.0f} MB/s)")
        os.remove(f"{work}/v.tar.gz")
        got = timed(["hdfs", "dfs", "-get", target, f"{work}/got.tar.gz"], env)
        os.makedirs(f"{work}/x")
        unpack = timed(["tar", "-xzf", f"{work}/got.tar.gz", "-C", f"{work}/x"], env)
        print(f"floor          hdfs dfs -get  {got:6.1f} s, then tar -xzf {unpack:.1f} s: a node's {got + unpack:.1f} s")
        subprocess.run(["hdfs", "dfs", "-rm", "-f", "-skipTrash", target], env=env, capture_output=True, timeout=300)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--job", default="examples/pytorch-ddp/job.yaml")
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument("--preinstalled", help="HADOOP_CONF_DIR of a rig whose nodes see this environment")
    p.add_argument("--keep", action="store_true", help="do not delete the uploaded parts first")
    p.add_argument("--runs", type=int, default=3, help="jobs with the environment travelling (first included)")
    p.add_argument("--floor", action="store_true", help="also time the plain tools on the same bytes")
    p.add_argument("--upgrade", help="PKG==VERSION to install for one more run (put back afterwards)")
    args = p.parse_args()
    env = dict(os.environ)
    env.pop("SUBM_SHIP_ENVIRONMENT", None)
    if not args.keep:
        from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user

        env["SUBM_PACK_CACHE"] = tempfile.mkdtemp(prefix="subm-bench-packed.")

        subprocess.run(["hdfs", "dfs", "-rm", "-r", "-f", "-skipTrash", f"/user/{yarn_user()}/.subm/environments"],
                       env=env, capture_output=True, timeout=300)
    print(f"environment: {sys.prefix} ({sys.version.split()[0]}); job {args.job} {' '.join(args.sets)}")
    if args.floor:
        floor(env)
    for n in range(args.runs):
        show("first" if n == 0 else f"again {n}", *run(args.job, args.sets, env))
    if args.upgrade:
        import importlib.metadata

        name = args.upgrade.split("==")[0]
        before = importlib.metadata.version(name)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
        subprocess.run(pip + [args.upgrade], check=True, timeout=600)
        try:
            show(f"upgraded {name}", *run(args.job, args.sets, env))
        finally:
            subprocess.run(pip + [f"{name}=={before}"], check=True, timeout=600)
    if args.preinstalled:
        plain = dict(env, HADOOP_CONF_DIR=args.preinstalled, SUBM_SHIP_ENVIRONMENT="no")
        for n in range(args.runs):
            show(f"preinstalled {n + 1}", *run(args.job, args.sets, plain))


if __name__ == "__main__":
    main()
