"""The Docker-mode rig as the ``docker_yarn`` tests use it: NodeManagers with the
LinuxContainerExecutor and YARN's Docker runtime, configured by `subm hadoop-conf`
(``RIG_DOCKER=1 scripts/rig.sh up DIR``; CI starts one, see .ci/run).

``SUBM_DOCKER_RIG`` names its folder; its ``docker-rig.json`` (written by scripts/rig_docker.py)
says who submits jobs (an unprivileged user, uid >= 1000: containers run as the submitting
user) and with which Python, which image and which read-only mounts jobs may use. Tests run as
root; every ``subm`` command here runs as that user, from a job folder that user can read.

    RIG_DOCKER=1 bash scripts/rig.sh up /tmp/my-docker-rig
    SUBM_DOCKER_RIG=/tmp/my-docker-rig python -m pytest -m docker_yarn
"""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pytest
import requests

from conftest import REPO, skip_without_container_executor, skip_without_yarn

RIG_DIR = os.environ.get("SUBM_DOCKER_RIG", "")


def docker_rig() -> Dict[str, Any]:
    """The rig's facts; skips (in CI: fails) where there is none."""
    if not RIG_DIR:  # SUBM_DOCKER_RIG: a Docker-mode rig, which needs the container-executor
        skip_without_container_executor("YARN's Docker runtime; SUBM_DOCKER_RIG names no Docker-mode rig")
    path = Path(RIG_DIR) / "docker-rig.json"
    if not path.is_file():
        skip_without_yarn(f"{path} is missing: not a Docker-mode rig of scripts/rig.sh")
    rig = json.loads(path.read_text())
    rig["rm"] = _rm_url(rig["conf_dir"])
    try:
        requests.get(rig["rm"] + "/ws/v1/cluster/info", params={"user.name": "test"}, timeout=3).raise_for_status()
    except requests.RequestException as exc:
        skip_without_yarn(f"the Docker rig's ResourceManager does not answer: {exc}")
    return rig


def _rm_url(conf_dir: str) -> str:
    from submarine_py.backends.yarn.hadoop.addresses import rm_address

    return rm_address(conf_dir)


def _owned(path: Path, user: str, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(mode)
    return path


class RigUser:
    """The rig's job user: ``subm ...`` as that user, job folders that user reads."""

    def __init__(self, rig: Dict[str, Any], name: str):
        self.rig = rig
        self.user = rig["user"]
        base = Path(rig["rig_dir"])
        self.home = _owned(base / f"skein-{self.user}" / "homes" / f"{name}-{os.getpid()}-{time.time_ns()}",
                           self.user)
        self.jobs = _owned(base / "jobs", self.user)
        #: A folder every node (all on this machine) and every container may write: the job's
        #: shared_dir (allowed read-write in container-executor.cfg, under the rig's fs/).
        self.shared = _owned(base / "fs" / "shared", self.user, 0o1777)

    def env(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        rig = self.rig
        home = pwd.getpwnam(self.user).pw_dir
        skein = Path(rig["rig_dir"]) / f"skein-{self.user}"
        env = {
            "HOME": home, "USER": self.user, "LOGNAME": self.user, "LANG": "C.UTF-8",
            "PATH": f"{rig['hadoop_home']}/bin:{rig['java_home']}/bin:/usr/local/bin:/usr/bin:/bin",
            "HADOOP_CONF_DIR": rig["conf_dir"], "HADOOP_HOME": rig["hadoop_home"], "JAVA_HOME": rig["java_home"],
            "SKEIN_CONFIG": str(skein), "SUBM_SKEIN_HOME": str(skein / "drivers"), "SUBM_HOME": str(self.home),
            "PYTHONPATH": str(REPO),
        }
        env.update(extra or {})
        return env

    def job(self, spec: str, files: Optional[Mapping[str, str]] = None) -> Path:
        """A job folder the user can read, holding ``job.yaml`` (dedented) and ``files``."""
        folder = Path(tempfile.mkdtemp(prefix="job-", dir=self.jobs))
        folder.chmod(0o755)
        for name, text in (files or {}).items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        (folder / "job.yaml").write_text(textwrap.dedent(spec))
        return folder / "job.yaml"

    def argv(self, *args: str) -> List[str]:
        return ["runuser", "-u", self.user, "--", "env", "-i",
                *[f"{k}={v}" for k, v in self.env().items()],
                self.rig["python"], "-m", "submarine_py.cli", *args]

    def subm(self, *args: str, cwd: Optional[Path] = None, timeout: float = 300) -> Tuple[int, str, str]:
        proc = subprocess.run(self.argv(*args), cwd=cwd or self.jobs, capture_output=True, text=True,
                              timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr

    def run_json(self, *args: str, **kw) -> Tuple[int, Dict[str, Any], str]:
        rc, out, err = self.subm(*args, "--output", "json", **kw)
        assert "Traceback" not in err, err
        try:
            return rc, json.loads(out), err
        except ValueError:
            pytest.fail(f"stdout is not JSON (rc {rc}):\n{out}\nstderr:\n{err}")

    def start(self, *args: str, cwd: Optional[Path] = None) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), cwd=cwd or self.jobs, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def docker_block(self, mounts: Tuple[str, ...] = ()) -> str:
        """The job file's ``docker`` mapping: the rig's image, its Python mounted read-only."""
        every = [*self.rig["mounts"], *mounts]
        return "{image: %s, mounts: %s}" % (self.rig["image"], json.dumps(every))


# -- what the cluster says ------------------------------------------------------------------------

def rm_get(rig: Dict[str, Any], path: str, **params: str) -> Dict[str, Any]:
    resp = requests.get(rig["rm"] + path, params=dict(params, **{"user.name": "test"}), timeout=10)
    resp.raise_for_status()
    return resp.json()


def container_log(task: Dict[str, Any], name: str = "stdout") -> str:
    """A file of a task's YARN container log folder, from its NodeManager."""
    node = task["log"].split("/node/")[0]
    cid = task["log"].rstrip("/").split("/")[-2]
    return requests.get(f"{node}/ws/v1/node/containers/{cid}/logs/{name}", timeout=10).text


def docker_containers(app_id: str) -> List[str]:
    """Docker containers (running or not) of a YARN application: YARN names them by container id."""
    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                         check=True).stdout.split()
    key = "container_" + app_id[len("application_"):] + "_"
    return [n for n in out if n.startswith(key) or f"_{app_id[len('application_'):]}_" in n]


def nm_refusal_times(rig: Dict[str, Any], app_id: str) -> List[float]:
    """When each NodeManager logged a failed launch of the application (epoch seconds)."""
    import datetime

    key = f"Exception from container-launch with container ID: container_{app_id[len('application_'):]}"
    found = []
    for log in Path(rig["rig_dir"]).glob("**/logs/*nodemanager*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if key in line:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                found.append(stamp.timestamp())
    return sorted(found)
