#!/usr/bin/env python3
"""What waiting gangs cost the ResourceManager: requests/s and bytes/s, counted where they arrive.

On the cluster HADOOP_CONF_DIR names (the project's rig: ``scripts/rig.sh up DIR``), it fills the
cluster's memory with a holder application, submits W applications tagged as subm jobs whose
gangs wait (``subm-gang:...``: each asks more memory than is free; their AMs are ``sleep``, which never
registers: the RM lists them ACCEPTED, as it lists a job whose AM has not started), and runs W instances of the real admission code
(``YarnContainers.admit``, each for one of those applications, at the AM's pace, ``admit_pause``)
in this process, for ``--seconds`` each:

* ``before``: as the AMs asked before issue 44: every 2 s the room whole, every node (any
  state), the scheduler's queues, this tool's applications with every field;
* ``paced``: as they asked after the first part of issue 44: the room whole once (running
  nodes, applications without their resource requests), then the cluster's metrics alone while
  it has less free than the gang asks; each gang at the pace of its place in the line (2 s for
  the head, k times that for the k-th, at most 8 times);
* ``steward``: as they ask now: each gang reads the room whole once, then asks the line's
  steward (``am/steward.py``: the oldest application's AM, here the first instance, served over
  HTTP in this process as an AM's endpoint serves it) every 2 s; the steward alone reads the RM,
  once a round for every gang: the metrics, and the line only where a job came or went, a
  gang was let ask, or 30 s passed.

Each row is measured once every gang has decided once (its first read, whole, and the two
``/conf`` reads each AM makes at its start are left out): the cost of waiting, not of arriving.

Between them and the RM, a counting proxy in this process: requests, response bytes (the bodies
as the RM built them, before any gzip) by endpoint. Also the CPU each decision took (the
thread's CPU time in ``admit``). Beside the figures, per endpoint the bytes of one answer, and
per node the bytes a ``/nodes`` answer grows by: the per-node term of ``before`` that ``now``
does not pay once it waits. Everything it submits is tagged ``subm-bench`` and killed at the end.

    source DIR/env.sh && python3 bench/admission_load.py [--waiting 10,50] [--seconds 30]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Tuple

import requests

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from submarine_py.am.allocation import ADMIT_EVERY_SECONDS, admit_pause  # noqa: E402
from submarine_py.backends.yarn.am.containers import YarnContainers  # noqa: E402
from submarine_py.backends.yarn.am.steward import Steward, Stewardship  # noqa: E402
from submarine_py.backends.yarn.capacity import Capacity  # noqa: E402
from submarine_py.backends.yarn.hadoop import addresses  # noqa: E402
from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager  # noqa: E402
from submarine_py.backends.yarn.protocol import GANG_TAG, TAG  # noqa: E402
from submarine_py.jobfile import spec_from_dict  # noqa: E402
from submarine_py.plan import make_plan  # noqa: E402
from submarine_py.states import Placement  # noqa: E402

BENCH_TAG = "subm-bench"


class Counting(BaseHTTPRequestHandler):
    """Forwards GETs to the RM, counting requests and bytes by endpoint."""

    upstream = ""
    counts: Dict[str, List[int]] = collections.defaultdict(lambda: [0, 0])
    lock = threading.Lock()

    def do_GET(self) -> None:  # noqa: N802
        resp = requests.get(self.upstream + self.path, headers={"Accept": "application/json"}, timeout=30)
        body = resp.content
        endpoint = self.path.split("?")[0]
        with self.lock:
            self.counts[endpoint][0] += 1
            self.counts[endpoint][1] += len(body)
        self.send_response(resp.status_code)
        self.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def submit(rm_url: str, name: str, memory_mb: int, tags: List[str]) -> str:
    user = {"user.name": os.environ.get("USER") or "root"}
    app_id = requests.post(f"{rm_url}/ws/v1/cluster/apps/new-application", params=user, timeout=30).json()["application-id"]
    body = {"application-id": app_id, "application-name": name, "application-type": "subm-bench",
            "application-tags": {"tag": tags}, "am-container-spec": {"commands": {"command": "sleep 1800"}},
            "resource": {"memory": memory_mb, "vCores": 1}, "max-app-attempts": 1}
    resp = requests.post(f"{rm_url}/ws/v1/cluster/apps", params=user, json=body, timeout=30)
    resp.raise_for_status()
    return app_id


def kill_all(rm_url: str) -> None:
    apps = ((requests.get(f"{rm_url}/ws/v1/cluster/apps", params={"applicationTypes": "subm-bench",
                                                                   "states": "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"},
                          timeout=30).json().get("apps") or {}).get("app") or [])
    for a in apps:
        requests.put(f"{rm_url}/ws/v1/cluster/apps/{a['id']}/state", params={"user.name": a.get("user") or "root"},
                     json={"state": "KILLED"}, timeout=30)


MODES = ("before", "paced", "steward")
#: The CPU of each of the steward's rounds (its decision for every gang), in the row measured.
ROUNDS: List[float] = []


def serve_steward(steward: Steward) -> Tuple[ThreadingHTTPServer, str]:
    """The steward's answers on an endpoint of this process, as its AM's endpoint serves them."""
    from urllib.parse import parse_qs, urlparse

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(steward.answer({k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()})).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def measure(proxy_url: str, apps: List[str], gang_mb: int, tasks: int, seconds: float, mode: str) -> Tuple[float, List[float], int]:
    """W admission loops for ``seconds``: (the seconds measured, CPU per decision, decisions)."""
    before = mode == "before"
    plan = make_plan(spec_from_dict({"name": "waiting", "roles": {"worker": {
        "instances": tasks, "command": "x", "resources": {"memory": f"{gang_mb} MiB", "vcores": 1}}}}))
    stop = threading.Event()
    cpu: List[float] = []
    lock = threading.Lock()
    rm = ResourceManager([proxy_url], wait_seconds=0)
    stewarding: Dict[str, Stewardship] = {}
    served = None
    if mode == "steward":  # the oldest RUNNING application stewards: apps[0], whose instance serves it
        oldest = YarnContainers(None, plan, user="bench", rm=rm, app_id=apps[0])
        steward = oldest.stewardship.own
        served, url = serve_steward(steward)
        plain_read = steward.read

        def timed_read():
            began = time.thread_time()
            try:
                return plain_read()
            finally:
                ROUNDS.append(time.thread_time() - began)
        steward.read = timed_read  # type: ignore[method-assign]
        for a in apps:
            ship = oldest.stewardship if a == apps[0] else Stewardship(
                a, Steward(rm, a, oldest.capacity), find=lambda node, cid: url)
            # Their AMs are `sleep` (the RM lists them ACCEPTED, never RUNNING): the steward is
            # named here, as a waiting AM finds it among the applications it read (candidates).
            ship.stewards, ship.learnt_at = [(apps[0], "bench", "container_bench")], float("inf")
            ship.learn = lambda listed: None  # type: ignore[method-assign]
            stewarding[a] = ship

    def loop(app_id: str) -> None:
        am = YarnContainers(None, plan, user="bench", rm=rm, app_id=app_id, submitted_at=time.time(),
                            stewardship=stewarding.get(app_id))
        if mode != "steward":
            am.stewardship = None
        if before:  # the asks of before issue 44, over the same admission
            capacity = am.capacity
            assert capacity is not None
            old_room = Capacity.room

            def room_as_before(self=capacity):
                self.rm = _AsBefore(rm)
                try:
                    return old_room(self)
                finally:
                    self.rm, self.read_whole = rm, False
            capacity.room = room_as_before  # type: ignore[method-assign]
        ahead = 0
        while not stop.is_set():
            began = time.thread_time()
            verdict = am.admit(plan.tasks, Placement.PACK)
            with lock:
                cpu.append(time.thread_time() - began)
            if verdict.fits:
                sys.exit(f"a bench gang fits ({app_id}): the holder does not fill the cluster")
            if mode == "paced" and verdict.ahead is not None:  # as the AM's gate paces it (Gate.refused)
                ahead = verdict.ahead
            if verdict.told_by:  # the steward told it: the head's pace (Gate.answer)
                ahead = 0
            stop.wait(admit_pause(ahead=ahead))

    with Counting.lock:
        Counting.counts.clear()
    threads = [threading.Thread(target=loop, args=(a,), daemon=True) for a in apps]
    for t in threads:
        t.start()
    # Measured once every gang has decided once (its first read of the room is whole): the
    # waiting, not the arriving.
    deadline = time.monotonic() + 120
    while len(cpu) < len(apps) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(ADMIT_EVERY_SECONDS)
    with Counting.lock, lock:
        Counting.counts.clear()
        cpu.clear()
        ROUNDS.clear()
    began = time.monotonic()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(30)
    took = time.monotonic() - began
    if served is not None:
        served.shutdown()
    return took, cpu, len(cpu)


class _AsBefore:
    """The RM as the AMs asked it before: every node, every field of every application."""

    def __init__(self, rm: ResourceManager):
        self._rm = rm

    def nodes(self, running_only: bool = False):
        return self._rm.nodes()

    def apps(self, tags=None, states=None, user=None, slim=False):
        return self._rm.apps(tags=tags, states=states, user=user)

    def __getattr__(self, name):
        return getattr(self._rm, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--waiting", default="10,50", help="numbers of waiting gangs, comma-separated")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long each measurement runs")
    ap.add_argument("--modes", default=",".join(MODES), help=f"which of {', '.join(MODES)}, comma-separated")
    ap.add_argument("--before-up-to", type=int, default=100,
                    help="measure 'before' only up to this many waiting gangs (past it the RM cannot serve them)")
    args = ap.parse_args()
    found = addresses.from_conf()
    rm_url = found.rm_urls[0]
    rm = ResourceManager(list(found.rm_urls), wait_seconds=30)
    metrics = rm.metrics()
    total_mb, nodes = int(metrics.get("totalMB") or 0), int(metrics.get("activeNodes") or 0)
    version = (rm._get("/ws/v1/cluster/info") or {}).get("clusterInfo", {}).get("hadoopVersion", "?")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    Counting.upstream = rm_url
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy_url = f"http://127.0.0.1:{server.server_address[1]}"
    waiting = sorted(int(w) for w in args.waiting.split(","))
    kill_all(rm_url)
    try:
        # The holder: an AM of most of the cluster's memory (the scheduler's AM limit allowing).
        holder_mb = total_mb // 2 - 256
        submit(rm_url, "holder", holder_mb, [BENCH_TAG])
        time.sleep(5)
        free_mb = int(rm.metrics().get("availableMB") or 0)
        tasks = 4
        gang_mb = free_mb // tasks + 1024  # the gang asks more than is free: it waits
        apps: List[str] = []
        print(f"# bench/admission_load.py, {datetime.date.today()}: Hadoop {version} ResourceManager at {rm_url}, "
              f"{nodes} node(s), {total_mb} MiB; a holder of {holder_mb} MiB; each waiting gang {tasks} x {gang_mb} MiB "
              f"({free_mb} MiB free); {args.seconds:.0f} s per row; the AM's pace (admit_pause): before every 2 s, paced by place in line, steward: "
              f"every gang asks the steward every 2 s, the steward alone reads the RM")
        print(f"{'waiting':>7} {'asks':>7} {'req/s':>7} {'KB/s':>9} {'KB/poll':>8} {'CPU ms/decision':>16}  by endpoint (requests, KB per answer)")
        per_answer: Dict[str, float] = {}
        for w in waiting:
            while len(apps) < w:  # as many waiting jobs as the RM lists
                apps.append(submit(rm_url, f"waiting-{len(apps)}", 64,
                                   [BENCH_TAG, TAG, f"{GANG_TAG}{tasks}x{gang_mb}m1c0g"]))
            time.sleep(3)
            for mode in [m for m in args.modes.split(",") if m in MODES]:
                if mode == "before" and w > args.before_up_to:
                    continue
                seconds, cpu, decisions = measure(proxy_url, apps[:w], gang_mb, tasks, args.seconds, mode)
                counts = {e: c for e, c in Counting.counts.items() if e != "/conf"}  # once per AM, at its start
                reqs = sum(c[0] for c in counts.values())
                sent = sum(c[1] for c in counts.values())
                for endpoint, (n, b) in counts.items():
                    per_answer[f"{endpoint} ({mode}, {w} waiting)"] = b / n / 1e3
                cpu_ms = sorted(cpu)[len(cpu) // 2] * 1e3 if cpu else 0.0
                if mode == "steward" and ROUNDS:  # its decision for every gang, and theirs
                    by_round = f"steward {sorted(ROUNDS)[len(ROUNDS) // 2] * 1e3:.1f} ms/round ({len(ROUNDS)}); "
                else:
                    by_round = ""
                by = "; ".join(f"{e.rsplit('/', 1)[-1]} {n}, {b / n / 1e3:.1f} KB" for e, (n, b) in sorted(counts.items()))
                print(f"{w:>7} {mode:>7} {reqs / seconds:>7.1f} {sent / seconds / 1e3:>9.1f} "
                      f"{sent / max(decisions, 1) / 1e3:>8.1f} {cpu_ms:>16.2f}  {by_round}{by}")
        nodes_answer = [v for k, v in per_answer.items() if k.startswith("/ws/v1/cluster/nodes (before")]
        if nodes_answer and nodes:
            print(f"# a /nodes answer: {nodes_answer[0]:.1f} KB for {nodes} node(s), {nodes_answer[0] / nodes:.2f} KB a node "
                  f"(before: every waiting gang reads it every poll; paced: only its first poll, and while the "
                  f"cluster has free in all what it asks; steward: each gang's first poll, then the steward's rounds "
                  f"where the metrics say some gang may fit)")
    finally:
        kill_all(rm_url)
        server.shutdown()


if __name__ == "__main__":
    main()
