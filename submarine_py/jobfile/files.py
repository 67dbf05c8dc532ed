"""The job's ``files``: what a destination and a source may be, on both backends.

Destinations are relative paths in a task's working directory, normalized
(``data/./x`` -> ``data/x``); names submarine-py itself puts there are reserved.
Sources must be readable regular files or folders: a FIFO or a device would hang
or fail the copy (local backend) or the archive (YARN).
"""
from __future__ import annotations

import os
import posixpath
from typing import Any, Optional

#: Working-directory names that are submarine-py's own (wrappers, shipped archives, the
#: executor and the modules it imports, the localized environment archive, the job's secret on YARN).
RESERVED_FILE_PREFIXES = (".subm", "subm-environment")
RESERVED_FILES = ("subm_executor.py", "subm_proctree.py", "subm_processes.py", "subm_nvml.py", "subm_am_client.py",
                  "subm_envcache.py", "subm_token")
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
    file or folder (a FIFO or device would hang or fail the copy)."""
    if not os.path.exists(full):
        return f"source {full} does not exist"
    if os.path.isdir(full):
        if not os.access(full, os.R_OK | os.X_OK):
            return f"source folder {full} is not readable"
        return None
    if not os.path.isfile(full):
        return f"source {full} is not a regular file or a folder"
    if not os.access(full, os.R_OK):
        return f"source {full} is not readable"
    return None
