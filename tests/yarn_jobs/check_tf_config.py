"""Checks TF_CONFIG as tf.distribute reads it (json only, so no TensorFlow import)."""
import json
import os
import sys
import time

config = json.loads(os.environ["TF_CONFIG"])
task, cluster = config["task"], config["cluster"]
role, index = os.environ["SUBM_ROLE"], int(os.environ["SUBM_INDEX"])
assert task == {"type": role, "index": index}, task
# The training cluster is chief + worker + ps; only the evaluator also sees itself in it.
expected = {"chief", "worker", "ps"} | ({"evaluator"} if role == "evaluator" else set())
assert set(cluster) == expected, cluster
assert [len(cluster[r]) for r in ("chief", "worker", "ps")] == [1, 2, 1], cluster
own = cluster[role][index]
assert own == f"{os.environ['SUBM_HOST']}:{os.environ['SUBM_PORT']}", (own, os.environ["SUBM_PORT"])
print(f"TF_CONFIG ok for {role}:{index}: {json.dumps(config, sort_keys=True)}", flush=True)
if "--forever" in sys.argv:
    while True:
        time.sleep(1)
