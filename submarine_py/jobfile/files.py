"""The job's ``files``: what a destination and a source may be, on both backends.

Destinations are relative paths in a task's working directory, normalized
(``data/./x`` -> ``data/x``); names submarine-py itself puts there are reserved.
Sources must be readable regular files or folders (and so must what a folder holds): a
FIFO or a device would hang or fail the copy (local backend) or the archive (YARN). Validation
checks them, and each backend again when it submits (:func:`source_problems`).
"""
from __future__ import annotations

import os
import posixpath
import stat
from typing import Any, List, Mapping, Optional, Tuple

from ..executor.main import ENVCACHE, SIBLINGS, shipped_files

#: Working-directory names that are submarine-py's own (wrappers, shipped archives, the
#: executor and the modules it imports, the localized environment archive, the job's secret on YARN).
RESERVED_FILE_PREFIXES = (".subm", "subm-environment")
#: The executor's own files in a task's working directory (its modules: main.py's SIBLINGS),
#: and the job file with the job's secret that YARN localizes there (``app_spec.JOB_FILE``).
RESERVED_FILES = tuple(shipped_files(SIBLINGS + (ENVCACHE,))) + ("subm_job.json",)
#: Where a task finds environment.archive unpacked (a link in its working directory).
ENV_ARCHIVE_DIR = "environment"


def destination(dest: Any) -> Optional[str]:
    """A ``files`` destination as a normalized relative path (``data/./x`` -> ``data/x``), or None."""
    if not isinstance(dest, str) or not dest.strip() or os.path.isabs(dest) or "\0" in dest:
        return None
    norm = posixpath.normpath(dest)
    if norm in (".", "") or norm.split("/")[0] == "..":
        return None
    if ".." in dest.split("/"):
        return None
    return norm


def source_problem(full: str) -> Optional[str]:
    """Why a local ``files`` source cannot be shipped, or None: it must be a readable regular
    file, or a folder whose files and folders are all readable, regular or links (a FIFO or a
    device would hang or fail the copy; a link inside a folder is shipped as a link)."""
    try:
        os.stat(full)
    except FileNotFoundError:
        if os.path.islink(full):
            return f"source {full} is a symbolic link to {os.readlink(full)}, which does not exist"
        return f"source {full} does not exist"
    except OSError as exc:  # e.g. a folder on its path without x permission
        return f"source {full} cannot be reached: {exc.strerror or exc}"
    if os.path.isdir(full):
        return _folder_problem(full)
    if not os.path.isfile(full):
        return f"source {full} is not a regular file or a folder"
    if not os.access(full, os.R_OK):
        return f"source {full} is not readable"
    return None


def _folder_problem(top: str) -> Optional[str]:
    """Why the folder ``top`` cannot be copied whole (the local backend) or packed (YARN): the
    first thing in it that is not readable, or neither a file, a folder nor a link."""
    if not os.access(top, os.R_OK | os.X_OK):
        return f"source folder {top} is not readable"
    for folder, subfolders, names in os.walk(top):
        for name in subfolders + names:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:  # gone while we looked: the walk goes on
                continue
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                if not os.access(path, os.R_OK | os.X_OK):
                    return f"source folder {top} holds {path}, a folder that is not readable"
            elif not stat.S_ISREG(mode):
                return f"source folder {top} holds {path}, which is not a regular file or a folder"
            elif not os.access(path, os.R_OK):
                return f"source folder {top} holds {path}, which is not readable"
    return None


def source_problems(files: Mapping[str, str]) -> List[Tuple[str, str]]:
    """The problems of a job's local ``files`` sources now, each at its field, as validation
    reports them: backends check again when they submit (a source may go between)."""
    problems = []
    for dest, src in files.items():
        problem = None if "://" in src else source_problem(src)
        if problem:
            problems.append((f"files.{dest}", problem))
    return problems
