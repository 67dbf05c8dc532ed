"""``pip install -e '.[tensorflow]'`` is enough for TensorFlow jobs that write summaries and
serve them: the extra brings TensorBoard, which tensorflow-cpu no longer requires (2.21 does
not), and without which ``tf.summary`` raises "TensorBoard is not installed"."""
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_json, write_job

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

# The chief writes summaries where every task sees them, then asks TensorBoard (its address is
# in SUBM_CLUSTER_SPEC) for them until it serves them.
WRITES_SUMMARIES = """\
import json, os, time, urllib.request
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
logdir = os.path.join(os.environ["SUBM_SHARED_DIR"], "logs")
with tf.summary.create_file_writer(logdir).as_default():
    for step in range(3):
        tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
[address] = json.loads(os.environ["SUBM_CLUSTER_SPEC"])["tensorboard"]
url = f"http://{address}/data/plugin/scalars/tags"
for _ in range(600):
    try:
        tags = urllib.request.urlopen(url, timeout=5).read().decode()
        if "loss" in tags:
            print("tensorboard serves", tags, flush=True)
            break
    except OSError:
        pass
    time.sleep(0.5)
else:
    raise SystemExit(f"TensorBoard at {address} never served the summaries")
"""


@pytest.mark.unit
@pytest.mark.skipif(tomllib is None, reason="tomllib: Python 3.11+")
def test_the_tensorflow_extra_names_tensorboard():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"tensorboard\b", req) for req in extras["tensorflow"]), extras["tensorflow"]


@pytest.mark.tensorflow
@pytest.mark.local
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tensorboard") is None,
                    reason="needs the tensorflow extra")
def test_a_chief_writes_summaries_and_a_tensorboard_role_serves_them(tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: summaries
        framework: tensorflow
        roles:
          chief: {command: python chief.py, env: {OMP_NUM_THREADS: "1"}}
          tensorboard:
            command: python -m tensorboard.main --logdir $SUBM_SHARED_DIR/logs --port $SUBM_PORT --bind_all
        files: {chief.py: chief.py}
    """, {"chief.py": WRITES_SUMMARIES})
    rc, report, err = run_json("run", str(job), "--backend", "local", env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=400)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{err}"
    tasks = {t["role"]: t for t in report["tasks"]}
    assert tasks["tensorboard"]["state"] == "STOPPED" and not tasks["tensorboard"]["tracked"]
    assert "tensorboard serves" in Path(tasks["chief"]["log"]).read_text()
