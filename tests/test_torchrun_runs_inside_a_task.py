"""A user who runs ``torchrun`` inside each task (one process per task: torchrun starts the rest).

The executor of the rank-0 task holds the port it registered (MASTER_PORT) with a bound, not
listening socket until the framework takes it; torchrun's agent on node 0 binds its store (a
c10d TCPStore, static rendezvous) on that very port, which works because both set SO_REUSEADDR,
and nothing else can take the port in between. The line is the one docs/processes.md gives.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import run_json, write_job

pytestmark = pytest.mark.torch

#: torchrun's workers: their environment, and one all_reduce over gloo (world 4).
WORKER = """\
import json, os
import torch
import torch.distributed as dist

names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")
print("env " + json.dumps({k: os.environ.get(k) for k in names}), flush=True)
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {value.item():g}", flush=True)
dist.destroy_process_group()
"""

#: The line of docs/processes.md: GROUP_WORLD_SIZE and GROUP_RANK are the job's node count and
#: this task's node rank.
TORCHRUN = ("torchrun --nnodes=$GROUP_WORLD_SIZE --node_rank=$GROUP_RANK "
            "--nproc_per_node=2 --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT "
            "--rdzv_backend=static worker.py")


@pytest.mark.unit
@pytest.mark.parametrize("libuv", [True, False], ids=["libuv-store", "classic-store"])
def test_the_port_an_executor_holds_refuses_others_but_takes_c10ds_store(libuv):
    """Held: bound with SO_REUSEADDR, not listening. A bind without SO_REUSEADDR is refused
    (and the kernel hands the port to no ``bind(0)``); c10d's TCPStore, which sets it, binds."""
    import datetime
    import socket

    import torch.distributed as dist

    from submarine_py.executor.am_client import PortReservation

    held = PortReservation()
    try:
        other = socket.socket()
        with pytest.raises(OSError, match="in use"):
            other.bind(("", held.port))
        other.close()
        store = dist.TCPStore("127.0.0.1", held.port, 1, True, datetime.timedelta(seconds=10), use_libuv=libuv)
        store.set("key", "value")
        assert store.get("key") == b"value"
        del store
    finally:
        held.release()


@pytest.mark.local
def test_torchrun_in_each_of_two_tasks_binds_the_held_port_and_all_reduces_over_four_workers(
        tmp_path, subm_home, no_leftovers):
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists() and not shutil.which("torchrun"):
        pytest.skip("no torchrun beside this interpreter")
    job = write_job(tmp_path / "job", f"""\
        name: torchrun-inside
        framework: pytorch
        roles:
          worker:
            instances: 2
            resources: {{memory: 1 GiB}}
            command: {TORCHRUN}
            env: {{OMP_NUM_THREADS: "1"}}
        files: {{worker.py: worker.py}}
    """, {"worker.py": WORKER})
    rc, report, _ = run_json("run", str(job), "--backend", "local", timeout=300)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", report["diagnostics"]
    tasks = sorted(report["tasks"], key=lambda t: t["index"])
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    master_host, master_port = re.search(r"worker:0 registered at (\S+):(\d+)", am_log).groups()
    ranks = []
    for task in tasks:
        out = Path(task["log"]).read_text()
        envs = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("env ")]
        assert len(envs) == 2 and out.count("of 4: sum 6") == 2, out + Path(task["log"][:-6] + "stderr").read_text()
        # torchrun's own ranks: node rank = the task's index; the store on the port the
        # rank-0 task's executor registered (and held until torchrun bound it).
        assert {e["GROUP_RANK"] for e in envs} == {str(task["index"])}
        assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {(master_host, master_port)}
        ranks += [int(e["RANK"]) for e in envs]
    assert sorted(ranks) == [0, 1, 2, 3]
