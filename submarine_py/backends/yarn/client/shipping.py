"""The job's ``files`` as YARN ships them: one archive, laid out as real files.

YARN (through skein) localizes each file as a symlink into its own cache
folder and takes flat names only. Python resolves a script's real path, so a
script linked that way cannot import the modules shipped beside it, and a
destination such as ``data/input.txt`` cannot be named at all. So every local
source goes into one tar archive, under its destination; YARN localizes that
one file, and the executor unpacks it in the container's working directory
before the task starts: real files and folders, exactly as the local backend
copies them. ``scheme://`` sources (HDFS...) are localized by YARN under a flat
internal name and linked at their destination by the executor.
"""
from __future__ import annotations

import os
import tarfile
from typing import Dict, Mapping

from ....errors import SpecError
from ....executor import protocol
from ....jobfile.files import source_problem

#: Names in the container's working directory (reserved by the spec's validation).
FILES_ARCHIVE = ".subm-files.tar.gz"
URL_PREFIX = ".subm-url-"


def local_sources(files: Mapping[str, str]) -> Dict[str, str]:
    return {d: s for d, s in files.items() if "://" not in s}


def url_sources(files: Mapping[str, str]) -> Dict[str, str]:
    """destination -> the flat name YARN localizes a ``scheme://`` source under."""
    remote = sorted(d for d, s in files.items() if "://" in s)
    return {d: f"{URL_PREFIX}{n}" for n, d in enumerate(remote)}


def executor_env(files: Mapping[str, str]) -> Dict[str, str]:
    """What tells the executor to lay the files out (see ``executor/main.py``)."""
    env = {}
    if local_sources(files):
        env[protocol.FILES_ARCHIVE] = FILES_ARCHIVE
    links = url_sources(files)
    if links:
        env[protocol.FILES_LINKS] = protocol.encode_links(links)
    return env


def pack_files(files: Mapping[str, str], out: str) -> None:
    """Write the local sources of ``files`` into the tar archive ``out``, each under its
    destination. A source that is a symlink ships what it points to; inside a folder,
    symlinks stay symlinks (as the local backend copies them)."""
    try:
        with tarfile.open(out, "w:gz", compresslevel=1) as tar:
            for dest, src in sorted(local_sources(files).items()):
                try:
                    tar.add(os.path.realpath(src), arcname=dest, recursive=True)
                except OSError as exc:  # gone (or changed) since validation
                    raise SpecError([(f"files.{dest}", source_problem(src) or f"cannot read {src} to ship "
                                                       f"it: {exc.strerror or exc}")]) from None
    except OSError as exc:
        raise SpecError([("files", f"cannot write the files' archive {out}: {exc}")]) from None
