#!/usr/bin/env python3
"""Memory of ``subm logs`` for a big task log, on YARN and locally.

A job's one task prints ``--mb`` MiB (default 200) to stdout and exits. Then, for the
finished job, ``subm logs APP --role worker`` runs as its own process with stdout to a
file; the figures are its peak RSS (``ru_maxrss`` of the child) and wall time, and a
check that every byte arrived. ``--follow`` on YARN is measured too while the task is
still printing: what the NodeManager sent (bytes read from its REST API, counted by a
wrapper around ``requests``) against the log's final size.

    source /tmp/yarn-rig/env.sh && python3 bench/logs_memory.py [--mb 200] [--backend yarn|local|both]

``SUBM_BENCH_CODE=/path/to/another/checkout`` measures that code instead (a baseline).

It kills what it submitted on the way out.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parent.parent
#: The submarine_py measured: this checkout, or another (SUBM_BENCH_CODE=/path/to/checkout: a baseline).
CODE = os.environ.get("SUBM_BENCH_CODE") or str(REPO)
ENV = dict(os.environ, PYTHONPATH=CODE + (os.pathsep + os.environ["PYTHONPATH"]
                                         if os.environ.get("PYTHONPATH") else ""))
STARTED: List[Tuple[str, str]] = []

#: Counts the bytes ``requests`` reads for ``subm logs`` (a wrapper around the CLI).
COUNTING_CLI = textwrap.dedent("""
    import atexit, sys, requests.models
    total = [0]
    orig = requests.models.Response.iter_content
    def iter_content(self, *a, **kw):
        for piece in orig(self, *a, **kw):
            total[0] += len(piece)
            yield piece
    requests.models.Response.iter_content = iter_content
    atexit.register(lambda: sys.stderr.write("BYTES_READ %d\\n" % total[0]))
    from submarine_py.cli import main
    sys.argv = ["subm"] + sys.argv[1:]
    main()
""")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def subm(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "submarine_py.cli", *args], env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def job_file(directory: Path, mb: int, seconds: float) -> Path:
    """A task that prints ``mb`` MiB of numbered lines over about ``seconds``."""
    (directory / "spew.py").write_text(textwrap.dedent(f"""
        import sys, time
        line = "x" * 1000
        n = {mb} * 1024 * 1024 // 1024
        pause = {seconds} / max(1, n // 1000)
        for i in range(n):
            sys.stdout.write("%022d " % i + line + "\\n")
            if i % 1000 == 999:
                time.sleep(pause)
        sys.stdout.flush()
    """))
    job = directory / "job.yaml"
    job.write_text(textwrap.dedent("""
        name: logs-bench
        tags: [subm-bench]
        roles:
          worker:
            resources: {memory: 512 MiB}
            command: python spew.py
        files: {spew.py: spew.py}
    """))
    return job


def measure_logs(app_id: str, out_path: Path, *extra: str) -> Tuple[int, float, int]:
    """Peak RSS (KiB), wall seconds and bytes read from the network of one ``subm logs`` process."""
    start = time.monotonic()
    err_path = out_path.with_suffix(".err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", COUNTING_CLI, "logs", app_id, "--role", "worker", *extra],
                                env=ENV, stdout=out, stderr=err, cwd=out_path.parent)  # not '' = this checkout
        _, _, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = 0
    wall = time.monotonic() - start
    text = err_path.read_text(errors="replace")
    read = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("BYTES_READ")), -1)
    return usage.ru_maxrss, wall, read


def logged_bytes(path: Path) -> Tuple[int, int]:
    """Lines of the task's own output in a ``subm logs`` copy, and the highest line number."""
    lines, last = 0, -1
    with open(path, "rb") as f:
        for line in f:
            head = line[:22]
            if len(line) == 1024 and head.isdigit():
                lines += 1
                last = max(last, int(head))
    return lines, last


def run_backend(backend: str, mb: int, directory: Path) -> None:
    expected = mb * 1024
    (directory / backend).mkdir()
    job = job_file(directory / backend, mb, seconds=0)
    log(f"[{backend}] running a task that prints {mb} MiB")
    res = subm("run", str(job), "--backend", backend, "--detach", "--output", "json")
    app_id = json.loads(res.stdout)["app_id"] if res.returncode == 0 else None
    if not app_id:
        raise SystemExit(f"submission failed: {res.stdout}{res.stderr}")
    STARTED.append((backend, app_id))
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        st = json.loads(subm("status", app_id, "--output", "json").stdout or "{}")
        if st.get("state") in ("SUCCEEDED", "FAILED", "KILLED"):
            time.sleep(3)  # the AM's verdict comes a moment before YARN's
            break
        time.sleep(2)
    log(f"[{backend}] {app_id} {st.get('state')}; subm logs --role worker")
    out = directory / f"{backend}.out"
    peak, wall, read = measure_logs(app_id, out)
    lines, last = logged_bytes(out)
    print(f"{backend:6} subm logs, {mb} MiB log: peak RSS {peak / 1024:.1f} MiB, {wall:.1f} s, "
          f"{read / 2**20:.1f} MiB read from the network, {lines}/{expected} lines (last {last})", flush=True)


def run_follow(mb: int, seconds: float, directory: Path) -> None:
    (directory / "follow").mkdir()
    job = job_file(directory / "follow", mb, seconds=seconds)
    log(f"[yarn] --follow while a task prints {mb} MiB over ~{seconds:.0f} s")
    res = subm("run", str(job), "--backend", "yarn", "--detach", "--output", "json")
    app_id = json.loads(res.stdout)["app_id"]
    STARTED.append(("yarn", app_id))
    out = directory / "follow.out"
    peak, wall, read = measure_logs(app_id, out, "--follow")
    lines, last = logged_bytes(out)
    print(f"yarn   subm logs --follow, {mb} MiB written over ~{seconds:.0f} s: peak RSS {peak / 1024:.1f} MiB, "
          f"{wall:.1f} s, {read / 2**20:.1f} MiB read from the network, {lines}/{mb * 1024} lines (last {last})",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--backend", choices=("yarn", "local", "both"), default="both")
    ap.add_argument("--follow-mb", type=int, default=50)
    ap.add_argument("--follow-seconds", type=float, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="subm-logs-bench-") as tmp:
        try:
            for backend in (("local", "yarn") if args.backend == "both" else (args.backend,)):
                run_backend(backend, args.mb, Path(tmp))
            if args.backend in ("yarn", "both") and args.follow_mb:
                run_follow(args.follow_mb, args.follow_seconds, Path(tmp))
        finally:
            for backend, app_id in STARTED:
                subm("kill", app_id, timeout=120)


if __name__ == "__main__":
    main()
