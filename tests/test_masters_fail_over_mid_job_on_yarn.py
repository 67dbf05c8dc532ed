"""A master failing over in the middle of a job changes nothing for the user: real HA YARN and HDFS.

On the rig's HA shape (RIG_HA=1: two ResourceManagers elected through ZooKeeper, two NameNodes
of one nameservice with ZKFCs; with RIG_TLS=1 every web endpoint HTTPS), the active RM or the
active NameNode is killed with SIGKILL (scripts/rig/master.sh) while a job runs, uploads its
environment, or writes to HDFS. Each job succeeds in its first attempt, ``subm run`` says what
happened in one line, and ``subm status/list/logs`` answer through the other master. The killed
master is started again afterwards (as a standby).

    RIG_HA=1 RIG_TLS=1 bash scripts/with-rig.sh python -m pytest -m ha tests/test_masters_fail_over_mid_job_on_yarn.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

from conftest import (REPO, YARN_CONF_DIR, require_yarn, run_json, start_subm, subm, subm_argv, subm_env, wait_for,
                      write_job)
from venvs import slim_python

from submarine_py.backends.yarn.hadoop import addresses, kerberos, spnego  # noqa: E402
from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user  # noqa: E402
from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem, Files  # noqa: E402
from submarine_py.backends.yarn.client.travel import FOLDER  # noqa: E402

pytestmark = [pytest.mark.yarn, pytest.mark.ha]

KEYTABS = Path(os.environ.get("SUBM_SECURE_KEYTABS", "/tmp/krb"))


def take_alices_ticket() -> None:
    """On a Kerberized rig (the production one) the jobs are alice's: this process holds her
    ticket (the rig's keytab) in a cache of its own, taken again before each test, as the rig's
    tickets last minutes. Elsewhere nothing."""
    if not (YARN_CONF_DIR and kerberos.is_secure(YARN_CONF_DIR)):
        return
    os.environ["KRB5CCNAME"] = os.environ.get("SUBM_TEST_ALICE_CC") or f"FILE:/tmp/subm-ha-alice-{os.getpid()}.cc"
    os.environ["SUBM_TEST_ALICE_CC"] = os.environ["KRB5CCNAME"]
    subprocess.run(["kinit", "-kt", str(KEYTABS / "alice.keytab"), "alice"], check=True, capture_output=True)


take_alices_ticket()  # before require_yarn: a secure RM answers only through SPNEGO
require_yarn()

RIG = Path(YARN_CONF_DIR).parent if YARN_CONF_DIR else None  # the rig's folder (without one the tests skip)
MASTER = REPO / "scripts" / "rig" / "master.sh"
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR}


@pytest.fixture(autouse=True)
def ha_rig():
    """These tests need two of each master (a selected test fails without them; collecting the
    module elsewhere, as CI's other passes do, is not running it)."""
    found = addresses.from_conf(YARN_CONF_DIR)
    if len(found.rm_urls) < 2 or len(found.namenode_urls) < 2:
        pytest.fail(f"these tests need the rig's HA shape (RIG_HA=1); {YARN_CONF_DIR} names "
                    f"{len(found.rm_urls)} ResourceManager(s) and {len(found.namenode_urls)} NameNode(s)",
                    pytrace=False)


@pytest.fixture(autouse=True)
def ticket():
    take_alices_ticket()


def master(*args: str) -> str:
    done = subprocess.run(["bash", str(MASTER), str(RIG), *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"master.sh {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout.strip()


@pytest.fixture
def kill() -> Iterator[Callable[[str], Tuple[str, float]]]:
    """``kill("rm" | "nn")``: SIGKILL the active one, ``(its id, when)``; started again afterwards."""
    killed: List[Tuple[str, str]] = []

    def now(daemon: str) -> Tuple[str, float]:
        which = master("active", daemon)
        assert which in ("1", "2"), f"no active {daemon}: {which!r}"
        master("kill", daemon, which)
        killed.append((daemon, which))
        return which, time.monotonic()

    yield now
    for daemon, which in killed:
        master("start", daemon, which)
    for daemon, _ in killed:  # both masters up again before the next test
        wait_for(lambda: master("active", daemon) in ("1", "2"), timeout=120, what=f"an active {daemon}", interval=1)


def answers_again(since: float, *args: str, env=YARN) -> float:
    """Seconds from ``since`` until ``subm ARGS`` exits 0."""
    def ok() -> bool:
        rc, _, _ = subm(*args, env=env, timeout=120)
        return rc == 0
    wait_for(ok, timeout=120, what=f"subm {' '.join(args)} to answer", interval=0.2)
    return time.monotonic() - since


def running(app_id: str, n: int) -> bool:
    rc, report, _ = run_json("status", app_id, env=YARN, timeout=120)
    return rc == 0 and [t["state"] for t in report.get("tasks", [])].count("RUNNING") == n


def finished(proc: subprocess.Popen, timeout: float) -> Tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"subm run did not end within {timeout} s:\n{err[-3000:]}")
    return proc.returncode, out, err


def succeeded_in_one_attempt(rc: int, out: str, err: str) -> dict:
    """``subm run --output json``'s report, of a job that succeeded in its first attempt."""
    import json

    report = json.loads(out)
    assert rc == 0 and report["state"] == "SUCCEEDED", err[-3000:]
    assert report["attempts"] == 1, "a failover cost the job an attempt"
    return report


@pytest.mark.torch
def test_the_active_resource_manager_killed_during_ddp_training_changes_nothing(kill):
    example = REPO / "examples" / "pytorch-ddp" / "job.yaml"
    proc = start_subm("run", str(example), "--backend", "yarn", "--output", "json", "--set", "epochs=400", env=YARN)
    app_id = ""
    try:
        def started() -> bool:
            nonlocal app_id
            rc, out, _ = subm("list", "--output", "json", env=YARN, timeout=60)
            import json

            jobs = [j for j in json.loads(out or "[]") if j.get("name") == "pytorch-ddp"] if rc == 0 else []
            app_id = jobs[-1]["app_id"] if jobs else ""
            return bool(app_id) and running(app_id, 2)
        wait_for(started, timeout=300, what="both DDP workers running", interval=1)
        which, since = kill("rm")
        status_after = answers_again(since, "status", app_id)
        list_after = answers_again(since, "list")
        logs_after = answers_again(since, "logs", app_id, "--role", "worker", "--index", "0", "--tail", "5")
        rc, out, err = finished(proc, timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"after the kill of rm{which}: subm status answered in {status_after:.1f} s, list {list_after:.1f} s, "
          f"logs {logs_after:.1f} s", file=sys.stderr)
    report = succeeded_in_one_attempt(rc, out, err)
    assert all(t["state"] == "SUCCEEDED" for t in report["tasks"]), report["tasks"]
    failover = [line for line in err.splitlines() if "failed over" in line]
    assert len(failover) == 1 and "the YARN ResourceManager failed over:" in failover[0], err[-3000:]
    assert status_after < 60, "subm status did not answer within a minute of the kill"


def cluster_files() -> Files:
    secure = kerberos.is_secure(YARN_CONF_DIR)
    return Files(ClusterFilesystem.from_conf(YARN_CONF_DIR), yarn_user(), spnego.http_auth() if secure else None,
                 say=lambda _: None)


def test_the_active_namenode_killed_while_the_environment_uploads_changes_nothing(kill, tmp_path, monkeypatch):
    monkeypatch.delenv("SUBM_SHIP_ENVIRONMENT", raising=False)  # this job's environment travels
    files = cluster_files()
    folder = f"/user/{yarn_user()}/{FOLDER}"
    for entry in files.listing(folder):  # so that it is uploaded again, now
        files.remove(files.path(entry["name"]) if "://" in entry["name"] else entry["name"])
    job = write_job(tmp_path, """
        name: upload-failover
        roles:
          worker:
            instances: 1
            resources: {memory: 512 MiB, vcores: 1}
            command: python -c "import submarine_py, sys; print('the environment is here', sys.prefix)"
        """)
    # A user's environment of a hundred MB or so travels (slim_python), on any rig.
    proc = subprocess.Popen(subm_argv("run", str(job), "--backend", "yarn", "--output", "json", python=slim_python()),
                            env=subm_env(YARN), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def uploading() -> bool:
            return any(".part-" in e["name"] for e in files.listing(folder))
        wait_for(uploading, timeout=300, what="the environment's upload to start", interval=0.1)
        kill("nn")
        rc, out, err = finished(proc, timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    succeeded_in_one_attempt(rc, out, err)
    failover = [line for line in err.splitlines() if "failed over" in line]
    assert len(failover) == 1 and failover[0].startswith("subm: HDFS failed over: "), err[-3000:]
    assert not [e for e in files.listing(folder) if ".part-" in e["name"]], "a half-written part was left behind"


def test_the_active_namenode_killed_while_a_job_writes_checkpoints_to_hdfs_changes_nothing(kill, tmp_path):
    folder = f"/user/{yarn_user()}/failover-{os.getpid()}-{int(time.time())}"
    job = write_job(tmp_path, f"""
        name: checkpoint-failover
        roles:
          worker:
            instances: 1
            resources: {{memory: 512 MiB, vcores: 1}}
            command: >-
              bash -c 'hdfs="${{HADOOP_HDFS_HOME:-$HADOOP_HOME}}/bin/hdfs";
              "$hdfs" dfs -mkdir -p {folder} || exit 1;
              for i in $(seq 1 12); do date > ckpt; "$hdfs" dfs -put -f ckpt {folder}/ckpt-$i || exit 1;
              echo checkpoint $i written; done'
        """)
    proc = start_subm("run", str(job), "--backend", "yarn", "--output", "json", env=YARN)
    files = cluster_files()
    try:
        wait_for(lambda: any(e["name"].endswith("ckpt-2") for e in files.listing(folder)), timeout=300,
                 what="the job's second checkpoint", interval=0.5)
        kill("nn")
        rc, out, err = finished(proc, timeout=600)
        written = sorted(e["name"].rsplit("/", 1)[1] for e in files.listing(folder))
    finally:
        if proc.poll() is None:
            proc.kill()
    succeeded_in_one_attempt(rc, out, err)
    assert written == sorted(f"ckpt-{i}" for i in range(1, 13))
    files._call("remove", folder, lambda fs: fs.rm(folder, recursive=True))
