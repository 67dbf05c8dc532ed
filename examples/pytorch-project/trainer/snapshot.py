"""Snapshots for resuming: written by rank 0, read by every rank when a run (re)starts.

A snapshot path is either a local path that every rank sees (a shared folder:
``$SUBM_SHARED_DIR`` under subm, NFS...) or a URI on the cluster filesystem
(``hdfs://...``, ``viewfs://...``), copied with the ``hadoop fs`` command.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, Optional

import torch

#: Cluster-filesystem folders made already (each `hadoop fs` call starts a JVM).
_made = set()


def _is_uri(path: str) -> bool:
    return "://" in path


def _hadoop() -> str:
    found = shutil.which("hadoop")
    for var in ("HADOOP_HOME", "HADOOP_COMMON_HOME"):
        if not found and os.environ.get(var):
            candidate = os.path.join(os.environ[var], "bin", "hadoop")
            found = candidate if os.path.exists(candidate) else None
    if not found:
        raise RuntimeError("a cluster-filesystem snapshot needs the `hadoop` command (PATH or HADOOP_HOME)")
    return found


def load(path: str) -> Optional[Dict[str, Any]]:
    """The snapshot at ``path``, or None when there is none yet."""
    if not _is_uri(path):
        return torch.load(path, map_location="cpu") if os.path.exists(path) else None
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "snapshot.pt")
        got = subprocess.run([_hadoop(), "fs", "-get", path, local], capture_output=True, text=True)
        if got.returncode != 0:
            if "No such file" in got.stderr or "does not exist" in got.stderr:
                return None
            raise RuntimeError(f"hadoop fs -get {path} failed: {got.stderr.strip()[-500:]}")
        return torch.load(local, map_location="cpu")


def save(state: Dict[str, Any], path: str) -> None:
    """Write atomically: a crash mid-write never leaves half a snapshot behind."""
    if not _is_uri(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, path)
        return
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "snapshot.pt")
        torch.save(state, local)
        parent = path.rsplit("/", 1)[0]
        if parent not in _made:
            subprocess.run([_hadoop(), "fs", "-mkdir", "-p", parent], capture_output=True, text=True)
            _made.add(parent)
        put = subprocess.run([_hadoop(), "fs", "-put", "-f", local, path], capture_output=True, text=True)
        if put.returncode != 0:
            raise RuntimeError(f"hadoop fs -put {path} failed: {put.stderr.strip()[-500:]}")
