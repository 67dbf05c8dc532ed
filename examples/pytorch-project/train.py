"""Train the spirals classifier with DistributedDataParallel (gloo, CPU).

Written as for ``torchrun``: the rendezvous comes from the environment (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK), the data and config are files beside this
script, and a snapshot lets a restarted run resume instead of starting over:

    torchrun --nproc-per-node 2 train.py --snapshot-path /tmp/spirals.pt
    subm run job.yaml                                   # the same program, through subm
"""
from __future__ import annotations

import argparse
import os
import tomllib

import torch
import torch.distributed as dist

from trainer.data import load_points, make_loader
from trainer.loop import Trainer
from trainer.model import make_model


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="config.toml")
    p.add_argument("--snapshot-path", default="snapshot.pt",
                   help="a path every rank sees, or an hdfs:// (viewfs://, ...) URI")
    p.add_argument("--fail-at-epoch", type=int, default=0,
                   help="demo: the last rank exits with code 3 after this epoch, unless resumed (0: never)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")  # env:// rendezvous
    rank = dist.get_rank() if distributed else 0
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():  # as GPU programs do; under subm LOCAL_RANK names a device this task sees
        torch.cuda.set_device(local_rank)
    torch.manual_seed(config["train"]["seed"])
    dataset = load_points(config["data"]["path"])
    loader = make_loader(dataset, config["data"]["batch_size"], distributed)
    model = make_model(config["model"]["hidden"], classes=int(dataset.tensors[1].max()) + 1)
    trainer = Trainer(model, loader, config["train"]["lr"], args.snapshot_path,
                      config["train"]["save_every"], rank, args.fail_at_epoch)
    trainer.train(config["train"]["epochs"])
    if distributed:
        dist.barrier()  # every rank is done before the store's host (rank 0) goes away
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
