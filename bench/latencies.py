#!/usr/bin/env python3
"""How soon a refusal or a give-up comes, each beside its floor measured in the same run. No YARN.

The tests say what happens (tests/test_job_files_load_safely_and_round_trip.py,
tests/test_finding_and_waiting_for_the_resource_manager.py, tests/test_subm_wait_exits_like_subm_run.py,
tests/test_the_python_api_does_what_subm_does.py); this says how long it takes. Seconds,
medians of ``--reps``, each figure and its floor taking turns:

* **alias bomb**: ``load_job`` of a job file holding a 9 x 9 alias bomb (about 387 million nodes
  once expanded) until its ``SpecError``. Floor: ``yaml.compose`` of the same text (reading
  the nodes as written, which any loader must do). Peer: ``load_job`` of the ordinary job
  file ``examples/pytorch-ddp/job.yaml``.
* **RM give-up**: ``ResourceManager.app`` against a port where nothing listens, with
  ``SUBM_RM_WAIT`` ``--rm-wait`` (1 s), until its ``BackendError``. Floor: the wait itself plus
  the refused connections it makes (one each second and one at the end), each as long as one
  ``requests.get`` to that port, measured here.
* **subm wait --timeout**: ``subm wait APP --timeout T`` (``--wait-timeout``, 1 s), a new
  process, of a local job that sleeps, until it exits 124. Floor: T plus ``subm --version`` (the
  command line's own start-up, a new process too); ``python -c pass`` beside it; peer: T plus
  ``subm status APP`` (start-up, the backend's imports and one status: what ``wait`` does before
  its polls).
* **submarine_py.wait(timeout=)**: ``submarine_py.wait(APP, timeout=T)`` (``--api-timeout``,
  0.5 s) in this process until ``WaitTimeout``. Floor: T plus one ``submarine_py.status(APP)``
  (what each of its polls costs), measured here.

    python3 bench/latencies.py [--reps 7] [--rm-wait 1] [--wait-timeout 1] [--api-timeout 0.5]

The local job runs in a ``SUBM_HOME`` of its own and is killed on the way out. The figures are
comparable only within one run (docs/benchmarks.md, "latencies.py", keeps them).
"""
from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import requests  # noqa: E402
import yaml  # noqa: E402

from submarine_py.errors import BackendError, SpecError, WaitTimeout  # noqa: E402
from submarine_py.jobfile import load_job  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def medians(reps: int, *fns: Callable[[], object]) -> List[float]:
    """Each function's median time, the functions taking turns (load changes hit them alike)."""
    times: List[List[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, seen in zip(fns, times):
            seen.append(timed(fn))
    return [statistics.median(seen) for seen in times]


def fmt(seconds: float, sign: str = "") -> str:
    return f"{seconds:{sign}.4f}" if abs(seconds) < 0.1 else f"{seconds:{sign}.3f}"


def row(figure: str, seconds: float, floor_name: str, floor: float) -> None:
    print(f"| {figure} | {fmt(seconds)} | {floor_name} | {fmt(floor)} | {fmt(seconds - floor, '+')} |", flush=True)


# -- in this process ------------------------------------------------------------------------

def alias_bomb(folder: Path, levels: int = 9, width: int = 9) -> Path:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    path = folder / "bomb.yaml"
    path.write_text("name: bomb\nroles: {worker: {command: 'true'}}\n" + "\n".join(lines) + "\n")
    return path


def refused(path: Path) -> None:
    try:
        load_job(str(path))
    except SpecError as exc:
        assert "alias bomb" in str(exc), exc
        return
    raise AssertionError("the alias bomb was loaded")


def bench_alias_bomb(reps: int, folder: Path) -> None:
    bomb = alias_bomb(folder)
    text = bomb.read_text()
    ordinary = REPO / "examples" / "pytorch-ddp" / "job.yaml"
    refused(bomb)  # imports, caches: not timed
    load_job(str(ordinary))
    refusal, compose, ordinary_load = medians(reps, lambda: refused(bomb),
                                              lambda: yaml.compose(text, Loader=yaml.SafeLoader),
                                              lambda: load_job(str(ordinary)))
    row("alias bomb refused (`load_job`)", refusal, "`yaml.compose` of it", compose)
    row("alias bomb refused (`load_job`)", refusal, "`load_job` of examples/pytorch-ddp", ordinary_load)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def bench_rm_give_up(reps: int, wait: float) -> None:
    from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager

    url = f"http://127.0.0.1:{closed_port()}"

    def give_up() -> None:
        rm = ResourceManager(url, timeout=1, wait_seconds=wait, say=lambda line: None)
        try:
            rm.app("application_1_1")
        except BackendError:
            return
        raise AssertionError("something answered")

    def one_refusal() -> None:
        try:
            requests.get(url + "/ws/v1/cluster/info", timeout=1)
        except requests.ConnectionError:
            return

    tries = math.ceil(wait) + 1  # one at once, one after each second slept, one at the end
    given_up, connect = medians(reps, give_up, one_refusal)
    row(f"RM give-up (`SUBM_RM_WAIT={wait:g}`)", given_up, f"{wait:g} s + {tries} refused connections",
        wait + tries * connect)


# -- a local job that sleeps -----------------------------------------------------------------

SLEEPER = """\
    name: latencies-sleeper
    roles:
      worker:
        instances: 1
        resources: {memory: 128 MiB}
        command: sleep 600
"""


def subm_argv(*args: str) -> List[str]:
    return [sys.executable, "-m", "submarine_py.cli", *args]


def run(argv: Sequence[str], env: Dict[str, str], expect: int = 0) -> str:
    proc = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}, expected {expect}\n{proc.stderr[-2000:]}")
    return proc.stdout


def bench_waits(reps: int, folder: Path, cli_timeout: float, api_timeout: float) -> None:
    env = dict(os.environ, SUBM_HOME=str(folder / "subm-home"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    os.environ["SUBM_HOME"] = env["SUBM_HOME"]  # for submarine_py in this process
    job = folder / "sleeper.yaml"
    job.write_text(textwrap.dedent(SLEEPER))
    app_id = run(subm_argv("run", str(job), "--backend", "local", "--detach"), env).strip()
    try:
        import submarine_py

        deadline = time.monotonic() + 120
        while submarine_py.status(app_id).running < 1:
            if time.monotonic() > deadline:
                raise SystemExit(f"{app_id} did not start within 120 s")
            time.sleep(0.1)

        def cli_wait() -> None:
            run(subm_argv("wait", app_id, "--timeout", f"{cli_timeout:g}"), env, expect=124)

        def api_wait() -> None:
            try:
                submarine_py.wait(app_id, timeout=api_timeout)
            except WaitTimeout:
                return
            raise AssertionError("the job ended")

        waited, start_up, bare, status = medians(
            reps, cli_wait, lambda: run(subm_argv("--version"), env),
            lambda: run([sys.executable, "-c", "pass"], env), lambda: run(subm_argv("status", app_id), env))
        row(f"`subm wait --timeout {cli_timeout:g}` exits 124", waited,
            f"{cli_timeout:g} s + `subm --version`", cli_timeout + start_up)
        row(f"`subm wait --timeout {cli_timeout:g}` exits 124", waited,
            f"{cli_timeout:g} s + `python -c pass`", cli_timeout + bare)
        row(f"`subm wait --timeout {cli_timeout:g}` exits 124", waited,
            f"{cli_timeout:g} s + `subm status APP`", cli_timeout + status)
        api_waited, one_status = medians(reps, api_wait, lambda: submarine_py.status(app_id))
        row(f"`submarine_py.wait(timeout={api_timeout:g})` raises", api_waited,
            f"{api_timeout:g} s + one `submarine_py.status`", api_timeout + one_status)
    finally:
        run(subm_argv("kill", app_id), env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--rm-wait", type=float, default=1.0)
    parser.add_argument("--wait-timeout", type=float, default=1.0)
    parser.add_argument("--api-timeout", type=float, default=0.5)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, medians of {args.reps}, seconds", flush=True)
    print("| figure | seconds | floor or peer | seconds | difference |\n|---|---:|---|---:|---:|", flush=True)
    with tempfile.TemporaryDirectory(prefix="subm-latencies-") as tmp:
        folder = Path(tmp)
        log("alias bomb ...")
        bench_alias_bomb(args.reps, folder)
        log("ResourceManager give-up ...")
        bench_rm_give_up(args.reps, args.rm_wait)
        log("waits on a local job ...")
        bench_waits(args.reps, folder, args.wait_timeout, args.api_timeout)
    print(f"# load average after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
