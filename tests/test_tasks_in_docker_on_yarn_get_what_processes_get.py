"""A task in a Docker image on YARN gets what a task in a plain container gets: the same
environment (cluster spec, SUBM_*, the framework's and GPUs' variables), its logs and its
failure's diagnostics back, the job's files and a shipped environment archive.

Needs the Docker-mode rig (``docker_yarn``: see tests/docker_rig.py); one job runs a role in the
image next to a role in plain containers (the LinuxContainerExecutor's, as the same user).
"""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from docker_rig import RigUser, container_log, docker_rig

pytestmark = pytest.mark.docker_yarn

DUMP = """
    import json, os
    print("ENV " + json.dumps(dict(os.environ), sort_keys=True))
    root = os.stat("/")
    print("ROOT-FS", root.st_dev, root.st_ino)
"""
#: What YARN and Docker themselves put in a container (its id, the image's PATH...): not subm's.
PLATFORM = ("CONTAINER_ID", "NM_", "JVM_PID", "LOCAL_", "LOG_DIRS", "PWD", "HOME", "HOSTNAME", "SHLVL",
            "MALLOC_ARENA_MAX", "HADOOP_", "YARN_CONTAINER_RUNTIME_", "PATH", "LANG", "_", "OLDPWD",
            "SKEIN_CONTAINER_ID", "APPLICATION_WEB_PROXY_BASE", "USER", "LOGNAME", "JAVA_HOME", "TERM")


@pytest.fixture(scope="module")
def user() -> RigUser:
    return RigUser(docker_rig(), "env")


def env_of(task) -> dict:
    out = container_log(task)
    line = next((ln for ln in out.splitlines() if ln.startswith("ENV ")), None)
    assert line, out
    return json.loads(line[len("ENV "):])


def test_a_task_in_an_image_gets_the_environment_a_process_gets(user):
    """master:0 in the image, worker:0 in a plain container, both with a GPU (the rig's GPUs are
    countable units: YARN's accounting, no device)."""
    job = user.job(f"""
        name: env-in-docker
        framework: pytorch
        shared_dir: {user.shared}
        roles:
          master:
            resources: {{memory: 256 MiB, gpus: 1}}
            docker: {user.docker_block()}
            command: python3 dump.py
            env: {{TEAM: vision}}
          worker:
            resources: {{memory: 256 MiB, gpus: 1}}
            command: python3 dump.py
            env: {{TEAM: vision}}
        files: {{dump.py: dump.py}}
    """, {"dump.py": DUMP})
    rc, report, err = user.run_json("run", str(job), "--backend", "yarn", timeout=300)
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    tasks = {t["role"]: t for t in report["tasks"]}
    # In the image: the image's root filesystem; in a plain container, this machine's (/.dockerenv
    # says nothing where this machine is itself a container).
    here = os.stat("/")
    assert f"ROOT-FS {here.st_dev} {here.st_ino}" in container_log(tasks["worker"])
    assert f"ROOT-FS {here.st_dev} {here.st_ino}" not in container_log(tasks["master"])
    docker, plain = env_of(tasks["master"]), env_of(tasks["worker"])

    def subm_set(env):
        return {k for k in env if not k.startswith(PLATFORM)}

    assert subm_set(docker) == subm_set(plain), (subm_set(docker) ^ subm_set(plain))
    same = ["SUBM_CLUSTER_SPEC", "SUBM_JOB_ID", "SUBM_ATTEMPT", "SUBM_SHARED_DIR", "MASTER_ADDR", "MASTER_PORT",
            "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "TEAM"]
    for name in same:
        assert name in docker, name
        assert docker[name] == plain[name], name
    assert (docker["RANK"], plain["RANK"]) == ("0", "1")
    assert json.loads(docker["SUBM_CLUSTER_SPEC"]) == {"master": [docker["MASTER_ADDR"] + ":" + docker["MASTER_PORT"]],
                                                        "worker": json.loads(plain["SUBM_CLUSTER_SPEC"])["worker"]}
    # GPUs: the same words inside and outside (no CUDA_VISIBLE_DEVICES of subm's own on YARN).
    gpu_vars = {k for k in subm_set(docker) if "CUDA" in k or "NVIDIA" in k or "GPU" in k}
    assert {k: docker[k] for k in gpu_vars} == {k: plain[k] for k in gpu_vars}
    for env in (docker, plain):
        assert "SUBM_TOKEN" not in env and "SUBM_TOKEN_FILE" not in env


def test_logs_and_a_failures_diagnostics_come_back_from_the_container(user):
    job = user.job(f"""
        name: fails-in-docker
        docker: {user.docker_block()}
        restart: {{policy: never}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: echo "to stdout from the image"; echo "it broke in the image" >&2; exit 3
    """)
    rc, report, err = user.run_json("run", str(job), "--backend", "yarn", timeout=300)
    assert rc == 1
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert "worker:0 failed with exit code 3" in diag, diag
    assert "it broke in the image" in diag  # the stderr's last lines, quoted
    assert report["tasks"][0]["exit_code"] == 3
    rc, out, err = user.subm("logs", report["app_id"])
    assert rc == 0, err
    assert "to stdout from the image" in out and "it broke in the image" in out


def _archive(path: Path) -> None:
    """A tiny packed environment: bin/hello and a module."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text, mode in (("bin/hello", "#!/bin/sh\necho hello from the archive\n", 0o755),
                                 ("lib/shipped_env_mod.py", "WHERE = 'the archive'\n", 0o644)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))


def test_the_jobs_files_and_a_shipped_environment_are_in_the_container(user):
    job = user.job(f"""
        name: files-in-docker
        docker: {user.docker_block()}
        environment: {{archive: env.tar.gz}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: >-
              hello && python -c "import sys, os;
              sys.path.insert(0, os.path.join(os.environ['SUBM_ENVIRONMENT'], 'lib'));
              import shipped_env_mod, helper;
              print('module from', shipped_env_mod.WHERE, '+', helper.NAME, '+', open('data/input.txt').read().strip())"
        files:
          helper.py: helper.py
          data/input.txt: input.txt
    """, {"helper.py": "NAME = 'the shipped helper'\n", "input.txt": "the shipped data\n"})
    _archive(job.parent / "env.tar.gz")
    rc, report, err = user.run_json("run", str(job), "--backend", "yarn", timeout=300)
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    out = container_log(report["tasks"][0])
    assert "hello from the archive" in out, out
    assert "module from the archive + the shipped helper + the shipped data" in out, out
