"""Faults with real processes on the local backend: an executor that stops answering.

A machine that dies closes no connection; an executor stopped with SIGSTOP is as silent,
so the AM's heartbeats are what notices it.
"""
import pytest

from conftest import run_json, write_job

pytestmark = pytest.mark.local


def test_a_frozen_executor_is_declared_lost_replaced_and_the_gang_restarted(tmp_path, subm_home, no_leftovers):
    # The first attempt (SUBM_ATTEMPT 0) of worker:0 freezes its executor (its parent) and holds on; everything else succeeds.
    job = write_job(tmp_path / "job", """\
        name: frozen-executor
        restart: {policy: gang, max_restarts: 0}
        roles:
          worker:
            instances: 2
            command: >-
              echo "worker $SUBM_INDEX attempt $SUBM_ATTEMPT";
              if [ "$SUBM_INDEX" = 0 ] && [ "$SUBM_ATTEMPT" = 0 ]; then kill -STOP $PPID; sleep 120; fi
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local", timeout=180)
    no_leftovers.append(report["app_id"])
    assert rc == 0, report
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    # A silent executor is a lost machine: the cluster's fault, which spends no max_restarts.
    assert report["restarts_by_cause"]["node_lost"] == 1
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert "worker:0 was lost with its node (attempt 1): no heartbeat from its executor on 127.0.0.1" in am_log, \
        am_log
    assert "restarting the gang: attempt 2" in am_log  # attempts shown from 1
    # worker:0's attempt 1 ran in a new executor (the frozen one was killed).
    assert "started executor worker-0-e3 for worker:0" in am_log
