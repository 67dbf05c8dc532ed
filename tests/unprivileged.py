"""The part of a test that must not be able to read a file, run by a user who cannot.

No file's mode stops root, and CI runs as root; so a test of what ``subm`` says about a file it
cannot read runs that part as ``nobody`` there (:func:`as_unprivileged`), and as itself
elsewhere. Not through ``runuser``: nobody could not start this interpreter, which may live
under ``/root`` (mode 0700), as it does in CI. The test process forks instead, and the child
gives up root (groups, group, user) before calling the test's function; what that function
imports must be imported already (nobody cannot reach this interpreter's library either), so
the tests run the same command once beforehand, on the file while it is readable.

What the test makes, and the folders above it, must be reachable by nobody but for what is
meant to be unreadable: :func:`reachable_tmp_path` gives such a folder (pytest's ``tmp_path``
is under root's 0700 ``pytest-of-root``).
"""
from __future__ import annotations

import os
import pickle
import pwd
import shutil
import stat
import tempfile
import traceback
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest

#: Who the part that must not read runs as, where this process is root.
UNPRIVILEGED = "nobody"

T = TypeVar("T")


def _reachable_by_others(path: Path) -> bool:
    """Whether every folder from ``/`` down to ``path`` lets others through (o+x)."""
    path = path.resolve()
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in (path, *path.parents))


@pytest.fixture
def reachable_tmp_path() -> Iterator[Path]:
    """A new folder (mode 0755) whose every folder above lets others through: the temporary
    folder where it does, else ``/tmp``; removed afterwards, whatever its test made unreadable."""
    base = Path(tempfile.gettempdir())
    folder = Path(tempfile.mkdtemp(prefix="subm-test-", dir=base if _reachable_by_others(base) else "/tmp"))
    folder.chmod(0o755)
    yield folder
    for inside, subfolders, _ in os.walk(folder):
        for name in subfolders:
            os.chmod(os.path.join(inside, name), 0o755)  # so that rmtree may go in
    shutil.rmtree(folder, ignore_errors=True)


def as_unprivileged(fn: Callable[[], T]) -> T:
    """``fn()``: in this process where it is not root; as root, in a child that is
    :data:`UNPRIVILEGED` (no supplementary groups, that user's group), whose return value (or
    exception, with its traceback) comes back through a pipe."""
    if os.geteuid() != 0:
        return fn()
    user = pwd.getpwnam(UNPRIVILEGED)
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(readable)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            try:
                outcome = ("value", fn())
            except BaseException as exc:  # noqa: B902 - everything goes back to the test
                outcome = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            with os.fdopen(writable, "wb") as out:
                pickle.dump(outcome, out)
        except BaseException:  # noqa: B902
            code = 70
        finally:
            os._exit(code)
    os.close(writable)
    with os.fdopen(readable, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        pytest.fail(f"the child running as {UNPRIVILEGED} said nothing (wait status {status})")
    kind, value = pickle.loads(data)
    if kind == "error":
        pytest.fail(f"as {UNPRIVILEGED}: {value}", pytrace=False)
    return value
