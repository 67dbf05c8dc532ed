"""A PyTorch task is one node in torchrun's terms: each of its processes gets what
``torchrun --nnodes=N --node_rank=g --nproc_per_node=P`` gives its worker of the same local rank.

The first test runs the real torchrun (static rendezvous, one torchrun per node on loopback,
all started together) with a script that dumps its environment, and compares every variable
torchrun adds with ``Plan.process_envs`` for the same shape. The variables torchrun sets that
we deliberately do not copy are listed below with the reason; a variable a future torch adds
fails the test until it is placed in one list or the other.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan

#: What torchrun gives each worker and each of our processes gets, the same value.
CONTRACT = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    # torchrun's default, which the environment (for us: the role's env) may override:
    "OMP_NUM_THREADS",
)
#: What torchrun sets that we do not copy, and why (frameworks.PyTorch says it too).
NOT_COPIED = {
    "TORCHELASTIC_USE_AGENT_STORE": "True under torchrun: its agent hosts the TCPStore and every "
                                    "worker's env:// connects as a client. We have no agent: rank 0 "
                                    "hosts the store, which env:// does only when this is not True "
                                    "(we set False)",
    "TORCHELASTIC_ERROR_FILE": "where @record writes a failed worker's error for the agent to read; "
                               "no agent reads it here (the executor quotes stderr)",
    "TORCHELASTIC_SIGNALS_TO_HANDLE": "the agent's own setting (which signals it forwards), left in "
                                      "its environment; workers do not read it",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "torchrun's default 1: with it, torch 2.13 gloo ranks that had "
                                       "finished aborted at exit under load ('terminate called without "
                                       "an active exception', 3 of 22 pytorch-ddp runs against 0 of 28 "
                                       "without); a role's env can still set it for NCCL jobs",
}
#: Ours and not torchrun's.
OURS_ONLY = ("NODE_RANK",)  # = GROUP_RANK: PyTorch Lightning's name for it

#: (nodes, processes per node); the 3-node shape has a master, as a job with a master and
#: two workers: the master is node 0.
SHAPES = [(1, 1), (2, 1), (2, 2), (3, 2)]
JOB_ID = "application_1700000000000_0042"
MAX_RESTARTS = 3

DUMP = """\
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["GROUP_RANK"] + "-" + os.environ["LOCAL_RANK"] + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_of(nodes: int, processes: int) -> dict:
    roles = {"worker": {"instances": nodes - 1, "processes": processes, "command": "python dump.py"},
             "master": {"processes": processes, "command": "python dump.py"}}
    if nodes < 3:
        roles = {"worker": {"instances": nodes, "processes": processes, "command": "python dump.py"}}
    return {"name": "shape", "framework": "pytorch", "restart": {"max_restarts": MAX_RESTARTS}, "roles": roles}


def our_envs(nodes: int, processes: int, master_port: int) -> Dict[Tuple[int, int], Dict[str, str]]:
    """(group rank, local rank) -> the environment our plan gives that process."""
    plan = make_plan(spec_from_dict(job_of(nodes, processes)))
    node_order = [t for role in ("master", "worker") for t in plan.tasks if t.role == role]
    addresses = {(t.role, t.index): f"127.0.0.1:{master_port if g == 0 else 40000 + g}"
                 for g, t in enumerate(node_order)}
    cluster = plan.cluster_spec(addresses)
    out = {}
    for g, task in enumerate(node_order):
        for local_rank, env in enumerate(plan.process_envs(task, cluster, JOB_ID, attempt=0)):
            out[(g, local_rank)] = env
    return out


Shape = Tuple[int, int]
Where = Tuple[int, int]  # (group rank, local rank)


def torchrun_envs(tmp_path: Path) -> Tuple[Dict[Shape, Tuple[int, Dict[Where, Dict[str, str]]]], Dict[str, str]]:
    """Run every shape's torchruns at once: ({shape: (its master port, {(group rank, local rank):
    the worker's environment})}, the environment torchrun itself ran in)."""
    script = tmp_path / "dump.py"
    script.write_text(DUMP)
    # A small, known environment: nothing of torchrun's contract inherited (no OMP_NUM_THREADS,
    # no TORCH_NCCL_ASYNC_ERROR_HANDLING), a UTF-8 locale (no coercion variable from Python),
    # and torchrun's log folders under tmp_path.
    parent = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TMPDIR": str(tmp_path),
              "HOME": os.environ.get("HOME", str(tmp_path))}
    ports = {shape: free_port() for shape in SHAPES}
    procs: List[subprocess.Popen] = []
    try:
        for (nodes, nproc), port in ports.items():
            (tmp_path / f"{nodes}x{nproc}").mkdir()
            for node_rank in range(nodes):
                cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
                       f"--node_rank={node_rank}", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
                       f"--master_port={port}", "--rdzv_backend=static", f"--rdzv_id={JOB_ID}",
                       f"--max_restarts={MAX_RESTARTS}", str(script), str(tmp_path / f"{nodes}x{nproc}")]
                with open(tmp_path / f"{nodes}x{nproc}-node{node_rank}.log", "w") as log:
                    procs.append(subprocess.Popen(cmd, env=parent, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = "\n".join(f"--- {f.name}\n{f.read_text()}" for f in sorted(tmp_path.glob("*.log")))
    assert all(p.returncode == 0 for p in procs), logs
    result = {}
    for (nodes, nproc), port in ports.items():
        found = {}
        for f in (tmp_path / f"{nodes}x{nproc}").glob("*.json"):
            group_rank, local_rank = f.stem.split("-")
            found[(int(group_rank), int(local_rank))] = json.loads(f.read_text())
        result[(nodes, nproc)] = (port, found)
    return result, parent


@pytest.mark.local
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_every_process_gets_what_a_real_torchrun_gives_its_worker(tmp_path):
    runs, parent = torchrun_envs(tmp_path)
    for (nodes, nproc), (port, theirs) in runs.items():
        assert sorted(theirs) == [(g, i) for g in range(nodes) for i in range(nproc)], (nodes, nproc)
        ours = our_envs(nodes, nproc, port)
        assert sorted(ours) == sorted(theirs)
        for where, worker in theirs.items():
            added = {k: v for k, v in worker.items() if parent.get(k) != v}
            unknown = set(added) - set(CONTRACT) - set(NOT_COPIED)
            assert not unknown, f"torchrun sets {sorted(unknown)}: copy them, or say in NOT_COPIED why not"
            mine = ours[where]
            shape = f"{nodes} nodes x {nproc}, node {where[0]} process {where[1]}"
            for name in CONTRACT:
                assert mine.get(name) == added.get(name), f"{shape}: {name} ours {mine.get(name)!r}, " \
                                                          f"torchrun's {added.get(name)!r}"
            assert mine["NODE_RANK"] == added["GROUP_RANK"]
            assert mine["TORCHELASTIC_USE_AGENT_STORE"] == "False" and "TORCHELASTIC_ERROR_FILE" not in mine


# -- the contract, without torchrun ----------------------------------------------------------

def envs_of(data: dict, attempt: int = 0) -> Dict[str, List[Dict[str, str]]]:
    plan = make_plan(spec_from_dict(data))
    cluster = plan.cluster_spec({(t.role, t.index): f"h{n}:{100 + n}" for n, t in enumerate(plan.tasks)})
    return {t.id: plan.process_envs(t, cluster, "job_1", attempt) for t in plan.tasks}


@pytest.mark.unit
def test_nodes_may_differ_in_processes_as_torchruns_slow_path_allows():
    envs = envs_of({"name": "x", "framework": "pytorch", "roles": {
        "master": {"command": "t"}, "worker": {"instances": 2, "processes": 3, "command": "t"}}})
    ranks = {tid: [(e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"]) for e in es]
             for tid, es in envs.items()}
    assert ranks == {"master:0": [("0", "0", "1", "0")],
                     "worker:0": [("1", "0", "3", "1"), ("2", "1", "3", "1"), ("3", "2", "3", "1")],
                     "worker:1": [("4", "0", "3", "2"), ("5", "1", "3", "2"), ("6", "2", "3", "2")]}
    assert {e["WORLD_SIZE"] for es in envs.values() for e in es} == {"7"}
    assert {e["GROUP_WORLD_SIZE"] for es in envs.values() for e in es} == {"3"}


@pytest.mark.unit
def test_the_restart_count_is_the_tasks_attempt_and_the_run_id_the_job():
    (env,) = envs_of({"name": "x", "framework": "pytorch", "restart": {"max_restarts": 5},
                      "roles": {"worker": {"command": "t"}}}, attempt=2)["worker:0"]
    assert (env["TORCHELASTIC_RESTART_COUNT"], env["SUBM_ATTEMPT"]) == ("2", "2")
    assert (env["TORCHELASTIC_MAX_RESTARTS"], env["TORCHELASTIC_RUN_ID"]) == ("5", "job_1")


@pytest.mark.unit
def test_several_processes_get_one_openmp_thread_unless_the_role_says_otherwise():
    roles = {"master": {"processes": 2, "command": "t"},
             "worker": {"processes": 2, "command": "t", "env": {"OMP_NUM_THREADS": "4",
                                                                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}}}
    envs = envs_of({"name": "x", "framework": "pytorch", "roles": roles})
    assert [(e["OMP_NUM_THREADS"], e.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")) for e in envs["master:0"]] == [("1", None)] * 2
    assert [(e["OMP_NUM_THREADS"], e["TORCH_NCCL_ASYNC_ERROR_HANDLING"]) for e in envs["worker:0"]] == [("4", "3")] * 2
    one = envs_of({"name": "x", "framework": "pytorch", "roles": {"worker": {"command": "t"}}})
    assert "OMP_NUM_THREADS" not in one["worker:0"][0]  # as torchrun with --nproc_per_node=1


@pytest.mark.unit
def test_a_roles_env_cannot_change_a_rank():
    (env,) = envs_of({"name": "x", "framework": "pytorch", "roles": {
        "worker": {"command": "t", "env": {"RANK": "7", "TORCHELASTIC_USE_AGENT_STORE": "True"}}}})["worker:0"]
    assert (env["RANK"], env["TORCHELASTIC_USE_AGENT_STORE"]) == ("0", "False")


@pytest.mark.unit
def test_tensorboard_gets_none_of_torchruns_variables():
    envs = envs_of({"name": "x", "framework": "pytorch", "roles": {
        "worker": {"processes": 2, "command": "t"}, "tensorboard": {"command": "tensorboard"}}})
    (tb,) = envs["tensorboard:0"]
    assert not set(tb) & (set(CONTRACT) | set(NOT_COPIED) | set(OURS_ONLY))
    assert (tb["SUBM_LOCAL_RANK"], tb["SUBM_LOCAL_WORLD_SIZE"]) == ("0", "1")
    assert {e["WORLD_SIZE"] for e in envs["worker:0"]} == {"2"}  # the tensorboard is no rank
