#!/usr/bin/env python3
"""What an executor costs before it registers: N executors started at once, no YARN.

A stand-in AM in this process answers the executors as the real one does (the RM-proxy
discovery URL, ``/v1/register``, then an ``exit`` instruction). The discovery URL answers
404 until a random moment (``--publish``, a range of seconds after the launch, the same for
both variants of one repetition: the AM still starting, as on YARN, where skein starts the
containers with the AM), then the AM's URL. Figures, seconds, medians:

* launch -> last registered: the N processes started -> the last ``/v1/register``;
* publish -> last registered: the AM's URL published -> the last ``/v1/register``
  (what the discovery backoff adds);
* CPU per executor: user + system time of the N processes (they leave once registered), over N.

It compares the executor of a git revision (``--old-ref``, with the sibling modules it had
then, run as the YARN script ran it then: ``--old-flags``) with the working tree's bundle (as
YARN ships it, ``LOCAL_DIRS`` beside it)
(``python -S``), interleaved.

    python3 bench/executor_startup.py [--n 15] [--reps 8] [--publish 1.5-4.5] [--old-ref 631a218]
    python3 bench/executor_startup.py --old-ref 317fe89 --old-flags=-S
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent


class StandInAM:
    def __init__(self) -> None:
        self.published = False
        self.registered: Dict[str, float] = {}
        self.lock = threading.Lock()
        am = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # an executor that already left

            def do_GET(self) -> None:
                if self.path.startswith("/am"):
                    if am.published:
                        self.reply(200, {"url": am.url})
                    else:
                        self.reply(404, {})
                else:  # /v1/next: leave
                    self.reply(200, {"instructions": [{"seq": 1, "op": "exit", "code": 0, "grace": 0}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/v1/register":
                    with am.lock:
                        am.registered[body["executor"]] = time.time()
                    self.reply(200, {"index": 0, "attempt": 0})
                else:
                    self.reply(200, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def one_run(executor: str, argv_prefix: List[str], n: int, publish_after: float) -> Dict[str, float]:
    am = StandInAM()
    procs = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    for i in range(n):
        env = dict(os.environ, SUBM_TOKEN="t", SUBM_ROLE="worker", SUBM_STOP_GRACE="3", SUBM_AM_DISCOVERY=am.url + "/am",
                   LOCAL_DIRS=os.path.join(os.path.dirname(executor), "appcache"),
                   SKEIN_CONTAINER_ID=f"worker_{i}", NM_HOST="127.0.0.1")
        procs.append(subprocess.Popen([*argv_prefix, executor], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir()))
    time.sleep(max(0.0, t0 + publish_after - time.time()))
    t_publish = time.time()
    am.published = True
    for p in procs:
        p.wait(60)
    am.server.shutdown()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = max(am.registered.values()) if len(am.registered) == n else float("nan")
    return {"launch -> last registered": last - t0, "publish -> last registered": last - t_publish,
            "cpu ms per executor": cpu / n * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--publish", default="1.5-4.5", help="seconds until the AM's URL is published: LOW-HIGH")
    parser.add_argument("--old-ref", default="631a218")
    parser.add_argument("--old-flags", default="", help="interpreter flags for the old executor (e.g. -S)")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="subm-bench-exec-") as tmp:
        old = Path(tmp) / "executor.py"
        (Path(tmp) / "appcache").mkdir()  # LOCAL_DIRS beside each executor, as YARN gives
        for name in ("executor", "proctree", "nvml", "am_client", "envcache"):  # the siblings, where it had them
            shown = subprocess.run(["git", "-C", str(REPO), "show", f"{args.old_ref}:submarine_py/runtime/{name}.py"],
                                   capture_output=True, text=True)
            if shown.returncode == 0:
                (Path(tmp) / f"{name}.py").write_text(shown.stdout)
        sys.path.insert(0, str(REPO))
        from submarine_py.executor.bundle import bundle_source

        new = Path(tmp) / "new" / "subm_executor.py"  # as YARN ships it: one file (bundle.py)
        (new.parent / "appcache").mkdir(parents=True)
        new.write_text(bundle_source())
        old_flags = args.old_flags.split()
        variants = {f"{args.old_ref} (python {' '.join(old_flags)})": (str(old), [args.python, *old_flags]),
                    "this tree (bundle, python -S)": (str(new), [args.python, "-S"])}
        results: Dict[str, List[Dict[str, float]]] = {k: [] for k in variants}
        low, high = (float(x) for x in args.publish.split("-"))
        for rep in range(args.reps):
            publish = random.uniform(low, high)
            for name in (list(variants) if rep % 2 == 0 else list(variants)[::-1]):
                executor, prefix = variants[name]
                results[name].append(one_run(executor, prefix, args.n, publish))
                print(f"rep {rep + 1} {name}: {results[name][-1]}", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(f"# {args.n} executors at once, AM published {args.publish} s after, {args.reps} reps, medians (s); "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    print("| executor | launch -> last registered | publish -> last registered | CPU per executor |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        a = statistics.median(r["launch -> last registered"] for r in runs)
        b = statistics.median(r["publish -> last registered"] for r in runs)
        worst = max(r["publish -> last registered"] for r in runs)
        cpu = statistics.median(r["cpu ms per executor"] for r in runs)
        print(f"| {name} | {a:.2f} | {b:.2f} (worst {worst:.2f}) | {cpu:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
