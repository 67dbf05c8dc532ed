"""The per-node cache of unpacked environments (environment.archive): unpacked once, shared, aged out."""
from __future__ import annotations

import fcntl
import io
import multiprocessing
import os
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from submarine_py.executor import envcache

pytestmark = pytest.mark.unit

PYTHON = "#!/bin/sh\necho packed python\n"


def make_tar(path: Path) -> Path:
    """A tiny packed environment: an executable bin/python, a symbolic link, a library file."""
    with tarfile.open(path, "w:gz") as t:
        for name, text, mode in (("bin/python", PYTHON, 0o755), ("lib/site.py", "x = 1\n", 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), mode
            t.addfile(info, io.BytesIO(text.encode()))
        link = tarfile.TarInfo("bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, "python"
        t.addfile(link)
    return path


def make_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text, mode in (("bin/python", PYTHON, 0o755), ("lib/site.py", "x = 1\n", 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, text)
        link = zipfile.ZipInfo("bin/python3")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "python")
    return path


def check_env(folder: str) -> None:
    env = Path(folder)
    assert (env / "lib" / "site.py").read_text() == "x = 1\n"
    assert os.access(env / "bin" / "python", os.X_OK)
    assert os.readlink(env / "bin" / "python3") == "python"


@pytest.mark.parametrize("maker,name", [(make_tar, "env.tar.gz"), (make_zip, "env.zip")], ids=["tar.gz", "zip"])
def test_an_archive_is_unpacked_once_then_reused(tmp_path, maker, name):
    archive = maker(tmp_path / name)
    sha = envcache.sha256_of(str(archive))
    cache = tmp_path / "cache"
    folder, fd, unpacked = envcache.ensure(str(archive), sha, str(cache))
    os.close(fd)
    assert unpacked and folder == str(cache / sha)
    check_env(folder)
    marker = Path(folder) / "marker"
    marker.write_text("from the first unpack")
    again, fd, unpacked = envcache.ensure(str(archive), sha, str(cache))
    os.close(fd)
    assert (again, unpacked) == (folder, False)
    assert marker.read_text() == "from the first unpack"
    assert [p.name for p in cache.iterdir() if p.name.startswith(".tmp-")] == []


def test_without_a_checksum_the_cache_computes_it(tmp_path):
    archive = make_tar(tmp_path / "env.tar.gz")
    folder, fd, _ = envcache.ensure(str(archive), None, str(tmp_path / "cache"))
    os.close(fd)
    assert Path(folder).name == envcache.sha256_of(str(archive))


def test_a_localized_archive_is_hashed_once_per_node_and_file(tmp_path, monkeypatch):
    """An archive on the cluster's filesystem reaches later jobs as the same localized file:
    its checksum is remembered by real path, size and mtime, not computed in every container."""
    (tmp_path / "filecache").mkdir()
    archive = make_tar(tmp_path / "filecache" / "env.tar.gz")
    link = tmp_path / "container" / "subm-environment.tar.gz"
    link.parent.mkdir()
    link.symlink_to(archive)  # as YARN links a localized file into a container's folder
    cache = tmp_path / "cache"
    folder, fd, _ = envcache.ensure(str(link), None, str(cache))
    os.close(fd)
    hashed = []
    monkeypatch.setattr(envcache, "sha256_of", lambda path: hashed.append(path) or "0" * 64)
    again, fd, unpacked = envcache.ensure(str(link), None, str(cache))
    os.close(fd)
    assert (again, unpacked, hashed) == (folder, False, [])
    archive.write_bytes(archive.read_bytes() + b"\0" * 1024)  # another file now: hashed again
    envcache._remembered_sha256(str(link), str(cache))
    assert hashed == [str(archive)]
    # The cleaner ages the memos out with the environments.
    old = time.time() - 8 * 86400
    for memo in cache.glob(".sum-*"):
        os.utime(memo, (old, old))
    envcache.clean(str(cache), max_age_days=7)
    assert list(cache.glob(".sum-*")) == []


def test_a_wrong_checksum_leaves_nothing_in_the_cache(tmp_path):
    archive = make_tar(tmp_path / "env.tar.gz")
    cache = tmp_path / "cache"
    with pytest.raises(envcache.EnvCacheError, match="computed at submission"):
        envcache.ensure(str(archive), "0" * 64, str(cache))
    assert not (cache / ("0" * 64)).exists()
    assert [p.name for p in cache.iterdir() if not p.name.endswith((".lock", ".unpack"))] == []


def test_a_corrupt_archive_is_an_error_naming_it(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"not gzip at all")
    with pytest.raises(envcache.EnvCacheError, match="env.tar.gz"):
        envcache.ensure(str(archive), envcache.sha256_of(str(archive)), str(tmp_path / "cache"))


def _container(archive: str, sha: str, cache: str, results, done=None) -> None:
    """A container: prepares the environment (complete as soon as it is visible), then keeps
    it in use until ``done`` (the job's end) when given."""
    folder, fd, unpacked = envcache.ensure(archive, sha, cache)
    check_env(folder)
    results.put((folder, unpacked))
    if done is not None:
        done.wait(60)
    os.close(fd)


@pytest.mark.parametrize("maker,name", [(make_tar, "env.tar.gz"), (make_zip, "env.zip")], ids=["tar.gz", "zip"])
def test_containers_starting_together_unpack_once(tmp_path, maker, name):
    archive = maker(tmp_path / name)
    sha = envcache.sha256_of(str(archive))
    cache = tmp_path / "cache"
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_container, args=(str(archive), sha, str(cache), results)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    found = [results.get(timeout=5) for _ in procs]
    assert {folder for folder, _ in found} == {str(cache / sha)}
    assert sorted(unpacked for _, unpacked in found) == [False, False, False, True]



@pytest.mark.parametrize("maker,name", [(make_tar, "env.tar.gz"), (make_zip, "env.zip")], ids=["tar.gz", "zip"])
def test_containers_missing_the_cache_together_each_get_it_while_the_others_use_it(tmp_path, maker, name):
    """The regression: one unpacked and kept it in use, the other waited for it to exit."""
    archive = maker(tmp_path / name)
    sha = envcache.sha256_of(str(archive))
    cache = tmp_path / "cache"
    cache.mkdir()
    # A container that took the entry in use a moment before the others, and will not let go.
    fd = os.open(cache / f"{sha}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH)
    ctx = multiprocessing.get_context("fork")
    results, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_container, args=(str(archive), sha, str(cache), results, done))
             for _ in range(4)]
    try:
        for p in procs:
            p.start()
        found = [results.get(timeout=30) for _ in procs]  # every one ready while all keep it in use
    finally:
        done.set()
        os.close(fd)
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    assert {folder for folder, _ in found} == {str(cache / sha)}
    assert sorted(unpacked for _, unpacked in found) == [False, False, False, True]
    check_env(str(cache / sha))

def _age(cache: Path, sha: str, days: float) -> None:
    old = time.time() - days * 86400
    os.utime(cache / f"{sha}.lock", (old, old))


def test_environments_unused_for_long_are_removed_but_not_recent_ones(tmp_path):
    cache = tmp_path / "cache"
    old = make_tar(tmp_path / "old.tar.gz")
    recent = make_zip(tmp_path / "recent.zip")
    old_sha, recent_sha = envcache.sha256_of(str(old)), envcache.sha256_of(str(recent))
    for archive, sha in ((old, old_sha), (recent, recent_sha)):
        _, fd, _ = envcache.ensure(str(archive), sha, str(cache))
        os.close(fd)
    _age(cache, old_sha, 8)
    assert envcache.clean(str(cache), max_age_days=7) == [old_sha]
    assert sorted(p.name for p in cache.iterdir() if old_sha in p.name) == []  # folder and locks
    assert (cache / recent_sha).is_dir()
    # Asked for again, it is simply unpacked again.
    _, fd, unpacked = envcache.ensure(str(old), old_sha, str(cache))
    os.close(fd)
    assert unpacked


def test_an_environment_in_use_is_never_removed(tmp_path):
    cache = tmp_path / "cache"
    archive = make_tar(tmp_path / "env.tar.gz")
    sha = envcache.sha256_of(str(archive))
    folder, fd, _ = envcache.ensure(str(archive), sha, str(cache))  # a long-running task holds it
    try:
        _age(cache, sha, 30)
        assert envcache.clean(str(cache), max_age_days=7) == []
        check_env(folder)
    finally:
        os.close(fd)
    assert envcache.clean(str(cache), max_age_days=7) == [sha]


def test_an_unpack_in_progress_blocks_the_cleaner_and_old_leftovers_go(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    sha = "f" * 64
    lock = cache / f"{sha}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH)  # someone is unpacking (unpackers use the entry too)
    try:
        _age(cache, sha, 30)
        assert envcache.clean(str(cache), max_age_days=7) == []
    finally:
        os.close(fd)
    leftover = cache / f".tmp-{sha}-crashed"
    leftover.mkdir()
    old = time.time() - 2 * 86400
    os.utime(leftover, (old, old))
    envcache.clean(str(cache), max_age_days=7)
    assert not leftover.exists()


def test_a_shipped_environment_is_first_on_the_tasks_path_and_linked_in_its_folder(tmp_path):
    archive = make_tar(tmp_path / "subm-environment.tar.gz")
    workdir = tmp_path / "container"
    workdir.mkdir()
    env = {"SUBM_ENV_ARCHIVE": str(archive), "SUBM_ENV_SHA256": envcache.sha256_of(str(archive)),
           "SUBM_ENV_CACHE": str(tmp_path / "cache")}
    shipped = envcache.ShippedEnvironment(env, str(workdir))
    task_env = {"PATH": "/usr/bin"}
    shipped.apply(task_env)  # waits for the unpack
    assert task_env["PATH"] == f"{shipped.path}/bin:/usr/bin"
    assert task_env["SUBM_ENVIRONMENT"] == shipped.path
    assert os.path.realpath(workdir / "environment") == shipped.path
    check_env(shipped.path)
    os.close(shipped.lock_fd)


def test_a_shipped_environment_that_cannot_be_unpacked_stops_the_task_with_its_name(tmp_path):
    archive = tmp_path / "subm-environment.tar.gz"
    archive.write_bytes(b"truncated")
    shipped = envcache.ShippedEnvironment({"SUBM_ENV_ARCHIVE": str(archive), "SUBM_ENV_CACHE": str(tmp_path / "c")},
                                          str(tmp_path))
    with pytest.raises(OSError, match="cannot prepare the environment subm-environment.tar.gz"):
        shipped.apply({})
