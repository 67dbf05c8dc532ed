"""A short training that logs its loss for TensorBoard, as users' programs do: each task into
its own run under SUBM_TENSORBOARD_DIR (``<role>-<index>``), with PyTorch's SummaryWriter
(``torch``: two workers, DDP over gloo) or ``tf.summary`` (``tensorflow``). Then it stays up
until ``done`` appears in the job's shared folder (or WAIT_SECONDS pass: exit 3), so that a test
can read the scalars from TensorBoard while the job runs.

    python tensorboard_scalars.py torch|tensorflow STEPS
"""
import os
import sys
import time


def train_torch(run: str, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.tensorboard import SummaryWriter

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    writer = SummaryWriter(run)
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    dist.destroy_process_group()


def train_tensorflow(run: str, steps: int) -> None:
    import tensorflow as tf

    tf.random.set_seed(0)
    x = tf.random.normal((64, 4))
    y = tf.matmul(x, tf.constant([[1.0], [-2.0], [0.5], [3.0]]))
    w = tf.Variable(tf.zeros((4, 1)))
    opt = tf.keras.optimizers.SGD(learning_rate=0.1)
    writer = tf.summary.create_file_writer(run)
    with writer.as_default():
        for step in range(steps):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            tf.summary.scalar("loss", loss, step=step)
    writer.close()


def main() -> int:
    kind, steps = sys.argv[1], int(sys.argv[2])
    run = os.path.join(os.environ["SUBM_TENSORBOARD_DIR"], f"{os.environ['SUBM_ROLE']}-{os.environ['SUBM_INDEX']}")
    (train_torch if kind == "torch" else train_tensorflow)(run, steps)
    print(f"{steps} losses written to {run}", flush=True)
    marker = os.path.join(os.environ["SUBM_SHARED_DIR"], "done")
    deadline = time.monotonic() + float(os.environ.get("WAIT_SECONDS", "120"))
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            print(f"no {marker} after {os.environ.get('WAIT_SECONDS', '120')} s", file=sys.stderr)
            return 3
        time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
