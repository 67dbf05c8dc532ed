#!/usr/bin/env python3
"""Scale on YARN: one job of many tasks (default 256) against plain skein with the same containers.

It measures, on the cluster HADOOP_CONF_DIR names (its nodes must hold N tasks of 64 MiB and
1 vcore at once: e.g. ``RIG_NODES=3 RIG_VCORES=128 RIG_MEM_MB=24576 scripts/rig.sh up DIR``):

* subm gang ready: ``subm run`` of N workers that sleep; the report's
  ``timings.gang_ready_seconds`` (submission -> every task registered, cluster spec published);
* skein RUNNING: a plain skein application, same N containers, same node hints, no master
  script: ``client.submit()`` -> ``get_containers()`` shows N RUNNING (polled every 0.5 s);
* the AM's peak memory: VmHWM (peak resident set) of the Python AM process and of skein's
  Java AM (the same container), read from /proc on this machine (the rig's nodes are here),
  and the peak of their sum, sampled every 0.5 s while the job runs;
* subm status: wall time of ``subm status APP --output json`` (a new process each time)
  while the N tasks run, median of 5;
* the CPU time the AM's two processes used over the whole job (from /proc);
* who used the machine's CPUs while the gang assembled (submission -> gang ready for subm,
  -> every process started for skein), by kind of process (NodeManagers, ResourceManager, the
  AM's two processes, executors, ...): on a rig whose nodes share a few CPUs, every CPU
  second subm adds is wall time its gang waits.

    source DIR/env.sh && python3 bench/scale.py [--tasks 256] [--reps 1] [--sleep 40]

Everything it submits is tagged ``subm-bench`` and killed on the way out. Figures go to
stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import datetime
import getpass
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from submarine_py.backends.yarn.hadoop.resourcemanager import rm_address  # noqa: E402
from submarine_py.backends.yarn.client.skein_driver import client_for  # noqa: E402
from submarine_py.backends.yarn.client.app_spec import AM_MEMORY_MB  # noqa: E402

TASK_MB = 64
RM = rm_address()
USER = {"user.name": getpass.getuser()}
STARTED: List[str] = []


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rm(path: str, **params) -> dict:
    return requests.get(RM + path, params={**USER, **params}, headers={"Accept": "application/json"},
                        timeout=10).json()


def wait_idle(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = (rm("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        if all(n.get("usedMemoryMB", 0) == 0 for n in nodes):
            return
        time.sleep(0.5)
    log("warning: the cluster is not idle; figures may include queueing")


def kill_app(app_id: str) -> None:
    try:
        if rm(f"/ws/v1/cluster/apps/{app_id}")["app"]["state"] not in ("FINISHED", "FAILED", "KILLED"):
            requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"}, params=USER,
                         timeout=10)
    except (requests.RequestException, KeyError, ValueError) as exc:
        log(f"warning: could not kill {app_id}: {exc}")


def subm_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def subm(*args: str) -> List[str]:
    return [sys.executable, "-m", "submarine_py.cli", *args]


# -- the AM's memory, from /proc ---------------------------------------------------------------

def _proc_env_has(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _kib(pid: str, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def am_processes(app_id: str) -> Dict[str, str]:
    """{'python': pid, 'java': pid} of the application's AM container (the master's processes)."""
    found: Dict[str, str] = {}
    needle = f"SKEIN_APPLICATION_ID={app_id}".encode()
    for pid, cmd in _processes():
        if b"backends.yarn.am.main" in cmd and b"submarine_py" in cmd and _proc_env_has(pid, needle):
            found["python"] = pid
        elif b"com.anaconda.skein.ApplicationMaster" in cmd and app_id.encode() in cmd:
            found["java"] = pid
        elif b"com.anaconda.skein.ApplicationMaster" in cmd and _proc_env_has(pid, needle):
            found["java"] = pid
    return found


def _processes() -> Iterator[Tuple[str, bytes]]:
    """``(pid, command line)`` of every process this machine runs (the rig's nodes are here)."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    yield pid, f.read()
            except OSError:
                continue


def _cpu_ticks(pid: str, with_children: bool = False) -> int:
    """Clock ticks of user + system CPU a process has used so far (and its reaped children's)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15 if with_children else 13])
    except (OSError, IndexError, ValueError):
        return 0


def _cpu_seconds(pid: str) -> float:
    """User + system CPU time a process has used so far."""
    return _cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


#: Who used the machine's CPUs while a gang assembled, by the command line of each process.
CPU_KINDS = (("nodemanagers", b"-Dproc_nodemanager"), ("resourcemanager", b"-Dproc_resourcemanager"),
             ("AM java", b"com.anaconda.skein.ApplicationMaster"), ("AM python", b"backends.yarn.am.main"),
             ("executors", b"subm_executor.py"), ("skein driver", b"com.anaconda.skein.Driver"),
             ("container shells", b".skein.sh"), ("container shells", b"default_container_executor"),
             ("subm CLI", b"submarine_py.cli"), ("this benchmark", b"bench/scale.py"))
#: Kinds whose reaped children count as theirs (a NodeManager's forks of chmod, ls, bash...).
WITH_CHILDREN = ("nodemanagers", "resourcemanager")


def cpu_by_kind() -> Dict[str, float]:
    """CPU seconds used so far by the live processes of each kind (see WITH_CHILDREN)."""
    totals: Dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid, cmd in _processes():
        kind = next((k for k, needle in CPU_KINDS if needle in cmd), "other")
        totals[kind] = totals.get(kind, 0.0) + _cpu_ticks(pid, kind in WITH_CHILDREN) / tick
    return totals


def cpu_used(before: Dict[str, float]) -> Dict[str, float]:
    """CPU seconds per kind since ``before`` (processes that ended unreaped are not counted)."""
    now = cpu_by_kind()
    return {k: round(max(0.0, now.get(k, 0.0) - before.get(k, 0.0)), 1) for k in now}


class MemoryWatch(threading.Thread):
    """Samples the AM's processes every 0.5 s until stopped: peak RSS of each and of their
    sum, and the CPU time each has used (last sample)."""

    def __init__(self, app_id: str):
        super().__init__(daemon=True)
        self.app_id, self.stopped = app_id, threading.Event()
        self.pids: Dict[str, str] = {}
        self.peak = {"python": 0, "java": 0, "sum": 0}
        self.cpu = {"python": 0.0, "java": 0.0}

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            if len(self.pids) < 2:
                self.pids.update(am_processes(self.app_id))
            rss = {k: _kib(pid, "VmRSS") for k, pid in self.pids.items()}
            for k, pid in self.pids.items():
                self.peak[k] = max(self.peak[k], _kib(pid, "VmHWM"))
                self.cpu[k] = max(self.cpu[k], _cpu_seconds(pid))
            self.peak["sum"] = max(self.peak["sum"], sum(rss.values()))


# -- subm ------------------------------------------------------------------------------------

def subm_run(workdir: Path, n: int, sleep_s: int) -> Dict[str, Optional[float]]:
    job = workdir / "scale.yaml"
    job.write_text(textwrap.dedent(f"""\
        name: bench-scale-{n}
        tags: [subm-bench]
        timeouts: {{gang_seconds: 600}}
        roles:
          worker:
            instances: {n}
            resources: {{memory: {TASK_MB} MiB, vcores: 1}}
            command: sleep {sleep_s}
        """))
    cpu_before = cpu_by_kind()
    proc = subprocess.Popen(subm("run", str(job), "--backend", "yarn", "--output", "json"),
                            env=subm_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu_at_ready: Dict[str, float] = {}
    # Progress lines: `subm status` is timed once the AM said "gang ready", so that its probes
    # (new processes) do not load the machine while the gang assembles.
    err_lines: List[str] = []
    gang_ready = threading.Event()

    def read_progress() -> None:
        for line in proc.stderr:
            err_lines.append(line)
            if "gang ready" in line and not gang_ready.is_set():
                cpu_at_ready.update(cpu_used(cpu_before))
                gang_ready.set()
        gang_ready.set()

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    app_id = ""
    deadline = time.monotonic() + 120
    while not app_id and time.monotonic() < deadline:
        apps = (rm("/ws/v1/cluster/apps", applicationTags="subm-bench",
                   states="NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING").get("apps") or {}).get("app") or []
        app_id = next((a["id"] for a in apps if a["name"] == f"bench-scale-{n}"), "")
        time.sleep(0.2)
    if not app_id:
        proc.kill()
        proc.wait()
        reader.join(timeout=10)
        raise SystemExit(f"the subm job did not reach YARN: {''.join(err_lines)}")
    STARTED.append(app_id)
    watch = MemoryWatch(app_id)
    watch.start()
    status_s: List[float] = []
    try:
        # subm status while the tasks run: once the gang is up.
        gang_ready.wait(timeout=600)
        while proc.poll() is None and len(status_s) < 5:
            t0 = time.perf_counter()
            out = subprocess.run(subm("status", app_id, "--output", "json"), env=subm_env(),
                                 capture_output=True, text=True).stdout
            took = time.perf_counter() - t0
            try:
                report = json.loads(out)
            except ValueError:
                report = {}
            if sum(1 for t in report.get("tasks") or [] if t.get("state") == "RUNNING") == n:
                status_s.append(took)
            else:
                time.sleep(1)
        out = proc.stdout.read()
        proc.wait(timeout=900)
        reader.join(timeout=10)
        err = "".join(err_lines)
    finally:
        watch.stopped.set()
        watch.join()
        if proc.poll() is None:
            proc.kill()
    try:
        report = json.loads(out)
    except ValueError:
        raise SystemExit(f"subm run failed (exit {proc.returncode}):\n{out}\n{err}") from None
    if report.get("state") != "SUCCEEDED":
        raise SystemExit(f"the subm job failed: {report.get('diagnostics')}")
    return {"ready": float(report["timings"]["gang_ready_seconds"]), "status": statistics.median(status_s)
            if status_s else None, "am_python_mib": watch.peak["python"] / 1024,
            "am_java_mib": watch.peak["java"] / 1024, "am_sum_mib": watch.peak["sum"] / 1024,
            "am_python_cpu": watch.cpu["python"], "am_java_cpu": watch.cpu["java"], "cpu": cpu_at_ready}


# -- plain skein -------------------------------------------------------------------------------

def skein_running(client, n: int, hosts: List[str], sleep_s: int, stamp_dir: Path) -> Dict[str, Optional[float]]:
    """Seconds from submission until every container is RUNNING (skein's view: the NodeManager
    accepted its start), and until every container's process has started (its own timestamp,
    written to ``stamp_dir``: the rig's nodes share this machine's /tmp)."""
    import skein

    stamp_dir.mkdir(parents=True, exist_ok=True)
    for f in stamp_dir.iterdir():
        f.unlink()
    cpu_before = cpu_by_kind()
    t0 = time.time()
    spec = skein.ApplicationSpec(
        name=f"bench-skein-scale-{n}", queue="default", tags=["subm-bench"], max_attempts=1,
        master=skein.Master(resources=skein.Resources(memory=AM_MEMORY_MB, vcores=1)),
        services={"worker": skein.Service(resources=skein.Resources(memory=TASK_MB, vcores=1), instances=n,
                                          script=f'date +%s.%N > {stamp_dir}/"$SKEIN_CONTAINER_ID"; '
                                                 f'sleep {sleep_s}', nodes=hosts, relax_locality=True)})
    app_id = client.submit(spec)
    STARTED.append(app_id)
    try:
        app = client.connect(app_id)
        while True:
            containers = app.get_containers()
            if len(containers) == n and all(str(c.state) == "RUNNING" for c in containers):
                running = time.time() - t0
                break
            time.sleep(0.5)
        started, cpu = None, {}
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            stamps = [f for f in stamp_dir.iterdir() if f.stat().st_size]
            if len(stamps) == n:
                started = max(float(f.read_text()) for f in stamps) - t0
                cpu = cpu_used(cpu_before)
                break
            time.sleep(0.5)
        return {"running": running, "started": started, "cpu": cpu}
    finally:
        client.kill_application(app_id)


def fmt(x: Optional[float], unit: str = "s") -> str:
    return "n/a" if x is None else f"{x:.2f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=256)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--sleep", type=int, default=40, help="how long each task sleeps (s)")
    args = parser.parse_args()
    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    if not conf_dir:
        raise SystemExit("set HADOOP_CONF_DIR (source DIR/env.sh of a rig)")
    nodes = [x for x in (rm("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
             if x.get("state") == "RUNNING"]
    hosts = [x["nodeHostName"] for x in nodes]
    vcores = sum(x.get("availableVirtualCores", 0) + x.get("usedVirtualCores", 0) for x in nodes)
    if vcores < args.tasks + 1:
        raise SystemExit(f"the cluster has {vcores} vcores for {args.tasks} tasks + the AM: start a rig with "
                         "more (RIG_VCORES)")
    client = client_for(os.path.realpath(conf_dir))
    workdir = Path(tempfile.mkdtemp(prefix="subm-bench-scale-"))
    results: List[Dict[str, Optional[float]]] = []
    plain: List[Dict[str, Optional[float]]] = []
    try:
        # A fresh rig's first application pays the NodeManagers' warm-up (JIT, first
        # localization): one small plain skein application first, for neither side to pay it.
        wait_idle()
        skein_running(client, min(args.tasks, 6), hosts, 1, workdir / "stamps")
        for rep in range(args.reps):
            for which in (("subm", "skein") if rep % 2 == 0 else ("skein", "subm")):
                wait_idle()
                if which == "subm":
                    results.append(subm_run(workdir, args.tasks, args.sleep))
                    log(f"rep {rep + 1}: subm {results[-1]}")
                else:
                    plain.append(skein_running(client, args.tasks, hosts, args.sleep, workdir / "stamps"))
                    log(f"rep {rep + 1}: skein {plain[-1]}")
    finally:
        for app_id in STARTED:
            kill_app(app_id)

    def med(key: str) -> Optional[float]:
        values = [r[key] for r in results if r[key] is not None]
        return statistics.median(values) if values else None

    ready, skein_s = med("ready"), statistics.median(p["running"] for p in plain)
    started = [p["started"] for p in plain if p["started"] is not None]
    skein_started = statistics.median(started) if started else None
    over = ready - skein_s
    print(f"# scale on YARN, {datetime.date.today()}: {args.tasks} tasks ({TASK_MB} MiB, 1 vcore, sleep "
          f"{args.sleep} s), {len(hosts)} node(s), {args.reps} rep(s), medians; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"subm gang ready:        {fmt(ready)}")
    print(f"skein RUNNING:          {fmt(skein_s)}")
    print(f"skein procs started:    {fmt(skein_started)} (every container's process has started)")
    print(f"subm - skein RUNNING:   {over:+.2f} s ({over / (args.tasks / 64):+.2f} s per 64 tasks; goal <= 1)")
    if skein_started is not None:
        over_started = ready - skein_started
        print(f"subm - skein started:   {over_started:+.2f} s ({over_started / (args.tasks / 64):+.2f} s per 64 tasks)")
        # Reps are pairs run back to back: their differences vary less than rig to rig.
        pairs = [f"{r['ready'] - p['started']:+.2f}" for r, p in zip(results, plain)
                 if r["ready"] is not None and p["started"] is not None]
        print(f"  per rep:              {', '.join(pairs)} s")
    print(f"AM peak RSS (python):   {fmt(med('am_python_mib'), 'MiB')}")
    print(f"AM peak RSS (java):     {fmt(med('am_java_mib'), 'MiB')}")
    print(f"AM container peak RSS:  {fmt(med('am_sum_mib'), 'MiB')} (python + java; goal < 512 MiB)")
    print(f"subm status (running):  {fmt(med('status'))} (wall, new process, median of 5)")
    print(f"AM CPU time, whole job: {fmt(med('am_python_cpu'))} python, {fmt(med('am_java_cpu'))} java")
    for label, runs in (("subm, submit -> gang ready", results), ("skein, submit -> procs started", plain)):
        kinds = sorted({k for r in runs for k in r.get("cpu") or {}})
        medians = {k: statistics.median((r.get("cpu") or {}).get(k, 0.0) for r in runs) for k in kinds}
        shown = ", ".join(f"{k} {v:.1f}" for k, v in sorted(medians.items(), key=lambda kv: -kv[1]) if v >= 0.1)
        print(f"CPU s {label}: {sum(medians.values()):.1f} ({shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
