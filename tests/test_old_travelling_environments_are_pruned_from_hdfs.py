"""Each change of a user's environment or edited code uploads a new archive to HDFS
(``/user/<user>/.subm/environments``); after an upload, ``subm run`` removes what nothing uses
any more: archives no node localized for 14 days (HDFS's access time; the modification time
where access times are off), and uploads left unfinished for a day (``.part-*``). What the job
being submitted uses, and anything younger, stays."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from submarine_py.backends.yarn.client.travel import Part, Travel
from submarine_py.backends.yarn.client.travel.pruning import DAY_MS, stale

NOW = 1_800_000_000_000
FOLDER = "/user/ada/.subm/environments"


def entry(name: str, days_unused: float, days_unwritten: float = None, kind: str = "FILE", length: int = 10):
    written = days_unused if days_unwritten is None else days_unwritten
    return {"name": f"{FOLDER}/{name}", "type": kind, "length": length,
            "accessTime": int(NOW - days_unused * DAY_MS), "modificationTime": int(NOW - written * DAY_MS)}


@pytest.mark.unit
def test_archives_unused_for_two_weeks_and_uploads_left_for_a_day_go_the_rest_stays():
    entries = [
        entry("env-venv-old.tar.gz", 15),
        entry("env-venv-recent.tar.gz", 3),
        entry("code-old.tar.gz", 30),
        entry("python3.11-old.tar.gz", 20),
        entry("site-torch-old.tar", 16),                   # a layer nothing uses
        entry("site-torch-now.tar", 30),                   # a layer the job uses
        entry("env-venv-now.tar.gz", 40),                  # the job's own: kept whatever its age
        entry("env-venv-x.tar.gz.part-1a2b3c4d", 2),
        entry("env-venv-y.tar.gz.part-5e6f7a8b", 0.1),    # an upload under way
        entry("notes.txt", 100),                          # not ours
        entry("sub", 100, kind="DIRECTORY"),
    ]
    gone = stale(entries, keep=[f"{FOLDER}/env-venv-now.tar.gz", f"{FOLDER}/site-torch-now.tar"], now_ms=NOW)
    assert sorted(s.path.rsplit("/", 1)[-1] for s in gone) == [
        "code-old.tar.gz", "env-venv-old.tar.gz", "env-venv-x.tar.gz.part-1a2b3c4d", "python3.11-old.tar.gz",
        "site-torch-old.tar"]
    assert {s.why for s in gone} == {"unused for 14 days", "an upload left unfinished"}


@pytest.mark.unit
def test_an_archive_read_by_a_node_last_week_stays_though_written_long_ago():
    assert stale([entry("env-venv-a.tar.gz", days_unused=6, days_unwritten=60)], keep=[], now_ms=NOW) == []


@pytest.mark.unit
def test_without_access_times_the_modification_time_decides():
    old = dict(entry("env-venv-a.tar.gz", 20), accessTime=0)
    young = dict(entry("env-venv-b.tar.gz", 2), accessTime=0)
    assert [s.path for s in stale([old, young], keep=[], now_ms=NOW)] == [old["name"]]


@pytest.mark.yarn
def test_an_upload_prunes_what_nothing_used_for_weeks_on_the_rigs_hdfs(tmp_path: Path):
    from conftest import YARN_CONF_DIR, require_yarn

    require_yarn()
    from submarine_py.backends.yarn.hadoop.resourcemanager import yarn_user
    from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem, Files

    where, user = ClusterFilesystem.from_conf(YARN_CONF_DIR), yarn_user()
    files = Files(where, user)
    folder = f"/user/{user}/.subm/prune-test-{int(time.time())}"
    local = tmp_path / "a.tar.gz"
    local.write_bytes(b"x" * 1000)
    names = ["env-venv-old.tar.gz", "env-venv-recent.tar.gz", "env-venv-kept.tar.gz.part-00000000"]
    for name in names:
        files.put(str(local), f"{folder}/{name}")
    # The old archive and the old upload: last touched 20 days ago (WebHDFS SETTIMES).
    ago = int(time.time() * 1000) - 20 * DAY_MS
    for name in ("env-venv-old.tar.gz", "env-venv-kept.tar.gz.part-00000000"):
        r = requests.put(f"{where.namenode_urls[files.active]}/webhdfs/v1{folder}/{name}",
                         params={"op": "SETTIMES", "modificationtime": ago, "accesstime": ago, "user.name": user},
                         timeout=10)
        assert r.status_code == 200, r.text
    new = tmp_path / "env-venv-new.tar.gz"
    new.write_bytes(b"y" * 10)
    said = []
    travel = Travel(installed=None, parts=(Part("subm-env", f"{where.uri}{folder}/env-venv-new.tar.gz", "environment"),))
    files.put(str(new), f"{folder}/env-venv-new.tar.gz")
    try:
        travel.prune(files, said.append)
        left = sorted(e["name"].rsplit("/", 1)[-1] for e in files.listing(folder))
        assert left == ["env-venv-new.tar.gz", "env-venv-recent.tar.gz"], said
        assert any("env-venv-old.tar.gz" in s and "unused for 14 days" in s for s in said), said
        assert any(".part-00000000" in s and "an upload left unfinished" in s for s in said), said
    finally:
        files._filesystem().rm(folder, recursive=True)
