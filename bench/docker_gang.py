#!/usr/bin/env python3
"""Gang start-up in Docker images against plain containers, on the same YARN (the Docker-mode
rig: NodeManagers with the LinuxContainerExecutor, configured by `subm hadoop-conf`).

For N workers (default 4 and 15) and R repetitions, interleaved, it runs one subm job whose
workers run in the rig's image (localhost/subm-test:bookworm, python3 only) and the same job in
plain containers (the LinuxContainerExecutor's, as the same user), both submitted as the rig's
user; workers exit at once. Per job it takes from the report

* gang ready: submission to every task registered (``timings.gang_ready_seconds``);
* after the AM: from the AM's start (the report's ``started_at``) to gang ready: the AM's own
  start, which is the same for both (the AM never runs in an image), left out;

and prints the medians and Docker's extra seconds.

    RIG_DOCKER=1 bash scripts/rig.sh up /tmp/dock-rig
    SUBM_DOCKER_RIG=/tmp/dock-rig python3 bench/docker_gang.py [--reps 3] [--sizes 4,15]
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import requests

REPO = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Rig:
    def __init__(self, folder: str):
        self.facts = json.loads((Path(folder) / "docker-rig.json").read_text())
        self.dir = Path(folder)
        self.user = self.facts["user"]
        sys.path.insert(0, str(REPO))
        from submarine_py.backends.yarn.hadoop.resourcemanager import rm_address

        self.rm = rm_address(self.facts["conf_dir"])
        self.home = self.dir / f"skein-{self.user}" / "bench-home"
        self.jobs = self.dir / "jobs"
        pw = pwd.getpwnam(self.user)
        for d in (self.home, self.jobs):
            d.mkdir(parents=True, exist_ok=True)
            os.chown(d, pw.pw_uid, pw.pw_gid)

    def get(self, path: str) -> dict:
        return requests.get(self.rm + path, params={"user.name": "bench"}, timeout=10).json()

    def idle(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nodes = (self.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
            if all(n.get("usedMemoryMB", 0) == 0 for n in nodes):
                return
            time.sleep(0.3)
        log("warning: the cluster is not idle")

    def run(self, job: Path) -> dict:
        f = self.facts
        skein = self.dir / f"skein-{self.user}"
        env = {"HOME": pwd.getpwnam(self.user).pw_dir, "USER": self.user, "LANG": "C.UTF-8",
               "PATH": f"{f['hadoop_home']}/bin:{f['java_home']}/bin:/usr/bin:/bin",
               "HADOOP_CONF_DIR": f["conf_dir"], "JAVA_HOME": f["java_home"], "SKEIN_CONFIG": str(skein),
               "SUBM_SKEIN_HOME": str(skein / "drivers"), "SUBM_HOME": str(self.home), "PYTHONPATH": str(REPO)}
        argv = ["runuser", "-u", self.user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                f["python"], "-m", "submarine_py.cli", "run", str(job), "--backend", "yarn", "--output", "json"]
        proc = subprocess.run(argv, cwd=job.parent, capture_output=True, text=True, timeout=600)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            raise SystemExit(f"subm run failed ({proc.returncode}): {proc.stderr[-2000:]}")

    def job(self, n: int, docker: bool) -> Path:
        folder = Path(tempfile.mkdtemp(prefix="bench-", dir=self.jobs))
        folder.chmod(0o755)
        image = f"docker: {{image: {self.facts['image']}}}\n" if docker else ""
        (folder / "job.yaml").write_text(
            f"name: gang-{'docker' if docker else 'plain'}-{n}\n{image}"
            f"timeouts: {{gang_seconds: 300}}\n"
            f"roles:\n  worker:\n    instances: {n}\n    resources: {{memory: 256 MiB, vcores: 1}}\n"
            f"    command: 'true'\n")
        return folder / "job.yaml"

    def am_started(self, app_id: str) -> Optional[float]:
        """Seconds from submission to the AM's start, from its report file (in its log folder)."""
        for path in self.dir.glob(f"**/nm-logs/{app_id}/container_*_01_000001/subm-report.json"):
            saved = json.loads(path.read_text())
            if saved.get("started_at") and saved.get("submitted_at"):
                return saved["started_at"] - saved["submitted_at"]
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="4,15")
    args = ap.parse_args()
    folder = os.environ.get("SUBM_DOCKER_RIG")
    if not folder:
        raise SystemExit("set SUBM_DOCKER_RIG to the folder of `RIG_DOCKER=1 scripts/rig.sh up DIR`")
    rig = Rig(folder)
    results: Dict[tuple, List[Dict[str, float]]] = {}
    for n in [int(s) for s in args.sizes.split(",")]:
        for rep in range(args.reps):
            for docker in (False, True):
                rig.idle()
                report = rig.run(rig.job(n, docker))
                if report.get("state") != "SUCCEEDED":
                    raise SystemExit(f"{report.get('app_id')}: {report.get('state')}: {report.get('diagnostics')}")
                t = report.get("timings") or {}
                ready = t.get("gang_ready_seconds")
                am_up = rig.am_started(report["app_id"])
                row = {"ready": ready, "after_am": ready - am_up if ready is not None and am_up is not None else None}
                results.setdefault((n, docker), []).append(row)
                log(f"{n:2d} workers, {'docker' if docker else 'plain '}, rep {rep + 1}: gang ready {ready:.2f} s"
                    + (f", {row['after_am']:.2f} s after the AM started" if row["after_am"] is not None else ""))
    print(f"{'workers':>7}  {'plain':>8}  {'docker':>8}  {'extra':>6}  {'plain*':>7}  {'docker*':>7}  {'extra*':>6}")
    for n in sorted({k[0] for k in results}):
        med = {}
        for docker in (False, True):
            rows = results[(n, docker)]
            med[docker] = (statistics.median(r["ready"] for r in rows),
                           statistics.median(r["after_am"] for r in rows if r["after_am"] is not None))
        print(f"{n:>7}  {med[False][0]:8.2f}  {med[True][0]:8.2f}  {med[True][0] - med[False][0]:+6.2f}  "
              f"{med[False][1]:7.2f}  {med[True][1]:7.2f}  {med[True][1] - med[False][1]:+6.2f}")
    print("(seconds, medians of %d; * = from the AM's start to gang ready)" % args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
