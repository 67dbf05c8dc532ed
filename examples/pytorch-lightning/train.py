"""A PyTorch Lightning program as its users write it: DDP over `num_nodes` x `devices`,
checkpoints every epoch and resumes from the last one. Nothing in it knows submarine-py: it
runs the same under `torchrun --nnodes=N --nproc_per_node=D train.py --num-nodes N --devices D`.

    python train.py --num-nodes 1 --devices 1            # alone, no launcher
    subm run job.yaml --backend local                     # 2 tasks x 1 process (num_nodes=2)
    subm run job.yaml --set processes=2 --set nodes=1     # 1 task x 2 processes (devices=2)
    subm run job.yaml --set fail_once_at=2                # a worker fails once: the gang
                                                          # restarts and resumes from the checkpoint
"""
import argparse
import os

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset


class LineFit(pl.LightningModule):
    """Fits y = 3x - 1 with one linear layer."""

    def __init__(self, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class FailOnce(Callback):
    """Raises at the start of one epoch on global rank 1, once (a marker file remembers)."""

    def __init__(self, epoch: int, marker: str):
        self.epoch, self.marker = epoch, marker

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == self.epoch and trainer.global_rank == min(1, trainer.world_size - 1) \
                and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError(f"injected failure at epoch {self.epoch} on rank {trainer.global_rank}")


class Report(Callback):
    """One line per epoch and rank: what the launcher gave this process."""

    def on_train_epoch_end(self, trainer, module):
        loss = trainer.callback_metrics.get("train_loss_epoch")
        print(f"epoch {trainer.current_epoch} rank {trainer.global_rank}/{trainer.world_size} "
              f"node {trainer.node_rank} local {trainer.local_rank} loss {float(loss):.4f}\n", end="", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--checkpoints", default=os.environ.get("SUBM_SHARED_DIR", ".") + "/checkpoints")
    parser.add_argument("--fail-once-at", type=int, default=-1)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 256).unsqueeze(1)
    data = DataLoader(TensorDataset(x, 3 * x - 1), batch_size=32, shuffle=True)
    callbacks = [ModelCheckpoint(dirpath=args.checkpoints, save_last=True), Report()]
    if args.fail_once_at >= 0:
        callbacks.append(FailOnce(args.fail_once_at, os.path.join(args.checkpoints, ".failed-once")))
    os.makedirs(args.checkpoints, exist_ok=True)
    trainer = pl.Trainer(accelerator="cpu", strategy="ddp", num_nodes=args.num_nodes, devices=args.devices,
                         max_epochs=args.epochs, callbacks=callbacks, logger=False,
                         enable_progress_bar=False, enable_model_summary=False)
    last = os.path.join(args.checkpoints, "last.ckpt")
    if os.path.exists(last) and trainer.global_rank == 0:
        print(f"resuming from {last}", flush=True)
    trainer.fit(LineFit(), data, ckpt_path=last if os.path.exists(last) else None)


if __name__ == "__main__":
    main()
