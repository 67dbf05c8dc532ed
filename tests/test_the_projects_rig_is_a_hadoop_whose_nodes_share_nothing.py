"""The project's own Hadoop (scripts/rig.sh, Apache's artifacts from Maven Central) is what our
users run: HDFS is its default filesystem, `hdfs dfs -put` and `-cat` work on it, skein stages
applications there; and with RIG_ISOLATED=1 its nodes share nothing with the submitting
machine: a container sees neither this checkout, nor its virtualenv, nor /tmp, nor the user's
home, only the operating system, Java, what travelled through YARN and HDFS, and the one folder
the rig mounts on every node as an NFS share would be (RIG_SHARED).

    bash scripts/test.sh tests/test_the_projects_rig_is_a_hadoop_whose_nodes_share_nothing.py
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path
from typing import Dict

import pytest

from conftest import REPO, YARN_CONF_DIR, require_yarn

pytestmark = pytest.mark.yarn


def rig_env(conf_dir: str) -> Dict[str, str]:
    """This environment, pointed at the rig whose configuration is ``conf_dir``."""
    env = dict(os.environ, HADOOP_CONF_DIR=conf_dir)
    env_sh = Path(conf_dir).parent / "env.sh"
    if env_sh.is_file():  # its hadoop, hdfs and yarn commands first on PATH
        out = subprocess.run(["bash", "-c", f'source "{env_sh}"; echo "$PATH"; echo "$JAVA_HOME"'],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        env.update(PATH=out[0], JAVA_HOME=out[1])
    return env


def hdfs(conf_dir: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["hdfs", *args], env=rig_env(conf_dir), capture_output=True, text=True, timeout=120, **kw)


def test_hdfs_is_the_default_filesystem_and_dfs_put_and_cat_work():
    require_yarn()
    from submarine_py.backends.yarn.hadoop.conf import hadoop_conf

    assert hadoop_conf("core-site.xml", YARN_CONF_DIR)["fs.defaultFS"].startswith("hdfs://")
    local = Path(tempfile.mkdtemp()) / "greeting.txt"
    local.write_text("hello from the submitting machine\n")
    remote = f"/tmp/rig-check-{uuid.uuid4().hex[:8]}.txt"
    put = hdfs(YARN_CONF_DIR, "dfs", "-put", str(local), remote)
    assert put.returncode == 0, put.stderr
    cat = hdfs(YARN_CONF_DIR, "dfs", "-cat", remote)
    assert cat.returncode == 0 and cat.stdout == "hello from the submitting machine\n", cat.stderr
    hdfs(YARN_CONF_DIR, "dfs", "-rm", "-skipTrash", remote)
    shutil.rmtree(local.parent)


#: Run as a skein application on the isolated rig: each check prints what a node sees.
PROBE = textwrap.dedent("""\
    import os, sys, json, skein
    repo, venv, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    script = '''
    for p in {repo}/pyproject.toml {venv}/bin/python /root/.pyenv /tmp/rig-probe-marker; do
      [ -e "$p" ] && echo "SEES $p"
    done
    /usr/bin/python3 -c "import skein" 2>/dev/null && echo "SEES skein in the node's python3"
    echo "PYTHON $(command -v python3)"
    "$HADOOP_COMMON_HOME/bin/hdfs" dfs -cat /tmp/rig-probe.txt | sed "s/^/HDFS /"
    sed "s/^/SHARED /" {shared}/probe.txt
    echo "JAVA $(test -x "$JAVA_HOME/bin/java" && echo yes)"
    '''.format(repo=repo, venv=venv, shared=shared)
    spec = skein.ApplicationSpec(name="rig-probe", master=skein.Master(
        resources=skein.Resources(memory=256, vcores=1), script=script))
    with skein.Client() as client:
        app = client.submit(spec)
        import time
        while True:
            report = client.application_report(app)
            if str(report.state) in ("FINISHED", "FAILED", "KILLED"):
                break
            time.sleep(1)
    print(json.dumps({"app": app, "status": str(report.final_status)}))
    """)


def test_a_files_entry_from_hdfs_reaches_every_task_at_its_destination(tmp_path):
    """``files: {data/train.csv: hdfs:///...}``: YARN localizes it from HDFS (with the job's
    delegation token on a secure cluster) and the executor links it at its destination."""
    from conftest import run_json, subm, write_job

    require_yarn()
    remote = f"/tmp/subm-files-{uuid.uuid4().hex[:8]}/train.csv"
    (tmp_path / "train.csv").write_text("x,y\n1,2\n")
    assert hdfs(YARN_CONF_DIR, "dfs", "-mkdir", "-p", os.path.dirname(remote)).returncode == 0
    assert hdfs(YARN_CONF_DIR, "dfs", "-put", str(tmp_path / "train.csv"), remote).returncode == 0
    job = write_job(tmp_path / "job", f"""\
        name: files-from-hdfs
        tags: [subm-test]
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB, vcores: 1}}
            command: python3 -c "print('READ', open('data/train.csv').read().split()[1])"
        files:
          data/train.csv: hdfs://{remote}
    """)
    try:
        rc, report, err = run_json("run", str(job), "--backend", "yarn", env={"HADOOP_CONF_DIR": YARN_CONF_DIR},
                                   timeout=300)
        assert rc == 0 and report["state"] == "SUCCEEDED", (report, err)
        rc, logs, err = subm("logs", report["app_id"], env={"HADOOP_CONF_DIR": YARN_CONF_DIR}, timeout=60)
        assert logs.count("READ 1,2") == 2, logs
    finally:
        hdfs(YARN_CONF_DIR, "dfs", "-rm", "-r", "-skipTrash", os.path.dirname(remote))


def test_an_isolated_node_sees_only_its_os_java_and_what_travels_through_hdfs(isolated_rig, tmp_path):
    conf = str(isolated_rig / "conf")
    marker = Path("/tmp/rig-probe-marker")
    marker.write_text("on the submitting machine only")
    (tmp_path / "probe.txt").write_text("shipped through HDFS\n")
    assert hdfs(conf, "dfs", "-put", "-f", str(tmp_path / "probe.txt"), "/tmp/rig-probe.txt").returncode == 0
    (isolated_rig / "shared" / "probe.txt").write_text("in the folder every node mounts\n")
    env = rig_env(conf)
    env["SKEIN_CONFIG"] = str(tmp_path / "skein")
    probe = subprocess.run([sys.executable, "-c", PROBE, str(REPO), sys.prefix, str(isolated_rig / "shared")],
                           env=env, capture_output=True, text=True, timeout=300)
    marker.unlink()
    assert probe.returncode == 0, probe.stderr[-3000:]
    result = __import__("json").loads(probe.stdout.strip().splitlines()[-1])
    # skein's AM logs as application.master.log, the script it runs as application.driver.log
    said = "".join(log.read_text() for log in isolated_rig.glob(f"node1/nm-logs/{result['app']}/*/*.log"))
    assert result["status"] == "SUCCEEDED", said
    assert "SEES" not in said, said
    assert "HDFS shipped through HDFS" in said and "JAVA yes" in said, said
    assert "SHARED in the folder every node mounts" in said, said
    assert "PYTHON /usr/bin/python3" in said, said  # the node's own, not the submitter's


def test_a_job_whose_environment_the_nodes_lack_fails_at_once_saying_which_node_and_what_to_set(
        isolated_rig, tmp_path):
    """Submitted from this checkout's virtualenv, which the isolated node cannot see, with
    SUBM_SHIP_ENVIRONMENT=no (the tests' default: the environment does not travel): the AM
    cannot start there. The job fails in its first attempt, and ``subm run`` and ``subm status``
    say in one line which node, what it lacks and what to set, not skein's "exit code 127, see
    logs". (Where the environment travels, such a job runs:
    tests/test_the_environment_travels_to_nodes_that_have_nothing.py.)"""
    from conftest import run_json, subm_python, write_job

    conf = str(isolated_rig / "conf")
    env = dict(rig_env(conf), SKEIN_CONFIG=str(tmp_path / "skein"), SUBM_SKEIN_HOME=str(tmp_path / "skein"),
               SUBM_SHIP_ENVIRONMENT="no")
    job = write_job(tmp_path / "job", """\
        name: lacks-environment
        tags: [subm-test]
        roles:
          worker:
            instances: 1
            resources: {memory: 256 MiB, vcores: 1}
            command: python -c "print('never')"
    """)
    rc, report, err = run_json("run", str(job), "--backend", "yarn", "--quiet", env=env, timeout=300)
    assert rc == 1 and report["state"] == "FAILED", (report, err)
    said = report["diagnostics"]
    assert said.startswith("node ") and "127.0.0." in said, said  # the node, by the name YARN gives it
    assert subm_python() in said or "lacks skein or submarine_py" in said, said  # what it lacks (subm's interpreter)
    assert "set environment.python" in said and "see logs" not in said, said  # what to set
    rc, status, _ = run_json("status", report["app_id"], env=env)
    assert status["diagnostics"] == said
    # One attempt: a second would only fail the same way.
    attempts = subprocess.run(["yarn", "applicationattempt", "-list", report["app_id"]], env=env,
                              capture_output=True, text=True, timeout=120).stdout
    assert attempts.count("appattempt_") == 1, attempts
