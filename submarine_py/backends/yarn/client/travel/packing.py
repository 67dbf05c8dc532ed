"""Packing what travels: a venv's layers and its small rest (venv-pack's rewriting), a conda env
(conda-pack), a venv's base interpreter, and the editable installs' code.

The environment is packed by the libraries made for it: venv-pack rewrites the scripts' shebangs
to ``#!/usr/bin/env python`` (which the task's PATH resolves to the shipped interpreter) and
leaves out what does not relocate; conda-pack relocates a conda env, interpreter included.
A venv's distributions travel as layers (``layers.py``), each a tar of its entries in
site-packages; what no distribution owns (``bin/``, the venv's own files) goes through venv-pack.
Neither library packs a venv's base installation, so that one is a tar of ours, without what no
job runs (its own site-packages, which a venv does not see, tests, static libraries, headers).
Editable installs are left out of the environment and packed apart, byte for byte the same
for the same code, so that a change to the code being worked on ships kilobytes.

A layer is a tar gzipped at the fastest level, several packed at once (zlib works outside
Python's lock): packing costs more (~46 MB/s a core on the rig's machine) but the bytes that
travel, sit in HDFS and in YARN's node cache halve (a CUDA wheel packs to about half), and a
node unpacks it at its disk's speed (bench/environment_travel.py prints the figures beside the
floor). The venv's own small archive and the interpreter's are plain tars YARN unpacks.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import threading
from typing import Callable, Iterator, Optional

from .....errors import SpecError
from .installed import Installed
from .layers import Layer

#: ``progress(n)``: n more bytes of the sources packed.
Progress = Optional[Callable[[int], None]]

#: gzip's level for a layer and a conda env (conda-pack): the fastest.
COMPRESS_LEVEL = 1
_venv_pack_lock = threading.Lock()


def pack_environment(installed: Installed, out: str, progress: Progress = None) -> None:
    """Pack the environment into ``out``: a conda env whole (.tar.gz); of a venv what its
    layers do not hold (.tar), editable installs left out."""
    try:
        if installed.kind == "conda":
            import conda_pack

            conda_pack.pack(prefix=installed.prefix, output=out, format="tar.gz", compress_level=COMPRESS_LEVEL,
                            ignore_editable_packages=True, ignore_missing_files=True, force=True, verbose=False)
            return
        import venv_pack

        with _editables_tolerated():
            env = venv_pack.Env(installed.prefix)
        _pack_venv_rest(env, installed, out, progress)
    except ImportError as exc:
        raise SpecError([("environment", f"packing this {installed.kind} needs {exc.name}: pip install "
                                         "'submarine-py[yarn]', or set environment.python to an interpreter "
                                         "every node has")]) from None
    except OSError:
        raise
    except Exception as exc:  # venv-pack's and conda-pack's own errors
        raise SpecError([("environment", f"{installed.prefix} cannot be packed: {exc}")]) from None


def _pack_venv_rest(env, installed: Installed, out: str, progress: Progress) -> None:
    """venv-pack's packing of the venv's files but those its layers hold and the editable
    installs' (their .pth files and import hooks name folders of this machine)."""
    from venv_pack.core import Packer
    from venv_pack.formats import archive

    left_out = left_out_of_environment(installed)
    with open(out, "wb") as f, archive(f, "tar") as arc:
        packer = Packer(env._context, arc, None)
        for file in env.files:
            if not _under(file.target, left_out):
                packer.add(file)
                if progress is not None:
                    progress(_size(file.source))
        packer.finish()


def bytes_to_pack(root: str, entries=None, left_out=frozenset()) -> int:
    """The bytes of the files under ``root`` (only its ``entries`` where given; never those
    under ``left_out``), links not followed: what a meter of packing counts to."""
    total = 0
    for top in (entries if entries is not None else [""]):
        start = os.path.join(root, top) if top else root
        if os.path.isfile(start) and not os.path.islink(start):
            total += os.path.getsize(start)
            continue
        for here, dirs, files in os.walk(start):
            rel = os.path.relpath(here, root)
            dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel, d)) not in left_out]
            for f in files:
                path = os.path.join(here, f)
                if not os.path.islink(path) and os.path.normpath(os.path.join(rel, f)) not in left_out:
                    total += os.lstat(path).st_size
    return total


def left_out_of_environment(installed: Installed) -> set:
    """What of the venv its own archive leaves to the layers and the editable installs (paths
    relative to its prefix)."""
    out = {f"{installed.site}/{e}" for d in installed.dists for e in d.entries}
    return out | {path for e in installed.editables for path in e.files}


def _under(target: str, paths: set) -> bool:
    """Whether ``target`` is one of ``paths`` or inside one."""
    parts = target.split("/")
    return any("/".join(parts[:i]) in paths for i in range(1, len(parts) + 1))


def _size(path: str) -> int:
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_size if not os.path.islink(path) else 0


def pack_layer(installed: Installed, layer: Layer, out: str, progress: Progress = None) -> None:
    """Pack ``layer``'s entries of the venv's site-packages into the .tar.gz ``out``, laid out
    as there (``torch/...``, ``nvidia/cudnn/...``), symlinks kept."""
    site = os.path.join(installed.prefix, installed.site)
    try:
        with tarfile.open(out, "w:gz", compresslevel=COMPRESS_LEVEL, format=tarfile.PAX_FORMAT,
                          copybufsize=1 << 20) as tar:
            for entry in layer.entries:
                _add_tree(tar, site, entry, progress)
    except OSError as exc:
        raise SpecError([("environment", f"cannot pack {layer.kind} of {installed.prefix} into {out}: "
                                         f"{exc.strerror or exc}")]) from None


def _add_tree(tar: tarfile.TarFile, root: str, rel: str, progress: Progress) -> None:
    """Add ``root/rel`` (a file, a link or a folder with all in it) as ``rel``, counting bytes."""
    path = os.path.join(root, rel)
    if not os.path.lexists(path):
        return  # RECORD names a file that is gone: nothing to ship
    for src, arc in _tree(path, rel):
        _add(tar, src, arc, progress)


def _add(tar: tarfile.TarFile, src: str, arc: str, progress: Progress) -> None:
    """Add the file, link or folder ``src`` alone as ``arc``, a file's bytes counted."""
    info = tar.gettarinfo(src, arcname=arc)
    if info.isreg():
        with open(src, "rb") as f:
            tar.addfile(info, _Counted(f, progress))
    else:
        tar.addfile(info)


def _tree(path: str, rel: str) -> Iterator[tuple]:
    yield path, rel
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            sub = os.path.relpath(root, path)
            for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                yield os.path.join(root, name), os.path.normpath(os.path.join(rel, sub, name))
            for d in list(dirs):
                if os.path.islink(os.path.join(root, d)):
                    dirs.remove(d)
                else:
                    yield os.path.join(root, d), os.path.normpath(os.path.join(rel, sub, d))


class _Counted:
    """A file read by tarfile, each block counted."""

    def __init__(self, f, progress: Progress):
        self._f, self._progress = f, progress

    def read(self, n: int = -1) -> bytes:
        block = self._f.read(n)
        if block and self._progress is not None:
            self._progress(len(block))
        return block


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


def base_bytes(installed: Installed) -> int:
    """The bytes :func:`pack_base` packs, about."""
    base, total = installed.base_prefix, 0
    for root, dirs, files in os.walk(base):
        rel_root = os.path.relpath(root, base)
        dirs[:] = [d for d in dirs if not _skip_in_base(installed, os.path.normpath(os.path.join(rel_root, d)) + "/")]
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path) and not _skip_in_base(installed, os.path.normpath(os.path.join(rel_root, name))):
                total += os.lstat(path).st_size
    return total


def pack_base(installed: Installed, out: str, progress: Progress = None) -> None:
    """Pack the venv's base installation into the tar ``out``, symlinks kept."""
    base = installed.base_prefix
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT, copybufsize=1 << 20) as tar:
        for root, dirs, files in os.walk(base):
            rel_root = os.path.relpath(root, base)
            dirs.sort()
            for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                rel = os.path.normpath(os.path.join(rel_root, name))
                if not _skip_in_base(installed, rel):
                    _add(tar, os.path.join(root, name), rel, progress)
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
