"""Users' programs, unmodified, on the real YARN rig.

The same multi-file program as ``test_users_programs_run_unchanged.py`` (sibling module, shipped package,
nested data file, shipped folder, a package only the venv has), submitted from a fresh
venv: on YARN each task must see real files laid out as locally, its ``python`` must be
that venv, ``SUBM_SHARED_DIR`` must be the job's subfolder of ``shared_dir`` (on the rig, a
folder of the one it mounts on every node: ``shared_tmp_path``).

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_users_programs_run_unchanged_on_yarn.py
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from conftest import (ISOLATED_NODES, YARN_CONF_DIR, preinstalled_python, require_yarn, subm, subm_env,
                      subm_python, write_job)
from userprogram import VENV_MARK, make_venv, results, write_project

RM = require_yarn()



pytestmark = pytest.mark.yarn
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR}
APP_ID = re.compile(r"application_\d+_\d+")


def yarn_run(python: str, job: Path, *args: str, timeout: float = 300, env: Optional[Dict[str, str]] = None):
    argv = [python, "-m", "submarine_py.cli", "run", str(job), "--backend", "yarn", "--output", "json", *args]
    proc = subprocess.run(argv, env=subm_env(dict(YARN, **(env or {}))), capture_output=True, text=True,
                          timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, report, proc.stderr


def task_stdout(app_id: str, role: str, index: int) -> str:
    rc, out, err = subm("logs", app_id, "--role", role, "--index", str(index), env=YARN, timeout=60)
    assert rc == 0, err
    return out


@pytest.fixture(scope="module")
def user_venvs(tmp_path_factory) -> Dict[bool, Path]:
    """The user's venvs, with and without the system's site-packages. For isolated nodes they are
    where every node has them (the rig's shared folder, as where admins install one), made from
    the nodes' own python3, subm's dependencies those of the preinstalled environment."""
    if not ISOLATED_NODES:
        root = tmp_path_factory.mktemp("uservenvs")
        return {site: make_venv(root / f"env-{site}", system_site_packages=site) for site in (False, True)}
    root = Path(tempfile.mkdtemp(prefix="uservenvs.", dir=os.environ["RIG_SHARED"]))
    deps = subprocess.run([preinstalled_python(), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    return {site: make_venv(root / f"env-{site}", system_site_packages=site, base="/usr/bin/python3", deps=deps)
            for site in (False, True)}


@pytest.mark.parametrize("system_site,gpus", [(False, 0), (True, 1)],
                         ids=["venv-cpu", "venv-system-site-gpu"])
def test_a_multi_file_program_runs_from_the_users_venv_on_yarn(tmp_path, shared_tmp_path, user_venvs, system_site,
                                                               gpus):
    venv_python = user_venvs[system_site]
    shared_root = shared_tmp_path / "nfs"
    shared_root.mkdir()
    job = write_project(tmp_path / "project", instances=3, extra=f"""\
        shared_dir: {shared_root}
        """)
    if gpus:
        job.write_text(job.read_text().replace("vcores: 1}", f"vcores: 1, gpus: {gpus}}}"))
    # The venv is on every node at its path: it need not travel.
    rc, report, err = yarn_run(str(venv_python), job, env={"SUBM_SHIP_ENVIRONMENT": "no"})
    app_id = report["app_id"]
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{err}"
    found: List[Dict] = []
    for i in range(3):
        (r,) = results(task_stdout(app_id, "worker", i))
        found.append(r)
    venv_root = str(venv_python.parent.parent)
    for r in found:
        assert r["prefix"] == venv_root and r["python3_prefix"] == venv_root, r
        assert r["venvonly"] == VENV_MARK
        assert r["helper"] == 42 and r["data"] == "hello from the data folder"  # sibling, package, nested file
        assert r["conf"] == {"lr": 0.1, "epochs": 3} and not r["script_is_link"]  # shipped folder, real files
        assert r["shared"] == str(shared_root / app_id)
        assert r["seen"] == ["hello-worker-0", "hello-worker-1", "hello-worker-2"]
    # One task is one node, with or without GPUs, whichever node YARN chose (before issue 19,
    # GPU-less tasks counted the tasks YARN put on their node).
    assert {(r["local_rank"], r["local_world_size"]) for r in found} == {("0", "1")}


def test_validate_and_dry_run_of_nested_destinations_on_yarn(tmp_path):
    job = write_project(tmp_path / "project", instances=2, extra="""\
        shared_dir: /mnt/nfs/jobs
        """)
    rc, out, err = subm("run", str(job), "--backend", "yarn", "--dry-run", env=YARN)
    assert rc == 0 and "Traceback" not in err, err
    assert ".subm-files.tar.gz" in out and "data/input.txt" not in out.split("services:")[1].split("script")[0]
    rc, out, err = subm("validate", str(job), "--backend", "yarn", "--output", "json", env=YARN)
    assert rc == 0, err
    env = json.loads(out)["tasks"][0]["env"]
    assert env["SUBM_SHARED_DIR"] == "/mnt/nfs/jobs/<app_id>"
    assert env["LOCAL_RANK"] == "0"  # known before placement: one task is one node


def test_a_relative_shared_dir_is_refused_before_submission(tmp_path):
    job = write_project(tmp_path / "project", extra="""\
        shared_dir: nfs/jobs
        """)
    rc, out, err = subm("run", str(job), "--backend", "yarn", env=YARN)
    assert rc == 2 and "shared_dir" in err and "absolute" in err and "Traceback" not in err, err


def test_in_a_tensorflow_ps_job_the_chief_decides_the_end(tmp_path):
    """ParameterServerStrategy: workers and ps serve (server.join()) until stopped."""
    job = write_job(tmp_path / "job", """\
        name: tf-ps-shape
        framework: tensorflow
        timeouts: {gang_seconds: 240}
        roles:
          chief: {command: "python -c 'print(\\"coordinator done\\")'", resources: {memory: 512 MiB}}
          worker: {instances: 2, command: "python -c 'import time; time.sleep(3600)'", resources: {memory: 512 MiB}}
          ps: {command: "python -c 'import time; time.sleep(3600)'", resources: {memory: 512 MiB}}
        """)
    rc, report, err = yarn_run(subm_python(), job)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{err}"
    states = {f"{t['role']}:{t['index']}": (t["state"], t["tracked"]) for t in report["tasks"]}
    assert states["chief:0"] == ("SUCCEEDED", True)
    assert states["worker:0"] == ("STOPPED", False) and states["ps:0"] == ("STOPPED", False)



EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pytorch-project"


@pytest.mark.torch
def test_the_pytorch_project_example_resumes_through_the_shared_dir_on_yarn(shared_tmp_path):
    pytest.importorskip("torch")
    shared_root = shared_tmp_path / "nfs"
    shared_root.mkdir()
    rc, report, err = yarn_run(subm_python(), EXAMPLE / "job.yaml", "--set", f"shared_dir={shared_root}",
                               "--set", "fail_at_epoch=3", timeout=600)
    app_id = report["app_id"]
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, f"{report}\n{err}"
    for i in range(2):
        assert f"[rank {i}] resuming from the snapshot at epoch 3" in task_stdout(app_id, "worker", i)
    epochs = [int(e) for e in re.findall(r"^epoch (\d+)/8", task_stdout(app_id, "worker", 0), re.M)]
    assert epochs == [1, 2, 3, 4, 5, 6, 7, 8]
    assert (shared_root / app_id / "spirals.pt").is_file()


def default_fs() -> str:
    """The cluster filesystem's URI (fs.defaultFS of core-site.xml), without a trailing slash."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(os.path.join(YARN_CONF_DIR, "core-site.xml")).getroot()
    except (OSError, ET.ParseError):
        return ""
    for prop in root.iter("property"):
        if prop.findtext("name") == "fs.defaultFS":
            return (prop.findtext("value") or "").strip().rstrip("/")
    return ""


@pytest.mark.torch
def test_without_a_shared_dir_the_example_checkpoints_to_the_cluster_filesystem(tmp_path):
    """docs/yarn.md's way on YARN without shared_dir: snapshots on the cluster FS (hadoop fs)."""
    pytest.importorskip("torch")
    hadoop = Path(os.environ.get("HADOOP_HOME", "/nonexistent"), "bin", "hadoop")
    if not hadoop.exists():
        pytest.skip("needs HADOOP_HOME/bin/hadoop (source /tmp/yarn-rig/env.sh)")
    fs = default_fs()
    if not fs:
        pytest.skip(f"no fs.defaultFS in {YARN_CONF_DIR}/core-site.xml")
    uri = f"{fs}/tmp/subm-test-{tmp_path.name}-{os.getpid()}/snapshot.pt"
    try:
        rc, report, err = yarn_run(subm_python(), EXAMPLE / "job.yaml", "--set", f"snapshot_path={uri}",
                                   "--set", "fail_at_epoch=3", timeout=900)
        assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, f"{report}\n{err}"
        for i in range(2):
            assert f"[rank {i}] resuming from the snapshot at epoch 3" in task_stdout(report["app_id"], "worker", i)
    finally:
        subprocess.run([str(hadoop), "fs", "-rm", "-r", "-f", uri.rsplit("/", 1)[0]], capture_output=True,
                       env=dict(os.environ, HADOOP_CONF_DIR=YARN_CONF_DIR))


def test_a_shared_dir_the_am_cannot_create_fails_the_job_saying_so(tmp_path, shared_tmp_path):
    blocked = shared_tmp_path / "not-a-folder"
    blocked.write_text("a file where the shared folder should be")
    job = write_job(tmp_path / "job", f"""\
        name: bad-shared-dir
        shared_dir: {blocked}/jobs
        roles: {{worker: {{command: "true", resources: {{memory: 256 MiB}}}}}}
        """)
    rc, report, err = yarn_run(subm_python(), job)
    assert rc == 1 and report["state"] == "FAILED", f"{report}\n{err}"
    assert f"shared_dir: cannot create {blocked}/jobs/{report['app_id']}" in report["diagnostics"]


@pytest.mark.tensorflow
def test_the_tensorflow_ps_example_runs_unchanged_on_yarn():
    """examples/tensorflow-ps as it is (real TensorFlow, ParameterServerStrategy): the chief
    trains through the ps and the worker on other containers, and its success ends the job."""
    pytest.importorskip("tensorflow", reason="the example trains with TensorFlow")
    example = Path(__file__).resolve().parent.parent / "examples" / "tensorflow-ps" / "job.yaml"
    rc, report, err = yarn_run(subm_python(), example, "--set", "epochs=2", timeout=420)
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report}\n{err}"
    states = {f"{t['role']}:{t['index']}": t["state"] for t in report["tasks"]}
    assert states == {"chief:0": "SUCCEEDED", "worker:0": "STOPPED", "ps:0": "STOPPED"}
    assert "epoch 2 loss" in task_stdout(report["app_id"], "chief", 0)
