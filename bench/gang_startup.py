#!/usr/bin/env python3
"""Gang start-up on YARN: a subm job against a plain skein application, same run, interleaved.

For N single-vcore workers (default 1, 4, 8, 15) and R repetitions, it measures

* subm:  ``subm run job.yaml --backend yarn`` (workers exit at once); the figure is
  the report's ``timings.gang_ready_seconds``: submission to every task registered
  and the cluster spec published;
* skein: a plain skein application whose service declares the same N containers
  with node hints and relaxed locality, and no AM logic (no master script): submit
  to all N containers RUNNING (polling ``get_containers()`` every 0.1 s), and to
  all N processes started (each writes ``date +%s.%N`` to a shared directory:
  single-node clusters only, else reported as n/a);
* the submission's share of each: the submitting call (subm: the AM report's ``submitted_at``,
  taken as the backend starts to submit) -> the RM's record of the application
  (``startedTime``), and each figure after that moment, per repetition (the submission's
  noise left out);

then the time from a task's failure to the gang running again (worker 0 exits 1 at
SUBM_ATTEMPT 0 after 3 s; or it kills its executor, so its container is lost and replaced):
worker 0's exit -> the AM's "failed with" log line -> its "gang ready ... (attempt 2)"
line (attempts as people read them count from 1), and worker 0's exit -> the last worker's
SUBM_ATTEMPT=1 command started; for reference,
skein's own restart of a failed container (``max_restarts``): exit -> replacement's process
started; the wall time of ``subm status APP`` and of ``import skein``. It prints medians.

    source /tmp/yarn-rig/env.sh && python3 bench/gang_startup.py [--reps 3] [--sizes 1,4,8,15]

It waits for the cluster to be idle before each measurement, kills every application
it started (also on Ctrl-C), and stops skein's global driver if it started it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
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
from submarine_py.backends.yarn.client.app_spec import AM_MEMORY_MB  # noqa: E402

WORKER_MB = 256
RM = rm_address()
STARTED: List[str] = []  # application ids to kill on the way out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rm(path: str, **params) -> dict:
    return requests.get(RM + path, params=params or None, headers={"Accept": "application/json"}, timeout=10).json()


def wait_idle(timeout: float = 60) -> None:
    """Until no container holds memory on any node (the previous run's containers are released)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = (rm("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        if all(n.get("usedMemoryMB", 0) == 0 for n in nodes):
            return
        time.sleep(0.2)
    log("warning: the cluster is not idle (another application?); figures may include queueing")


def kill_app(app_id: str) -> None:
    try:
        state = rm(f"/ws/v1/cluster/apps/{app_id}")["app"]["state"]
        if state not in ("FINISHED", "FAILED", "KILLED"):
            requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"}, timeout=10)
    except (requests.RequestException, KeyError, ValueError) as exc:
        log(f"warning: could not kill {app_id}: {exc}")


def subm_cmd(*args: str) -> List[str]:
    return [sys.executable, "-m", "submarine_py.cli", *args]


def subm_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def write_job(directory: Path, name: str, n: int, command: str, restart: str = "") -> Path:
    job = directory / f"{name}.yaml"
    job.write_text(textwrap.dedent(f"""\
        name: {name}
        tags: [subm-bench]
        {restart}
        environment: {{python: {sys.executable}}}
        roles:
          worker:
            instances: {n}
            resources: {{memory: {WORKER_MB} MiB, vcores: 1}}
            command: {json.dumps(command)}
        """))
    return job


def run_subm(job: Path) -> dict:
    proc = subprocess.run(subm_cmd("run", str(job), "--backend", "yarn", "--output", "json", "--quiet"),
                          env=subm_env(), capture_output=True, text=True, timeout=600)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"subm run failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    STARTED.append(report["app_id"])
    return report


# -- subm ----------------------------------------------------------------------------------

def am_file(app_id: str, name: str) -> str:
    """A file of the application's last AM container, from its NodeManager."""
    am = rm(f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"][-1]
    return requests.get(f"http://{am['nodeHttpAddress'].split('://')[-1]}/ws/v1/node/containers/"
                        f"{am['containerId']}/logs/{name}", timeout=10).text


def accepted_after(app_id: str, t0: float) -> float:
    """Seconds from ``t0`` (the submitting call) to the RM's record of the application."""
    return float(rm(f"/ws/v1/cluster/apps/{app_id}")["app"]["startedTime"]) / 1000.0 - t0


def subm_gang_ready(workdir: Path, n: int) -> Dict[str, Optional[float]]:
    """The gang's readiness, and the submission's share of it: the AM report's ``submitted_at``
    (the backend's submit call) -> the RM's record of the application."""
    report = run_subm(write_job(workdir, f"bench-gang-{n}", n, "true"))
    if report["state"] != "SUCCEEDED":
        raise SystemExit(f"the subm job failed: {report.get('diagnostics')}")
    text = am_file(report["app_id"], "subm-report.json")
    found = re.search(r'"submitted_at":\s*([\d.]+)', text)
    return {"ready": float(report["timings"]["gang_ready_seconds"]),
            "accepted": accepted_after(report["app_id"], float(found.group(1))) if found else None}


# -- plain skein ---------------------------------------------------------------------------

def skein_gang_running(client, n: int, hosts: List[str], stamp_dir: Path) -> Dict[str, Optional[float]]:
    import skein

    for f in stamp_dir.iterdir():
        f.unlink()
    script = f'date +%s.%N > {stamp_dir}/"$SKEIN_CONTAINER_ID"; sleep 600'
    t0 = time.time()
    spec = skein.ApplicationSpec(
        name=f"bench-skein-{n}", queue="default", tags=["subm-bench"], max_attempts=1,
        master=skein.Master(resources=skein.Resources(memory=AM_MEMORY_MB, vcores=1)),
        services={"worker": skein.Service(resources=skein.Resources(memory=WORKER_MB, vcores=1), instances=n,
                                          script=script, nodes=hosts, relax_locality=True)})
    app_id = client.submit(spec)
    STARTED.append(app_id)
    accepted = accepted_after(app_id, t0)
    try:
        app = client.connect(app_id)
        while True:
            containers = app.get_containers()
            if len(containers) == n and all(str(c.state) == "RUNNING" for c in containers):
                running = time.time() - t0
                break
            time.sleep(0.1)
        started = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stamps = [f for f in stamp_dir.iterdir() if f.stat().st_size]
            if len(stamps) == n:
                started = max(float(f.read_text()) for f in stamps) - t0
                break
            time.sleep(0.1)
        return {"running": running, "started": started, "accepted": accepted}
    finally:
        client.kill_application(app_id)


def skein_replacement(client, n: int, hosts: List[str], stamp_dir: Path) -> Optional[float]:
    """skein's own restart (``max_restarts``): worker_0 exits 1 after 3 s; seconds from its exit
    to its replacement's process started (the reference for a lost container)."""
    import skein

    for f in stamp_dir.iterdir():
        f.unlink()
    script = (f'date +%s.%N > {stamp_dir}/"$SKEIN_CONTAINER_ID".start; '
              f'if [ "$SKEIN_CONTAINER_ID" = worker_0 ]; then sleep 3; '
              f'date +%s.%N > {stamp_dir}/worker_0.exit; exit 1; fi; sleep 600')
    spec = skein.ApplicationSpec(
        name=f"bench-skein-restart-{n}", queue="default", tags=["subm-bench"], max_attempts=1,
        master=skein.Master(resources=skein.Resources(memory=AM_MEMORY_MB, vcores=1)),
        services={"worker": skein.Service(resources=skein.Resources(memory=WORKER_MB, vcores=1), instances=n,
                                          script=script, nodes=hosts, relax_locality=True, max_restarts=1)})
    app_id = client.submit(spec)
    STARTED.append(app_id)
    try:
        replacement = stamp_dir / f"worker_{n}.start"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if replacement.exists() and replacement.stat().st_size:
                return float(replacement.read_text()) - float((stamp_dir / "worker_0.exit").read_text())
            time.sleep(0.1)
        return None
    finally:
        client.kill_application(app_id)


# -- failure -> gang running again ------------------------------------------------------------

AM_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _am_time(line: str) -> float:
    stamp = AM_TIME.match(line).group(1)
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000


def nm_file(url: str, name: str) -> str:
    node, _, rest = url.partition("/node/containerlogs/")
    text = requests.get(f"{node}/ws/v1/node/containers/{rest.split('/')[0]}/logs/{name}", timeout=10).text
    return text.split("LogContents:\n", 1)[-1].rsplit("End of LogType:", 1)[0]


def failover(workdir: Path, n: int, lose_container: bool = False) -> Dict[str, Optional[float]]:
    """Worker 0 fails at attempt 0 after 3 s: its command exits 1, or (``lose_container``) it
    kills its executor, so its container ends and the AM must get a new one from YARN."""
    end = 'kill -9 $PPID; sleep 60' if lose_container else 'exit 1'
    command = ('echo "t=$(date +%s.%N) attempt=$SUBM_ATTEMPT start"; '
               'if [ "$SUBM_INDEX" = 0 ] && [ "$SUBM_ATTEMPT" = 0 ]; then sleep 3; '
               f'echo "t=$(date +%s.%N) attempt=0 exit"; {end}; fi; sleep 5')
    name = f"bench-{'lost' if lose_container else 'failover'}-{n}"
    report = run_subm(write_job(workdir, name, n, command, restart="restart: {policy: gang, max_restarts: 1}"))
    if report["state"] != "SUCCEEDED" or report["attempts"] != 2:
        raise SystemExit(f"the {name} job did not restart once: {report}")
    am_log = am_file(report["app_id"], "application.driver.log").splitlines()
    failed_line = next(x for x in am_log if "failed with" in x)
    noticed = _am_time(failed_line)
    ready = next(_am_time(x) for x in am_log if "gang ready" in x and "(attempt 2)" in x)
    exited, restarted = None, []
    # Worker 0's log at attempt 0 (with a lost container, no longer the task's current one).
    logs = {t["log"] for t in report["tasks"]} | set(re.findall(r"log: (\S+)", failed_line))
    for url in logs:
        for t, attempt, what in re.findall(r"t=([\d.]+) attempt=(\d) (start|exit)", nm_file(url, "stdout")):
            if what == "exit":
                exited = float(t)
            elif attempt == "1":
                restarted.append(float(t))
    return {"noticed": noticed - exited if exited else None, "am": ready - noticed,
            "processes": max(restarted) - exited if exited and len(restarted) == n else None,
            "app_id": report["app_id"]}


# -- small things ------------------------------------------------------------------------------

def wall(cmd: List[str], reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=subm_env(), capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def med(values: List[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x: Optional[float]) -> str:
    return "  n/a" if x is None else f"{x:5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="1,4,8,15")
    parser.add_argument("--failover-workers", type=int, default=4)
    args = parser.parse_args()
    if not os.environ.get("HADOOP_CONF_DIR"):
        raise SystemExit("set HADOOP_CONF_DIR (source /tmp/yarn-rig/env.sh)")
    sizes = [int(s) for s in args.sizes.split(",")]

    import skein

    started_driver = False
    try:
        client = skein.Client.from_global_driver()
    except (skein.exceptions.DriverNotRunningError, skein.exceptions.SkeinError):
        log("starting skein's global driver")
        skein.Client.start_global_driver()
        started_driver = True
        client = skein.Client.from_global_driver()
    nodes = (rm("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
    hosts = [x["nodeHostName"] for x in nodes if x.get("state") == "RUNNING"]
    workdir = Path(tempfile.mkdtemp(prefix="subm-bench-"))
    stamp_dir = workdir / "stamps"
    stamp_dir.mkdir()
    subm_ready: Dict[int, List[Dict[str, Optional[float]]]] = {n: [] for n in sizes}
    plain: Dict[int, List[Dict[str, Optional[float]]]] = {n: [] for n in sizes}
    try:
        for rep in range(args.reps):
            for n in sizes:
                order = ("subm", "skein") if rep % 2 == 0 else ("skein", "subm")
                for which in order:
                    wait_idle()
                    if which == "subm":
                        subm_ready[n].append(subm_gang_ready(workdir, n))
                    else:
                        plain[n].append(skein_gang_running(client, n, hosts, stamp_dir))
                log(f"rep {rep + 1}/{args.reps} N={n}: subm gang ready {subm_ready[n][-1]['ready']:.2f} s "
                    f"(RM had it after {fmt(subm_ready[n][-1]['accepted']).strip()} s), "
                    f"skein RUNNING {plain[n][-1]['running']:.2f} s (RM had it after "
                    f"{plain[n][-1]['accepted']:.2f} s), processes started {fmt(plain[n][-1]['started']).strip()} s")
        fails: Dict[bool, List[Dict[str, Optional[float]]]] = {False: [], True: []}
        for rep in range(args.reps):
            for lose in (False, True):
                wait_idle()
                fails[lose].append(failover(workdir, args.failover_workers, lose_container=lose))
                log(f"{'lost container' if lose else 'task failure'} rep {rep + 1}: {fails[lose][-1]}")
        skein_restart = []
        for rep in range(args.reps):
            wait_idle()
            skein_restart.append(skein_replacement(client, args.failover_workers, hosts, stamp_dir))
            log(f"skein's own restart rep {rep + 1}: {skein_restart[-1]}")
        status_s = wall(subm_cmd("status", fails[False][-1]["app_id"], "--output", "json"))
        import_s = wall([sys.executable, "-c", "import skein"]) - wall([sys.executable, "-c", "pass"])
    finally:
        for app_id in STARTED:
            kill_app(app_id)
        shutil.rmtree(workdir, ignore_errors=True)
        if started_driver:
            skein.Client.stop_global_driver()

    print(f"# gang start-up on YARN, {datetime.date.today()}, {args.reps} reps, medians (seconds)")
    print(f"# cluster {RM}: {len(hosts)} node(s); workers {WORKER_MB} MiB, 1 vcore; AM {AM_MEMORY_MB} MiB; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(" N | subm gang ready | skein RUNNING | skein procs started | subm - skein RUNNING | ratio"
          " | submission: subm | skein | ready after the RM had it: subm | skein RUNNING | skein procs")
    for n in sizes:
        s, k, p = med([x["ready"] for x in subm_ready[n]]), med([x["running"] for x in plain[n]]), \
            med([x["started"] for x in plain[n]])
        sa, ka = med([x["accepted"] for x in subm_ready[n]]), med([x["accepted"] for x in plain[n]])
        # After the RM has the application, per repetition (the submission's noise left out).
        sr = med([x["ready"] - x["accepted"] for x in subm_ready[n] if x["accepted"] is not None])
        kr = med([x["running"] - x["accepted"] for x in plain[n]])
        kp = med([x["started"] - x["accepted"] for x in plain[n] if x["started"] is not None])
        print(f"{n:2d} | {fmt(s):>15} | {fmt(k):>13} | {fmt(p):>19} | {s - k:+20.2f} | {s / k:5.2f}"
              f" | {fmt(sa):>17} | {fmt(ka):>5} | {fmt(sr):>32} | {fmt(kr):>13} | {fmt(kp):>11}")
    for lose, what in ((False, "task exits 1 (same containers)"), (True, "container lost (new container)")):
        f = fails[lose]
        print(f"failure -> gang running again, {args.failover_workers} workers, {what}: "
              f"exit -> AM notices {fmt(med([x['noticed'] for x in f])).strip()} s, "
              f"AM notices -> gang ready {fmt(med([x['am'] for x in f])).strip()} s, "
              f"exit -> last attempt-1 process started {fmt(med([x['processes'] for x in f])).strip()} s")
    print(f"reference, plain skein (max_restarts=1), {args.failover_workers} workers: worker_0's exit -> its "
          f"replacement's process started {fmt(med(skein_restart)).strip()} s")
    print(f"subm status (finished app, wall, median of 5): {status_s:.2f} s")
    print(f"import skein (median of 5, minus interpreter start): {import_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
