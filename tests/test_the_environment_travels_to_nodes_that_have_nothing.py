"""A user's venv, and the interpreter it was made from, exist only on the submitting machine;
the cluster's node has its OS, Java and Hadoop, nothing else (the isolated rig). ``subm run``
packs the venv, its base interpreter and the editable installs' code, uploads each once to HDFS
under the user's folder, and the AM, the executors and the tasks run from them. The next job
packs and uploads nothing; a change to the code being worked on ships that code alone; another
cluster gets the archives kept on this machine without packing them again.

    bash scripts/test.sh tests/test_the_environment_travels_to_nodes_that_have_nothing.py
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Tuple
from urllib.parse import urlparse

import pytest

from conftest import venv_with_subm, write_job
from test_the_projects_rig_is_a_hadoop_whose_nodes_share_nothing import hdfs, rig_env

pytestmark = pytest.mark.yarn


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory) -> Tuple[Path, Path]:
    """A venv of the user's own, made from this machine's base interpreter (pyenv's here, which
    no node has): submarine-py[yarn] and ``travelpkg``, a project of the user's installed
    editable (``pip install -e``). Returns (the venv, travelpkg's source folder)."""
    root = tmp_path_factory.mktemp("user")
    venv, project = root / "venv", root / "travelpkg"
    (project / "travelpkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "travelpkg"
        version = "0.1"
    """))
    (project / "travelpkg" / "__init__.py").write_text("VALUE = 1\n")
    venv_with_subm(venv, "yarn", project)
    return venv, project


def submit(venv: Path, job: Path, env: Dict[str, str]) -> Tuple[dict, str]:
    """``subm run JOB --output json`` as the user runs it, from their venv; (report, stderr)."""
    done = subprocess.run([str(venv / "bin" / "subm"), "run", str(job), "--backend", "yarn", "--output", "json"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    try:
        return json.loads(done.stdout), done.stderr
    except ValueError:
        pytest.fail(f"stdout is not JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


def logs_of(venv: Path, app_id: str, env: Dict[str, str]) -> str:
    """``subm logs APP``: the AM's decisions, then each task's output."""
    done = subprocess.run([str(venv / "bin" / "subm"), "logs", app_id], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"subm logs {app_id}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


def task_lines(venv: Path, app_id: str, env: Dict[str, str]) -> list:
    """The lines the job's tasks printed (``TASK <prefix> <version> <VALUE>``), from ``subm logs``."""
    return [line for line in logs_of(venv, app_id, env).splitlines() if line.startswith("TASK ")]


def test_a_venv_only_this_machine_has_runs_on_bare_nodes_once_uploaded_then_reused(
        isolated_rig, user_venv, tmp_path):
    from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user

    venv, project = user_venv
    conf = str(isolated_rig / "conf")
    env = {k: v for k, v in rig_env(conf).items() if k not in ("SUBM_SHIP_ENVIRONMENT", "PYTHONPATH")}
    env["SUBM_PACK_CACHE"] = str(tmp_path / "packed")  # the user's first submission ever: nothing kept
    env.update(SKEIN_CONFIG=str(tmp_path / "skein"), SUBM_SKEIN_HOME=str(tmp_path / "skein"),
               PATH=f"{venv / 'bin'}:{env['PATH']}")
    job = write_job(tmp_path / "job", """\
        name: travels
        tags: [subm-test]
        framework: pytorch
        timeouts: {gang_seconds: 15}
        roles:
          worker:
            instances: 2
            resources: {memory: 256 MiB, vcores: 1}
            command: python -c "import sys, travelpkg; print('TASK', sys.prefix, sys.version.split()[0], travelpkg.VALUE)"
    """)

    first, said = submit(venv, job, env)
    assert first["state"] == "SUCCEEDED", (first, said)
    # Packed in layers (the venv's distributions, its own small rest), uploaded, each named by
    # what it holds, with what they weighed and took.
    assert re.search(r"subm: environment: packed \d+ archive\(s\), [\d.]+ [kMG]B, in [\d.]+ s", said), said
    assert re.search(r"subm: environment: uploaded \d+ archive\(s\), [\d.]+ [kMG]B, to hdfs://\S+/user/\S+/"
                     r"\.subm/environments in [\d.]+ s", said), said
    listed = hdfs(conf, "dfs", "-ls", "-C", f"/user/{yarn_user()}/.subm/environments").stdout.split()
    names = sorted(p.rsplit("/", 1)[-1].rsplit("-", 1)[0] for p in listed)
    assert "site-rest" in names and any(n.startswith("env-venv") for n in names), names
    if not sys.base_prefix.startswith("/usr"):  # pyenv's, which the node lacks: it travels too
        assert any(n.startswith("python") for n in names), names
    lines = task_lines(venv, first["app_id"], env)
    assert len(lines) == 2, lines
    # The first job on a node has YARN unpack the environment (tens of seconds here), past the
    # job's gang_seconds: the gang's clock waits for it (the workers usually go to a node
    # other than the AM's, which unpacked it before the AM started).
    am_host = urlparse(first["status_url"]).hostname
    if any(t["host"] != am_host for t in first["tasks"]):
        assert "the gang's clock waits while the job's environment reaches that node" in logs_of(
            venv, first["app_id"], env)
    for line in lines:  # the shipped environment, in the container, with the submitter's Python
        _, prefix, version, value = line.split()
        assert prefix.endswith("/.subm-venv") and "/appcache/" in prefix, line
        assert version == sys.version.split()[0] and value == "1", line

    second, said = submit(venv, job, env)
    assert second["state"] == "SUCCEEDED", (second, said)
    assert "packed" not in said and "uploaded" not in said, said
    assert re.search(r"subm: environment: (\d+) of \1 archives on hdfs://\S+ already, reused", said), said

    # A one-line change to the editable project ships that code alone, in kilobytes.
    (project / "travelpkg" / "__init__.py").write_text("VALUE = 2\n")
    third, said = submit(venv, job, env)
    assert third["state"] == "SUCCEEDED", (third, said)
    shipped = re.search(r"subm: environment: uploaded 1 archive\(s\), ([\d.]+) kB", said)  # the code's
    assert shipped and float(shipped.group(1)) < 1000, said
    lines = task_lines(venv, third["app_id"], env)  # both workers ran the changed code
    assert len(lines) == 2 and all(line.endswith(" 2") for line in lines), lines

    # Another cluster (here: this one, its copies removed) gets the archives kept on this
    # machine, uploaded as they are: the gigabytes are not packed again.
    gone = hdfs(conf, "dfs", "-rm", "-r", "-f", "-skipTrash", f"/user/{yarn_user()}/.subm/environments")
    assert gone.returncode == 0, gone.stderr
    fourth, said = submit(venv, job, env)
    assert fourth["state"] == "SUCCEEDED", (fourth, said)
    assert "packing" not in said and "packed" not in said, said
    assert re.search(r"subm: environment: uploaded \d+ archive\(s\)", said), said
