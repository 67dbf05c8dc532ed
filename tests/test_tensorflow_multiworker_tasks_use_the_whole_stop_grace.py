"""What docs/restarts.md says of TensorFlow and the stop grace, checked with real TensorFlow:
once a MultiWorkerMirroredStrategy exists, TensorFlow's runtime catches SIGTERM (its preemption
notifier, for PreemptionCheckpointHandler), so a program that does not use that handler trains
on through the grace and is stopped by the SIGKILL after it: exit code 137, every time."""
import importlib.util
import re
import time
from pathlib import Path

import pytest

from conftest import run_json, subm, wait_for, write_job

pytestmark = [pytest.mark.tensorflow, pytest.mark.local,
              pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")]

TRAINS = """\
import os, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.zeros([8, 1]))

@tf.function
def step(x):
    def replica(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        [grad] = tf.distribute.get_replica_context().all_reduce("sum", tape.gradient(loss, [w]))
        w.assign_sub(0.01 * grad)
    strategy.run(replica, args=(x,))

n = 0
while True:
    step(tf.random.normal([32, 8]))
    n += 1
    if n % 20 == 0:
        print(f"step {n} at {time.time():.3f}", flush=True)
"""


def test_a_multiworker_task_trains_through_sigterm_until_the_sigkill(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: mwms-stop
        framework: tensorflow
        timeouts: {stop_grace_seconds: 2}
        roles:
          worker: {instances: 2, command: python train.py, env: {OMP_NUM_THREADS: "1"}}
        files: {train.py: train.py}
    """, {"train.py": TRAINS})
    rc, out, err = subm("run", str(job), "--backend", "local", "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    logs = subm_home / "local" / app_id / "logs"
    wait_for(lambda: all("step" in (logs / f"worker-{i}.stdout").read_text() for i in (0, 1)), timeout=300,
             what="both workers to train")
    killed_at = time.time()
    rc, report, _ = run_json("kill", app_id)
    assert report["state"] == "KILLED"
    for task in report["tasks"]:
        assert task["exit_code"] == 137, report  # SIGKILL: SIGTERM did not end it
        stderr = Path(task["log"]).with_suffix(".stderr").read_text()
        assert "the task did not exit within the 2 s grace after SIGTERM: sent SIGKILL" in stderr
        # It trained on after SIGTERM (sent within a fraction of a second of the kill).
        steps = [float(t) for t in re.findall(r"^step \d+ at ([\d.]+)$", Path(task["log"]).read_text(), re.M)]
        assert max(steps) > killed_at + 1.0, (killed_at, steps[-3:])
