"""Parameter-server training with tf.distribute.ParameterServerStrategy (CPU).

Every task reads its place in the cluster from TF_CONFIG, which subm writes
for it (``cluster``: chief, worker, ps addresses; ``task``: its type and index):

* ``ps`` and ``worker`` tasks start a ``tf.distribute.Server`` on their own
  address and serve until they are stopped. subm stops them once the chief has
  succeeded (``ps`` is untracked by default; the job marks ``worker`` with
  ``tracked: false`` because in this strategy workers never exit by themselves).
* the ``chief`` is the coordinator: it creates the variables (placed on the ps),
  schedules training steps on the workers and prints ``epoch N loss X``.

The model is a linear regression on synthetic data made from a fixed seed,
trained with plain SGD written out by hand (no Keras), so the example depends
on TensorFlow alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the logs readable
import tensorflow as tf  # noqa: E402

FEATURES = 8


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def synthetic_data(seed: int, n: int = 2048):
    """y = x . w_true + 0.5 + noise: the loss can fall to about the noise's variance (0.01)."""
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=(FEATURES, 1)).astype("float32")
    x = rng.normal(size=(n, FEATURES)).astype("float32")
    y = x @ w_true + 0.5 + 0.1 * rng.normal(size=(n, 1)).astype("float32")
    return x, y


def serve(resolver: tf.distribute.cluster_resolver.ClusterResolver) -> None:
    """ps and worker: host variables / run the steps the chief sends, until stopped."""
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc",
                                  start=True)
    print(f"{resolver.task_type}:{resolver.task_id} serving at {server.target}", flush=True)
    server.join()


def coordinate(resolver: tf.distribute.cluster_resolver.ClusterResolver, args: argparse.Namespace) -> None:
    started = time.monotonic()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    print(f"chief: {strategy.num_replicas_in_sync} worker(s), "
          f"{len(resolver.cluster_spec().as_dict().get('ps', []))} ps, tensorflow {tf.__version__}", flush=True)

    with strategy.scope():  # variables live on the parameter servers
        w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
        b = tf.Variable(0.0, name="b")

    x_all, y_all = synthetic_data(args.seed)

    def dataset_fn():  # runs on each worker
        ds = tf.data.Dataset.from_tensor_slices((x_all, y_all))
        return ds.shuffle(len(x_all), seed=args.seed).repeat().batch(args.batch_size)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(it):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(args.lr * gw)
            b.assign_sub(args.lr * gb)
            return loss

        x, y = next(it)
        return strategy.run(replica_fn, args=(x, y))

    for epoch in range(1, args.epochs + 1):
        results = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(args.steps)]
        coordinator.join()  # wait for every scheduled step
        loss = float(np.mean([r.fetch() for r in results]))
        print(f"epoch {epoch} loss {loss:.4f}", flush=True)
    print(f"done: final loss {loss:.4f} after {args.epochs} epochs, {time.monotonic() - started:.1f} s", flush=True)


def main() -> int:
    args = parse_args()
    if "TF_CONFIG" not in os.environ:
        print("TF_CONFIG is not set: run this with `subm run job.yaml`", file=sys.stderr)
        return 2
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        serve(resolver)
        return 0
    if resolver.task_type != "chief":
        print(f"nothing to do for a {resolver.task_type} task in this example", file=sys.stderr)
        return 2
    coordinate(resolver, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
