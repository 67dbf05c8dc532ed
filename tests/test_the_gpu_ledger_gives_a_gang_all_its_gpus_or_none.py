"""The machine-wide GPU ledger of the local backend (``backends/local/gpu_ledger.py``).

Every local job's AM reserves its gang's GPUs in one JSON file under ``$SUBM_HOME/local``,
locked with ``flock``: all of them at once or none, oldest waiting job first, and entries of
an AM that died are taken back by the next one to open the ledger.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest

from submarine_py.backends.local.gpu_ledger import GpuLedger, ledger_path

pytestmark = pytest.mark.unit

TWO = ["0", "1"]


def ledger(subm_home, job, devices=TWO, pid=None) -> GpuLedger:
    return GpuLedger(ledger_path(str(subm_home)), devices, job, pid=pid)


def test_a_gang_gets_every_gpu_it_asks_for_or_none(subm_home):
    a, b = ledger(subm_home, "job-a"), ledger(subm_home, "job-b")
    assert a.reserve({"worker:0": 1}, submitted_at=1.0).gpus == {"worker:0": ["0"]}
    refused = b.reserve({"worker:0": 1, "worker:1": 1}, submitted_at=2.0)
    assert not refused.granted and refused.gpus == {}
    assert refused.why == "waiting for 2 GPUs: 1 free on this machine (GPU 0 held by job job-a)"
    assert {g: e["job"] for g, e in a.holders().items()} == {"0": "job-a"}  # GPU 1 not taken half-way
    a.release()
    assert b.reserve({"worker:0": 1, "worker:1": 1}, submitted_at=2.0).gpus == {"worker:0": ["0"], "worker:1": ["1"]}


def test_tasks_without_gpus_need_nothing(subm_home):
    a = ledger(subm_home, "job-a")
    assert a.reserve({"worker:0": 2}, submitted_at=1.0).granted
    assert ledger(subm_home, "job-b").reserve({"evaluator:0": 0}, submitted_at=2.0).gpus == {}


def test_a_gang_started_again_gets_its_own_gpus_back_and_never_waits_for_itself(subm_home):
    a = ledger(subm_home, "job-a")
    first = a.reserve({"worker:0": 1, "worker:1": 1}, submitted_at=1.0).gpus
    assert a.bind("worker:0", "worker-0-e1") == first["worker:0"]
    assert a.bind("worker:1", "worker-1-e2") == first["worker:1"]
    # Its executors ended (a gang restart): the same gang is admitted again, on the same devices.
    assert a.reserve({"worker:0": 1, "worker:1": 1}, submitted_at=1.0).gpus == first
    assert ledger(subm_home, "job-b").reserve({"worker:0": 1}, submitted_at=2.0).why.startswith(
        "waiting for 1 GPU: 0 free on this machine")


def test_an_executor_given_back_frees_only_its_own_gpus(subm_home):
    a = ledger(subm_home, "job-a")
    a.reserve({"worker:0": 1, "worker:1": 1}, submitted_at=1.0)
    a.bind("worker:0", "worker-0-e1")
    a.bind("worker:1", "worker-1-e2")
    assert a.release("worker-0-e1") == ["0"]
    assert a.release("worker-0-e1") == []
    assert {g: e["task"] for g, e in a.holders().items()} == {"1": "worker:1"}
    # A replacement under a gang that is up takes free devices at once, queue or not.
    assert ledger(subm_home, "job-b").reserve({"worker:0": 2}, submitted_at=0.5).granted is False
    assert a.reserve({"worker:0": 1}, submitted_at=1.0, queue=False).gpus == {"worker:0": ["0"]}


def test_gpus_of_an_am_that_died_are_taken_back(subm_home):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = ledger(subm_home, "job-dead", pid=holder.pid)
        assert dead.reserve({"worker:0": 2}, submitted_at=1.0).granted
        other = ledger(subm_home, "job-b")
        assert not other.reserve({"worker:0": 2}, submitted_at=2.0).granted
    finally:
        holder.kill()
        holder.wait()
    assert other.reserve({"worker:0": 2}, submitted_at=2.0).gpus == {"worker:0": ["0", "1"]}
    entries = json.loads(open(ledger_path(str(subm_home))).read())
    assert {e["job"] for e in entries["gpus"].values()} == {"job-b"} and entries["waiting"] == {}


def test_a_reused_pid_is_not_taken_for_the_am_that_held_the_gpus(subm_home):
    stale = ledger(subm_home, "job-old", pid=os.getpid())
    stale.pid_started = "1"  # this pid, but a process that started at another time
    assert stale.reserve({"worker:0": 2}, submitted_at=1.0).granted
    assert ledger(subm_home, "job-new").reserve({"worker:0": 2}, submitted_at=2.0).granted


def test_older_waiting_jobs_go_first_once_younger_ones_have_passed_them_long_enough(subm_home):
    holder, old, young = ledger(subm_home, "job-h"), ledger(subm_home, "job-old"), ledger(subm_home, "job-young")
    holder.reserve({"worker:0": 1}, submitted_at=90.0)
    assert not old.reserve({"worker:0": 2}, submitted_at=100.0, now=101.0).granted  # listed as waiting
    # Backfill: a younger 1-GPU job may use the free GPU while the old job has waited < 60 s ...
    passing = young.reserve({"worker:0": 1}, submitted_at=110.0, now=130.0)
    assert passing.granted
    young.release()
    # ... but not after: the GPU it would take is kept for the older gang.
    kept = young.reserve({"worker:0": 1}, submitted_at=110.0, now=200.0)
    assert not kept.granted
    assert kept.why == ("waiting for 1 GPU: 1 free on this machine (GPU 0 held by job job-h), kept for 1 older job "
                        "waiting first (job-old, 2 GPUs, waiting 100 s)")
    holder.release()
    assert old.reserve({"worker:0": 2}, submitted_at=100.0, now=201.0).granted


def _take_one(path, job, results, go):
    got = GpuLedger(path, ["0", "1", "2", "3"], job).reserve({"worker:0": 1}, submitted_at=1.0)
    results.put((job, got.gpus.get("worker:0", [])))
    go.wait(60)  # hold the GPU (the process is the holder) until the test has looked


def test_processes_racing_for_the_gpus_never_share_one(subm_home):
    ctx = multiprocessing.get_context("fork")
    results, go = ctx.Queue(), ctx.Event()
    path = ledger_path(str(subm_home))
    procs = [ctx.Process(target=_take_one, args=(path, f"job-{i}", results, go)) for i in range(8)]
    for p in procs:
        p.start()
    try:
        got = dict(results.get(timeout=60) for _ in procs)
        taken = [g for gpus in got.values() for g in gpus]
        assert sorted(taken) == ["0", "1", "2", "3"]  # four winners, one device each
        holders = GpuLedger(path, ["0", "1", "2", "3"], "observer").holders()
        assert {g: e["job"] for g, e in holders.items()} == {gpus[0]: job for job, gpus in got.items() if gpus}
    finally:
        go.set()
        for p in procs:
            p.join(30)
    assert GpuLedger(path, ["0", "1", "2", "3"], "after").reserve({"worker:0": 4}, submitted_at=2.0).granted
