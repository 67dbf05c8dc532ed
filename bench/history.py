#!/usr/bin/env python3
"""The job history's cost: writing one job, and listing/filtering N jobs (one Parquet file each).

For N in (default) 100, 1000: writes N finished jobs of 4 tasks each (with GPU summaries) to
a fresh local history, then times ``History.add`` per job, ``held()`` (the listing the
collector does before adding), ``rows()`` (everything), ``rows(state=..., since=...)``
(pushed-down filters) and ``rows(name='glob-*')``. Prints medians of R repetitions.

    python3 bench/history.py [--sizes 100,1000] [--reps 3]
"""
from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from submarine_py.history import History, record_of  # noqa: E402
from submarine_py.report import JobReport  # noqa: E402


def job(i: int, base: float) -> JobReport:
    gpu = {"devices": ["0"], "samples": 100, "mean_utilization": 50.0 + i % 40, "peak_utilization": 99,
           "peak_memory_mb": 9000, "memory_total_mb": 16000, "idle_seconds": 0.0, "idle": False}
    return JobReport.from_dict({
        "app_id": f"application_1_{i:05d}", "name": f"{'mnist' if i % 2 else 'bert'}-{i % 10}",
        "state": ("SUCCEEDED", "FAILED", "KILLED")[i % 3], "backend": "yarn", "user": "ann", "queue": "default",
        "framework": "pytorch", "attempts": 1, "submitted_at": base + 60 * i, "started_at": base + 60 * i + 5,
        "finished_at": base + 60 * i + 50, "timings": {"gang_ready_seconds": 12.0, "total_seconds": 50.0},
        "tasks": [{"role": "worker", "index": k, "state": "SUCCEEDED", "exit_code": 0, "host": f"n{k}",
                   "gpu": gpu} for k in range(4)],
        "spec": {"name": "x", "roles": {"worker": {"instances": 4, "command": "python train.py"}}},
        "final": True})


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    base = time.time() - 86400 * 30
    print(f"{'jobs':>6} {'add/job ms':>10} {'held ms':>8} {'all ms':>8} {'state+since ms':>15} {'glob ms':>8} "
          f"{'rows':>5}")
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            h = History(tmp)
            held: set = set()
            adds = [timed(lambda i=i: h.add(record_of(job(i, base)), held)) for i in range(n)]
            since = dt.datetime.fromtimestamp(base + 60 * (n // 2), dt.timezone.utc)
            for layout in ("one file per job", "compacted"):
                if layout == "compacted":
                    took = timed(lambda: h.compact(at_least=1))
                    print(f"{'':>6} compacting {n} files took {took * 1000:.0f} ms")
                figures = {"held": [], "all": [], "filtered": [], "glob": []}
                for _ in range(args.reps):
                    figures["held"].append(timed(h.held))
                    figures["all"].append(timed(h.rows))
                    figures["filtered"].append(timed(lambda: h.rows(state="FAILED", since=since)))
                    figures["glob"].append(timed(lambda: h.rows(name="mnist-*")))
                med = {k: statistics.median(v) * 1000 for k, v in figures.items()}
                print(f"{n:>6} {statistics.median(adds) * 1000:>10.2f} {med['held']:>8.1f} {med['all']:>8.1f} "
                      f"{med['filtered']:>15.1f} {med['glob']:>8.1f} {len(h.rows()):>5}  {layout}")


if __name__ == "__main__":
    main()
