"""A packed environment is kept on the submitting machine (travel/kept.py): the first job on
another cluster, or on the same one once its copy was pruned, uploads it without packing the
gigabytes again; two submissions needing it at once pack it once; of one kind, the two used
last stay."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import List

import pytest

from submarine_py.backends.yarn.client.travel import kept

pytestmark = pytest.mark.unit


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(kept.PACK_CACHE, str(tmp_path / "packed"))
    return tmp_path / "packed"


def packer(calls: List[str], seconds: float = 0.0):
    def pack(out: str) -> None:
        calls.append(out)
        time.sleep(seconds)
        Path(out).write_bytes(b"archive of " + os.path.basename(out).encode())
    return pack


def test_an_archive_packed_once_is_reused_by_the_next_submission(cache):
    calls: List[str] = []
    with kept.archive("env-venv-aaa.tar.gz", packer(calls)) as (path, fresh):
        assert fresh and path == str(cache / "env-venv-aaa.tar.gz") and os.path.exists(path)
    with kept.archive("env-venv-aaa.tar.gz", packer(calls)) as (again, fresh):
        assert not fresh and again == path
    assert len(calls) == 1 and calls[0].endswith(".part")  # never seen half-written under its name


def test_two_submissions_needing_the_same_archive_at_once_pack_it_once(cache):
    calls: List[str] = []
    seen = []

    def submit() -> None:
        with kept.archive("env-venv-bbb.tar.gz", packer(calls, seconds=0.3)) as (path, fresh):
            seen.append((fresh, Path(path).read_bytes()))

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(fresh for fresh, _ in seen) == [False, True]
    assert all(data == b"archive of env-venv-bbb.tar.gz.part" for _, data in seen)


def test_of_one_kind_the_two_used_last_stay_and_other_kinds_are_left_alone(cache):
    calls: List[str] = []
    for n, name in enumerate(["env-venv-1.tar.gz", "python3.11-x.tar.gz", "env-venv-2.tar.gz"]):
        with kept.archive(name, packer(calls)):
            pass
        os.utime(cache / name, (1000 + n, 1000 + n))
    with kept.archive("env-venv-1.tar.gz", packer(calls)):  # used again: now the newest
        pass
    with kept.archive("env-venv-3.tar.gz", packer(calls)):
        pass
    left = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
    assert left == ["env-venv-1.tar.gz", "env-venv-3.tar.gz", "python3.11-x.tar.gz"]
    assert not (cache / "env-venv-2.tar.gz.lock").exists()


def test_a_pack_that_fails_leaves_nothing_to_reuse(cache):
    def broken(out: str) -> None:
        Path(out).write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        with kept.archive("env-venv-ccc.tar.gz", broken):
            pass
    assert [p.name for p in cache.iterdir()] == ["env-venv-ccc.tar.gz.lock"]
    calls: List[str] = []
    with kept.archive("env-venv-ccc.tar.gz", packer(calls)) as (_, fresh):
        assert fresh and len(calls) == 1


def test_keeping_nothing_packs_each_time_into_a_folder_removed_after(tmp_path, monkeypatch):
    monkeypatch.setenv(kept.PACK_CACHE, "none")
    calls: List[str] = []
    with kept.archive("env-venv-ddd.tar.gz", packer(calls)) as (path, fresh):
        assert fresh and os.path.exists(path)
    assert not os.path.exists(path)
    with kept.archive("env-venv-ddd.tar.gz", packer(calls)):
        pass
    assert len(calls) == 2


def test_by_default_archives_are_kept_in_the_users_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(kept.PACK_CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kept.folder() == str(tmp_path / "xdg" / "subm" / "packed")


def test_a_cache_folder_that_cannot_be_written_keeps_nothing_and_the_job_goes_on(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(kept.PACK_CACHE, str(blocked / "packed"))
    calls: List[str] = []
    with kept.archive("env-venv-eee.tar.gz", packer(calls)) as (path, fresh):
        assert fresh and os.path.exists(path) and not path.startswith(str(blocked))
    assert len(calls) == 1
