"""History of YARN jobs on a real ResourceManager: a finished job appears once,
detached ones too (collected from the AM's subm-report.json through the NM's REST API).

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_finished_jobs_are_kept_in_history_on_yarn.py
"""
from __future__ import annotations

import getpass
import secrets
from pathlib import Path

import pytest
import requests

from conftest import YARN_CONF_DIR, require_yarn, run_json, wait_for, write_job

RM = require_yarn()



pytestmark = pytest.mark.yarn
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR}

JOB = """
    name: {name}
    roles:
      worker:
        instances: 2
        resources: {{memory: 512 MiB, vcores: 1, gpus: {gpus}}}
        command: python3 -c "import sys; sys.exit({code} if '$SUBM_INDEX' == '1' else 0)"
"""


def rm_state(app_id: str) -> str:
    resp = requests.get(f"{RM}/ws/v1/cluster/apps/{app_id}", headers={"Accept": "application/json"}, timeout=10)
    return resp.json()["app"]["state"]


def stored_rows(history: Path, app_id: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_table(p, columns=["app_id"]).column(0).to_pylist().count(app_id)
               for p in history.glob("*.parquet"))


def test_finished_yarn_jobs_appear_once_detached_ones_included(tmp_path, subm_home):
    tag = secrets.token_hex(3)
    waited_job = write_job(tmp_path / "a", JOB.format(name=f"hist-{tag}-ok", gpus=1, code=0))
    detached_job = write_job(tmp_path / "b", JOB.format(name=f"hist-{tag}-bad", gpus=0, code=4))

    rc, waited, err = run_json("run", str(waited_job), "--backend", "yarn", env=YARN, timeout=300)
    assert rc == 0, err
    rc, detached, err = run_json("run", str(detached_job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    wait_for(lambda: rm_state(detached["app_id"]) in ("FINISHED", "FAILED", "KILLED"), 300,
             "the detached application to end", interval=1)

    rc, rows, err = run_json("history", "--name", f"hist-{tag}-*", env=YARN, timeout=300)
    assert rc == 0, err
    assert [r["app_id"] for r in rows] == [waited["app_id"], detached["app_id"]]
    ok, bad = rows
    assert ok["state"] == "SUCCEEDED" and ok["backend"] == "yarn" and ok["queue"] == "default" and ok["user"]
    assert ok["submitted_at"] and ok["finished_at"] and ok["gang_ready_seconds"] is not None
    assert sorted((t["role"], t["index"], t["state"]) for t in ok["tasks"]) == [
        ("worker", 0, "SUCCEEDED"), ("worker", 1, "SUCCEEDED")]
    # The task held a yarn.io/gpu unit, but no NVML here: no samples, no noise.
    assert all(t["gpu"] is None for t in ok["tasks"])
    assert bad["state"] == "FAILED" and "worker:1 failed with exit code 4" in bad["diagnostics"]
    assert {t["index"]: t["exit_code"] for t in bad["tasks"]}[1] == 4

    rc, again, _ = run_json("history", "--name", f"hist-{tag}-*", env=YARN, timeout=300)
    assert [r["app_id"] for r in again] == [waited["app_id"], detached["app_id"]]
    # Stored once: one row in the whole dataset (on a busy cluster the first collection holds
    # more than 64 jobs, so one-job files may already be compacted into part files).
    assert stored_rows(subm_home / "history", detached["app_id"]) == 1
    rc, one, _ = run_json("history", detached["app_id"], "--no-collect", env=YARN)
    assert one["spec"]["name"] == f"hist-{tag}-bad"


def test_the_history_lives_on_hdfs_through_the_namenodes_web_address(tmp_path, subm_home):
    """SUBM_HISTORY=webhdfs://namenode:9870/...: a laptop without libhdfs.so or a Hadoop client
    keeps the history on the cluster's HDFS; another machine (here: another SUBM_HOME) reads it."""
    from submarine_py.backends.yarn.hadoop.conf import hadoop_conf

    http = hadoop_conf("hdfs-site.xml", YARN_CONF_DIR).get("dfs.namenode.http-address")
    if not http:
        pytest.skip(f"no dfs.namenode.http-address in {YARN_CONF_DIR}/hdfs-site.xml")
    tag = secrets.token_hex(3)
    history = f"webhdfs://{http}/tmp/subm-history-{tag}"
    job = write_job(tmp_path / "a", JOB.format(name=f"hist-{tag}-hdfs", gpus=0, code=0))
    env = dict(YARN, SUBM_HISTORY=history)
    rc, done, err = run_json("run", str(job), "--backend", "yarn", env=env, timeout=300)
    assert rc == 0, err
    elsewhere = dict(env, SUBM_HOME=str(tmp_path / "another-home"))
    rc, rows, err = run_json("history", "--name", f"hist-{tag}-*", env=elsewhere, timeout=120)
    assert rc == 0, err
    assert [(r["app_id"], r["state"]) for r in rows] == [(done["app_id"], "SUCCEEDED")]
    listing = requests.get(f"http://{http}/webhdfs/v1/tmp/subm-history-{tag}",
                           params={"op": "LISTSTATUS", "user.name": getpass.getuser()}, timeout=10).json()
    # (subm history also collected the rig's other finished jobs it lacked: one file each)
    assert f"{done['app_id']}.parquet" in [f["pathSuffix"] for f in listing["FileStatuses"]["FileStatus"]]
