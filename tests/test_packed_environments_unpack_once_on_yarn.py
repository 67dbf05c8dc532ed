"""environment.archive on a real YARN: unpacked once per node, reused by the next job; one on
the cluster's filesystem also localized once per node for all of the user's jobs.

The archive is a tiny packed environment: ``bin/python`` runs the node's python3 with the
archive's ``lib`` on the path, where a module says it comes from the archive. Each test
uses its own cache folder (``environment.cache_dir``), so earlier runs cannot help it.
"""
from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import YARN_CONF_DIR, write_job
from test_jobs_run_end_to_end_on_yarn import apps, container_log, rm_app, run_job  # noqa: F401  (apps: a fixture)
from test_users_programs_run_unchanged_on_yarn import default_fs

pytestmark = pytest.mark.yarn

PYTHON = '#!/bin/sh\nhere=$(dirname "$0")\nPYTHONPATH="$here/../lib" exec python3 "$@"\n'
MODULE = "WHERE = 'from the shipped archive'\n"
FILES = (("bin/python", PYTHON, 0o755), ("lib/envmarker.py", MODULE, 0o644))


def pack(path: Path) -> Path:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w") as z:
            for name, text, mode in FILES:
                info = zipfile.ZipInfo(name)
                info.external_attr = (stat.S_IFREG | mode) << 16
                z.writestr(info, text)
    else:
        with tarfile.open(path, "w:gz") as t:
            for name, text, mode in FILES:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(text), mode
                t.addfile(info, io.BytesIO(text.encode()))
    return path


@pytest.mark.parametrize("name", ["env.tar.gz", "env.zip"])
def test_an_archive_is_unpacked_once_per_node_and_reused_by_the_next_job(tmp_path, shared_tmp_path, apps, name):  # noqa: F811
    archive = pack(tmp_path / name)
    cache = shared_tmp_path / "env-cache"  # one cache that every node mounts
    job = write_job(tmp_path / "job", f"""\
        name: yarn-archive
        tags: [subm-test]
        environment: {{archive: {archive}, cache_dir: {cache}}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB, vcores: 1}}
            command: python -c "import envmarker, os; print(envmarker.WHERE, os.environ['SUBM_ENVIRONMENT'])"
    """)
    logs = []
    for run in (1, 2):
        rc, report, err = run_job(job)
        apps.append(report.get("app_id"))
        assert rc == 0, f"run {run}: {report.get('diagnostics')}\n{err}"
        assert rm_app(report["app_id"])["finalStatus"] == "SUCCEEDED"
        for task in report["tasks"]:
            out = container_log(task, "stdout")
            # `python` in the command is the archive's, from the node's cache.
            assert "from the shipped archive" in out and str(cache) in out, out
        logs.append([container_log(task, "stderr") for task in report["tasks"]])
    first, second = logs
    # First job: one container unpacked it (every node mounts the cache folder),
    # the others waited for it; none unpacked it twice.
    assert sum("unpacked " in log for log in first) >= 1
    assert all(("unpacked " in log) != ("reusing the environment cached in" in log) for log in first), first
    # Second job: every container found it in the cache.
    assert all("reusing the environment cached in" in log and "unpacked " not in log for log in second), second
    entries = [p for p in cache.iterdir() if not p.name.endswith((".lock", ".unpack"))]
    assert len(entries) == 1 and (entries[0] / "lib" / "envmarker.py").exists()


def test_an_archive_on_the_cluster_filesystem_is_localized_once_for_every_later_job(  # noqa: F811
        tmp_path, shared_tmp_path, apps):
    """environment.archive as a cluster path: YARN keeps it in the node's per-user cache
    (PRIVATE), so the second job neither copies, hashes nor unpacks it again."""
    hadoop = Path(os.environ.get("HADOOP_HOME", "/nonexistent"), "bin", "hadoop")
    fs = default_fs()
    if not hadoop.exists() or not fs:
        pytest.fail(f"needs HADOOP_HOME/bin/hadoop and fs.defaultFS in {YARN_CONF_DIR} (the rig has both)")
    archive = pack(tmp_path / "env.tar.gz")
    folder = f"{fs}/tmp/subm-test-env-{tmp_path.name}-{os.getpid()}"
    env = dict(os.environ, HADOOP_CONF_DIR=YARN_CONF_DIR)
    put = subprocess.run([str(hadoop), "fs", "-mkdir", "-p", folder], capture_output=True, text=True, env=env)
    put = put.returncode == 0 and subprocess.run([str(hadoop), "fs", "-put", str(archive), folder],
                                                 capture_output=True, text=True, env=env)
    assert put and put.returncode == 0, put and put.stderr
    cache = shared_tmp_path / "env-cache"  # one cache that every node mounts
    job = write_job(tmp_path / "job", f"""\
        name: yarn-remote-archive
        tags: [subm-test]
        environment: {{archive: {folder}/env.tar.gz, cache_dir: {cache}}}
        roles:
          worker:
            instances: 1
            resources: {{memory: 256 MiB, vcores: 1}}
            command: python -c "import envmarker; print(envmarker.WHERE)"
    """)
    try:
        localized = []
        for run in (1, 2):
            rc, report, err = run_job(job)
            apps.append(report.get("app_id"))
            assert rc == 0, f"run {run}: {report.get('diagnostics')}\n{err}"
            task = report["tasks"][0]
            assert "from the shipped archive" in container_log(task, "stdout")
            script = container_log(task, "launch_container.sh")
            link = re.search(r'ln -sf (?:-- )?"([^"]+)" "subm-environment\.tar\.gz"', script)  # 3.4: "ln -sf --"
            assert link, script
            localized.append((task["host"], link.group(1)))
            if run == 2:
                assert "reusing the environment cached in" in container_log(task, "stderr")
        # The user's cache (usercache/<user>/filecache), not the application's (appcache/<app>).
        assert all("/appcache/" not in path and "/filecache/" in path for _, path in localized), localized
        if localized[0][0] == localized[1][0]:  # same node: the very same localized file
            assert localized[0][1] == localized[1][1], localized
        assert len(list(cache.glob(".sum-*"))) >= 1
    finally:
        subprocess.run([str(hadoop), "fs", "-rm", "-r", "-f", folder], capture_output=True, env=env)
