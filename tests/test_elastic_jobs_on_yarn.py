"""Elastic jobs on a real YARN (docs/elastic.md): a PyTorch gloo job whose workers are a range of
instances starts with ``min`` while the rest cannot be placed, grows when another job gives its
room back, and goes on with fewer when a node dies. Each worker asks 60 % of a node's memory,
so that one fits a node (any 3-node rig: CI's plain one); the node test needs a rig whose nodes
it may kill (see ``test_node_and_container_failures_on_yarn.py``).

    source $RIG_DIR/env.sh && python3 -m pytest -m yarn tests/test_elastic_jobs_on_yarn.py
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

from conftest import REPO, wait_for
from test_jobs_run_end_to_end_on_yarn import (  # noqa: F401 (apps: a fixture)
    JOBS, apps, detach, rm_app, rm_nodes, running_tasks, status, wait_final)
from test_node_and_container_failures_on_yarn import RIG, am_report, cluster_picture, events, needs_killable_rig, \
    node_sh

pytestmark = [pytest.mark.yarn, pytest.mark.torch]

PROGRAM = REPO / "tests" / "programs" / "elastic_allreduce.py"


@pytest.fixture(scope="module", autouse=True)
def three_nodes() -> None:
    """The rig these tests need, checked when one runs: other passes of CI collect the module."""
    if sum(1 for n in rm_nodes() if n.get("state") == "RUNNING") < 3:
        pytest.skip("needs a rig of 3 nodes (RIG_NODES=3)")


def worker_mb() -> int:
    """60 % of a node's memory: one worker a node, with room for the AMs beside it."""
    node_mb = max(int(n.get("usedMemoryMB", 0)) + int(n.get("availMemoryMB", 0)) for n in rm_nodes())
    return int(node_mb * 0.6)


def worlds(shared: Path, app_id: str) -> List[int]:
    """The world sizes the job trained with so far, in order (rank 0 writes them)."""
    path = shared / app_id / "elastic-worlds.txt"
    return [int(n) for n in re.findall(r"training world=(\d+)", path.read_text())] if path.exists() else []


def steps_in(shared: Path, app_id: str) -> int:
    path = shared / app_id / "elastic-checkpoint.json"
    text = path.read_text() if path.exists() else ""
    found = re.search(r'"step": (\d+)', text)
    return int(found.group(1)) if found else 0


def test_an_elastic_job_starts_with_min_while_gpus_are_taken_and_grows_when_they_come_back(shared_tmp_path, apps):
    marker = shared_tmp_path / "go"
    shared = shared_tmp_path / "shared"
    shared.mkdir()
    holder = detach(JOBS / "room-holder.yaml", apps, instances=2, memory_mb=worker_mb(), marker=marker)
    wait_for(lambda: running_tasks(holder, 2), timeout=180, what="the holder's 2 workers running (2 nodes)",
             interval=0.5)
    app_id = detach(JOBS / "elastic-allreduce.yaml", apps, min=1, max=3, memory_mb=worker_mb(), shared_dir=shared,
                    program=PROGRAM, steps=80)
    wait_for(lambda: worlds(shared, app_id) == [1] and steps_in(shared, app_id) >= 3, timeout=240,
             what="the job training with its min of 1 worker", interval=0.5, explain=lambda: cluster_picture(app_id))
    now = status(app_id)
    assert now["world_sizes"] == [1], now
    assert "would grow the world but waits: waiting for " in events(am_report(app_id))
    marker.touch()  # the holder ends: its 2 nodes' room goes back
    wait_for(lambda: 3 in worlds(shared, app_id), timeout=240, what="the job training with 3 workers",
             interval=0.5, explain=lambda: cluster_picture(app_id))
    assert wait_final(app_id, timeout=300)["finalStatus"] == "SUCCEEDED", cluster_picture(app_id)
    report = status(app_id)
    assert report["world_sizes"][0] == 1 and report["world_sizes"][-1] == 3, report["world_sizes"]
    counts = report["restarts_by_cause"]
    assert counts["resized"] >= 1 and counts["failed"] == 0, counts
    seen = worlds(shared, app_id)
    assert seen[0] == 1 and seen[-1] == 3, seen


@needs_killable_rig
def test_an_elastic_job_that_loses_a_node_goes_on_with_fewer(shared_tmp_path, apps):
    shared = shared_tmp_path / "shared"
    shared.mkdir()
    # One worker a node.
    app_id = detach(JOBS / "elastic-allreduce.yaml", apps, min=2, max=3, memory_mb=worker_mb(), shared_dir=shared,
                    program=PROGRAM, steps=100)
    wait_for(lambda: worlds(shared, app_id) == [3] and steps_in(shared, app_id) >= 5, timeout=240,
             what="the job training with 3 workers", interval=0.5, explain=lambda: cluster_picture(app_id))
    report = am_report(app_id)
    am_host = rm_app(app_id)["amHostHttpAddress"].rsplit(":", 1)[0]
    workers = {t["index"]: t["host"] for t in report["tasks"] if t["state"] == "RUNNING"}
    victim = next(h for i, h in sorted(workers.items(), reverse=True) if h != am_host)
    node_sh("stop", RIG["nodes"][victim], force=True)  # NodeManager and container processes: kill -9
    try:
        wait_for(lambda: worlds(shared, app_id)[:2] == [3, 2] and steps_in(shared, app_id) >= 10, timeout=180,
                 what="the job training on with 2 workers", interval=0.5, explain=lambda: cluster_picture(app_id))
        log = events(am_report(app_id))
    finally:
        node_sh("start", RIG["nodes"][victim])
    assert wait_final(app_id, timeout=300)["finalStatus"] == "SUCCEEDED", cluster_picture(app_id)
    report = status(app_id)
    assert report["world_sizes"][:2] == [3, 2], report["world_sizes"]
    counts = report["restarts_by_cause"]
    assert counts["resized"] >= 1 and counts["failed"] == 0 and counts["node_lost"] == 0, counts
    assert f"no heartbeat from its executor on {victim}" in log, log
    assert "shrinking the world from 3 to 2 task(s)" in log, log
