"""A small multi-worker TensorFlow program, written by `subm init --framework tensorflow`.

The chief and the workers fit the line y = 3x + 1 together with
tf.distribute.MultiWorkerMirroredStrategy, which reads the TF_CONFIG subm gives every
task (the cluster, and this task's type and index). Each task trains on its own random
samples; the variables' updates are averaged across tasks. Replace the model and the data
with yours; SUBM_ATTEMPT (0 at first) tells a restarted task to resume from a checkpoint.

Alone, without subm (no TF_CONFIG), it runs on this process only: ``python train.py``.
"""
import argparse
import json
import os

import tensorflow as tf


def main() -> None:
    parser = argparse.ArgumentParser(description="fit y = 3x + 1 with MultiWorkerMirroredStrategy")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task", {})
    me = f"{task.get('type', 'local')}:{task.get('index', 0)}"
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if config else tf.distribute.get_strategy()

    with strategy.scope():
        # MEAN: each task's update of a variable is averaged with the others'.
        w = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
        b = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)

    @tf.function
    def step(x, y):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(w * x + b - y))
            dw, db = tape.gradient(loss, [w, b])
            w.assign_sub(args.lr * dw)
            b.assign_sub(args.lr * db)
            return loss
        losses = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    tf.random.set_seed(task.get("index", 0) + (100 if task.get("type") == "chief" else 0))
    for epoch in range(args.epochs):
        for _ in range(8):
            x = tf.random.normal([64])
            loss = step(x, 3 * x + 1 + 0.05 * tf.random.normal([64]))
        print(f"{me} epoch {epoch + 1}/{args.epochs}: loss {float(loss):.4f}, "
              f"y = {float(w.numpy()):.2f}x + {float(b.numpy()):.2f}", flush=True)


if __name__ == "__main__":
    main()
