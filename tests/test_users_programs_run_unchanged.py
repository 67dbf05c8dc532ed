"""Users' programs, unmodified, on the local backend.

``subm`` runs from a fresh virtualenv (``python3 -m venv``, with and without system site
packages) holding a package only it has; the program is several files: a script importing
its sibling module and a shipped package, a nested data file, a shipped config folder. It
must find all of them, and its ``python``/``python3`` must be that venv.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import job_dirs, subm, subm_env, write_job
from userprogram import VENV_MARK, make_venv, results, write_project

pytestmark = pytest.mark.local


@pytest.fixture(scope="module", params=[False, True], ids=["venv", "venv-system-site"])
def user_venv(request, tmp_path_factory) -> Path:
    return make_venv(tmp_path_factory.mktemp("uservenv") / "env", system_site_packages=request.param)


def subm_from(python: Path, *args: str, timeout: float = 180):
    proc = subprocess.run([str(python), "-m", "submarine_py.cli", *args], env=subm_env(),
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_multi_file_program_runs_from_the_users_venv(tmp_path, subm_home, user_venv):
    job = write_project(tmp_path / "project")
    rc, out, err = subm_from(user_venv, "run", str(job), "--backend", "local", "--output", "json")
    assert rc == 0, out + err
    (job_dir,) = job_dirs(subm_home)
    found = {}
    for i in range(2):
        (r,) = results((job_dir / "logs" / f"worker-{i}.stdout").read_text())
        found[i] = r
    venv_root = str(user_venv.parent.parent)
    shared = str(job_dir / "shared")
    for i, r in found.items():
        assert r["prefix"] == venv_root and r["python3_prefix"] == venv_root  # python and python3: the venv
        assert r["venvonly"] == VENV_MARK
        assert r["helper"] == 42 and r["data"] == "hello from the data folder"
        assert r["conf"] == {"lr": 0.1, "epochs": 3} and not r["script_is_link"]
        assert r["shared"] == shared and r["seen"] == ["hello-worker-0", "hello-worker-1"]
    # One task is one node, wherever it runs: two one-process tasks on this one host are each
    # local rank 0 of 1 (before issue 19 they counted the host's tasks: 0 and 1 of 2).
    assert sorted((r["local_rank"], r["local_world_size"]) for r in found.values()) == [("0", "1"), ("0", "1")]


def test_the_venvs_console_scripts_are_on_the_path(tmp_path, subm_home, user_venv):
    bin_dir = user_venv.parent
    tool = bin_dir / "user-tool"
    tool.write_text(f"#!{user_venv}\nimport venvonly\nprint('tool', venvonly.MARK)\n")
    tool.chmod(0o755)
    try:
        job = write_job(tmp_path / "job", """\
            name: console-script
            roles: {worker: {command: user-tool}}
            """)
        rc, out, err = subm_from(user_venv, "run", str(job), "--backend", "local")
        assert rc == 0, out + err
        (job_dir,) = job_dirs(subm_home)
        assert f"tool {VENV_MARK}" in (job_dir / "logs" / "worker-0.stdout").read_text()
    finally:
        tool.unlink()


def test_a_system_interpreter_folder_without_python_still_gets_python(tmp_path, subm_home):
    """Debian's /usr/bin has python3 only: a task's `python` must still be the interpreter."""
    base = Path(os.path.realpath("/usr/bin/python3"))
    if not base.exists():
        pytest.skip("no /usr/bin/python3")
    job = write_job(tmp_path / "job", """\
        name: system-python
        roles: {worker: {command: "python -c 'import sys; print(\\"exe\\", sys.executable)'"}}
        """)
    import click

    deps = os.path.dirname(os.path.dirname(os.path.abspath(click.__file__)))  # subm's dependencies
    env = subm_env()
    env["PYTHONPATH"] += os.pathsep + deps
    proc = subprocess.run(["/usr/bin/python3", "-m", "submarine_py.cli", "run", str(job), "--backend", "local"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (job_dir,) = job_dirs(subm_home)
    assert "exe /usr/bin/python3" in (job_dir / "logs" / "worker-0.stdout").read_text()


def test_every_task_shares_the_jobs_shared_dir_and_restarts_resume_from_it(tmp_path, subm_home):
    """A torchrun-style snapshot: rank 0 writes it, every rank loads it after a gang restart."""
    job = write_job(tmp_path / "job", """\
        name: snapshot
        framework: pytorch
        restart: {policy: gang, max_restarts: 1}
        roles: {worker: {instances: 2, command: python snap.py}}
        files: [snap.py]
        """, {"snap.py": """\
        import json, os, pathlib, sys, time
        shared, rank = pathlib.Path(os.environ["SUBM_SHARED_DIR"]), os.environ["RANK"]
        attempt = os.environ["SUBM_ATTEMPT"]
        snap = shared / "snapshot.json"
        start = json.loads(snap.read_text())["epoch"] if snap.exists() else 0
        print("start", start, flush=True)
        (shared / f"ready-{rank}-{attempt}").touch()
        def wait(path):
            while not path.exists():
                time.sleep(0.05)
        if attempt == "0" and rank == "0":
            wait(shared / "ready-1-0")
            snap.write_text(json.dumps({"epoch": 2}))  # rank 0 saves the snapshot...
            time.sleep(120)                            # ...and is stopped by the gang restart
        if attempt == "0" and rank == "1":
            wait(snap)
            sys.exit(5)                                # fails once, mid-run
        """})
    rc, out, err = subm("run", str(job), "--backend", "local", "--output", "json")
    report = json.loads(out)
    assert rc == 0 and report["attempts"] == 2, out + err
    (job_dir,) = job_dirs(subm_home)
    for i in range(2):
        log = (job_dir / "logs" / f"worker-{i}.stdout").read_text()
        starts = [int(line.split()[1]) for line in log.splitlines() if line.startswith("start ")]
        assert starts == [0, 2], log  # both ranks resumed from rank 0's snapshot


def test_validate_shows_local_ranks_and_the_shared_dir_tasks_get(tmp_path, subm_home):
    job = write_project(tmp_path / "project", instances=3)
    rc, out, err = subm("validate", str(job), "--backend", "local", "--output", "json")
    assert rc == 0, err
    tasks = json.loads(out)["tasks"]
    assert [t["env"]["LOCAL_RANK"] for t in tasks] == ["0", "0", "0"]  # one task, one node (issue 19)
    assert {t["env"]["LOCAL_WORLD_SIZE"] for t in tasks} == {"1"}
    assert tasks[0]["env"]["SUBM_SHARED_DIR"] == str(subm_home / "local" / "<app_id>" / "shared")


def test_a_fifo_source_is_refused_by_field_before_anything_runs(tmp_path, subm_home):
    job = write_job(tmp_path / "job", """\
        name: fifo
        roles: {worker: {command: "true"}}
        files: {"data/pipe": pipe}
        """)
    os.mkfifo(tmp_path / "job" / "pipe")
    for args in (("validate", str(job)), ("run", str(job), "--backend", "local")):
        rc, out, err = subm(*args)
        assert rc == 2 and "files.data/pipe" in err and "not a regular file" in err, err
        assert "Traceback" not in err
    assert not job_dirs(subm_home)
