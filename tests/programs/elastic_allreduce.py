"""A PyTorch program that trains through changes of its world size: gloo all-reduce steps,
a checkpoint after each (rank 0, in the job's shared folder), resumed from it by every world.

Each step all-reduces a tensor of ones (the sum must be WORLD_SIZE) and prints
``step=N world=W rank=R sum=S``; each world starts by printing ``training world=W from
step=N at=<epoch seconds>``. ``ELASTIC_STEPS`` steps in all (default 20), each at least
``ELASTIC_STEP_SECONDS`` long (default 0.5). ``ELASTIC_FREEZE``: ``INDEX:STEP``: the task
``SUBM_INDEX`` INDEX, at step STEP, once in the job, freezes its executor (``EXECUTOR_PID``,
SIGSTOP: as silent as a dead machine) and dies, as a machine that fails does.
"""
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def checkpoint_path() -> str:
    return os.path.join(os.environ["SUBM_SHARED_DIR"], "elastic-checkpoint.json")


def load() -> int:
    try:
        with open(checkpoint_path()) as f:
            return int(json.load(f)["step"])
    except (OSError, ValueError, KeyError):
        return 0


def save(step: int) -> None:
    tmp = checkpoint_path() + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": step}, f)
    os.replace(tmp, checkpoint_path())


def main() -> int:
    steps = int(os.environ.get("ELASTIC_STEPS", "20"))
    pause = float(os.environ.get("ELASTIC_STEP_SECONDS", "0.5"))
    freeze = os.environ.get("ELASTIC_FREEZE", "")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    start = torch.tensor([load() if rank == 0 else 0])
    dist.broadcast(start, 0)
    step = int(start.item())
    said = f"training world={world} from step={step} at={time.time():.3f}"
    print(said, flush=True)
    if rank == 0:  # where a benchmark reads it, whichever backend ran the job
        with open(os.path.join(os.environ["SUBM_SHARED_DIR"], "elastic-worlds.txt"), "a") as f:
            f.write(said + "\n")
    while step < steps:
        began = time.monotonic()
        marker = os.path.join(os.environ["SUBM_SHARED_DIR"], "elastic-frozen")
        if freeze and not os.path.exists(marker):
            index, at = freeze.split(":")
            if os.environ.get("SUBM_INDEX") == index and step == int(at):
                open(marker, "w").close()
                print(f"freezing my executor and dying at step={step}", flush=True)
                os.kill(int(os.environ["EXECUTOR_PID"]), signal.SIGSTOP)
                os._exit(137)
        ones = torch.ones(4)
        dist.all_reduce(ones)
        total = int(ones[0].item())
        assert total == world, (total, world)
        step += 1
        if rank == 0:
            save(step)
        print(f"step={step} world={world} rank={rank} sum={total}", flush=True)
        time.sleep(max(0.0, pause - (time.monotonic() - began)))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
