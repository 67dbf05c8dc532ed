"""Checks TF_CONFIG as tf.distribute reads it (json only, so no TensorFlow import).

With --forever (the ps) it then listens on its port until stopped; the chief and the workers
connect to the ps before they finish, as TensorFlow's would, so the ps has checked its config
before the job can succeed and stop it.
"""
import json
import os
import socket
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
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # beside the executor, which holds it
    server.bind(("", int(os.environ["SUBM_PORT"])))
    server.listen()
    while True:
        server.accept()[0].close()
elif role in ("chief", "worker"):
    host, port = cluster["ps"][0].rsplit(":", 1)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    print(f"{role}:{index} reached ps:0 at {host}:{port}", flush=True)
