"""Packing what travels: the environment (venv-pack, conda-pack), a venv's base interpreter,
and the editable installs' code.

The environment is packed by the libraries made for it: venv-pack rewrites the scripts' shebangs
to ``#!/usr/bin/env python`` (which the task's PATH resolves to the shipped interpreter) and
leaves out what does not relocate; conda-pack relocates a conda env, interpreter included.
Neither packs a venv's base installation, so that one is a tar of ours, without what no job
runs (its own site-packages, which a venv does not see, tests, static libraries, headers).
Editable installs are left out of the environment and packed apart, byte for byte the same
for the same code, so that a change to the code being worked on ships kilobytes.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import threading
from typing import Iterator

from .....errors import SpecError
from .installed import Installed

#: gzip's fastest level: packing gigabytes on the submitting machine costs more than the
#: bigger upload (measured in bench/environment_travel.py).
COMPRESS_LEVEL = 1
_venv_pack_lock = threading.Lock()


def pack_environment(installed: Installed, out: str) -> None:
    """Pack the environment into ``out`` (.tar.gz), editable installs left out."""
    try:
        if installed.kind == "conda":
            import conda_pack

            conda_pack.pack(prefix=installed.prefix, output=out, format="tar.gz", compress_level=COMPRESS_LEVEL,
                            ignore_editable_packages=True, ignore_missing_files=True, force=True, verbose=False)
            return
        import venv_pack

        with _editables_tolerated():
            env = venv_pack.Env(installed.prefix)
        for e in installed.editables:  # their .pth files and import hooks name folders of this machine
            for path in e.files:
                env = env.exclude(path)
        env.pack(output=out, format="tar.gz", compress_level=COMPRESS_LEVEL, force=True, verbose=False)
    except ImportError as exc:
        raise SpecError([("environment", f"packing this {installed.kind} needs {exc.name}: pip install "
                                         "'submarine-py[yarn]', or set environment.python to an interpreter "
                                         "every node has")]) from None
    except OSError:
        raise
    except Exception as exc:  # venv-pack's and conda-pack's own errors
        raise SpecError([("environment", f"{installed.prefix} cannot be packed: {exc}")]) from None


@contextlib.contextmanager
def _editables_tolerated() -> Iterator[None]:
    """venv-pack refuses a venv with an editable install; here they travel on their own and
    their files are excluded (:func:`_editable_files`), so its check is stood down while the
    environment is read."""
    import venv_pack.core as core

    with _venv_pack_lock:
        check = core.check_no_editable_packages
        core.check_no_editable_packages = lambda context: None
        try:
            yield
        finally:
            core.check_no_editable_packages = check


def _skip_in_base(installed: Installed, rel: str) -> bool:
    lib = f"lib/python{installed.version}"
    return (rel.startswith((f"{lib}/site-packages/", f"{lib}/test/", f"{lib}/config-", "include/", "share/",
                            f"{lib}/idlelib/", f"{lib}/lib2to3/tests/", f"{lib}/ensurepip/_bundled/"))
            or rel.endswith(".a"))


def pack_base(installed: Installed, out: str) -> None:
    """Pack the venv's base installation into ``out`` (.tar.gz), symlinks kept."""
    base = installed.base_prefix
    with tarfile.open(out, "w:gz", compresslevel=COMPRESS_LEVEL) as tar:
        for root, dirs, files in os.walk(base):
            rel_root = os.path.relpath(root, base)
            dirs.sort()
            for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                rel = os.path.normpath(os.path.join(rel_root, name))
                if not _skip_in_base(installed, rel):
                    tar.add(os.path.join(root, name), arcname=rel, recursive=False)
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))
                       and not _skip_in_base(installed, os.path.normpath(os.path.join(rel_root, d)) + "/")]


def pack_code(installed: Installed) -> bytes:
    """The editable installs' code as a .tar.gz, the same bytes for the same code (sorted, no
    times, no owners): its hash names it. Compiled files and hidden folders stay behind."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for _, (name, path) in sorted((e.name, p) for e in installed.editables for p in e.paths):
                top = name if os.path.isdir(path) else os.path.basename(path)
                for src, arc in _code_files(path, top):
                    info = tar.gettarinfo(src, arcname=arc)
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    if info.isreg():
                        with open(src, "rb") as f:
                            tar.addfile(info, f)
                    else:
                        tar.addfile(info)
    return buf.getvalue()


def _code_files(path: str, top: str) -> Iterator[tuple]:
    if not os.path.isdir(path):
        yield path, top
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        rel = os.path.relpath(root, path)
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                yield os.path.join(root, name), os.path.normpath(os.path.join(top, rel, name))
