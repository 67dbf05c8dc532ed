"""The executor on the cluster's filesystem: one copy per version of it, shared by every job.

Each file skein ships from the submitting machine is one more upload at submission (about
0.2-0.4 s each on the project's rig: HDFS creates, writes and closes it) and one more download
by each node for each job. The executor (one file, ``executor/bundle.py``) is the same for every
job of a subm version, so it is kept under the user's folder, named by the hash of its bytes,
and uploaded once through the NameNode's WebHDFS (``travel/webhdfs.py``, SPNEGO on a secure
cluster). Containers localize it PRIVATE: the NodeManager's per-user cache keeps it across jobs.

Where the cluster's default filesystem is not HDFS, or its WebHDFS does not answer when the
request is built, the executor travels with each job as before: sharing it only saves time.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ....errors import BackendError, SpecError
from ..hadoop.webhdfs import ClusterFilesystem, Files

#: Where the copies are kept, under the user's folder on the cluster's filesystem.
FOLDER = ".subm/executors"

log = logging.getLogger("subm.yarn")


@dataclass(frozen=True)
class SharedExecutor:
    """The executor's copy for this job: its URI, whether it is already there (else ``submit``
    uploads it first), and the source it was named after (what ``submit`` uploads, so that the
    bytes match the name even if the installed package changed meanwhile)."""

    uri: str
    present: bool
    source: str = field(repr=False, default="")


def uri_of(where: ClusterFilesystem, user: str, source: str) -> str:
    return f"{where.uri}/user/{user}/{FOLDER}/executor-{hashlib.sha256(source.encode()).hexdigest()[:20]}.py"


def locate(files_of: Callable[[], Files], user: str, source: str) -> Optional[SharedExecutor]:
    """The shared copy of the executor ``source`` and whether it is there; None where it cannot
    be shared (no HDFS as the default filesystem, WebHDFS not answering): it then travels with
    the job. ``files_of`` builds the cluster's :class:`Files` (the login's SPNEGO on a secure one)."""
    try:
        files = files_of()
        uri = uri_of(files.where, user, source)
        return SharedExecutor(uri=uri, present=files.exists(files.path(uri)), source=source)
    except (SpecError, BackendError) as exc:
        log.debug("the executor travels with the job: %s", exc)
        return None


def ensure(files: Files, shared: SharedExecutor, say: Callable[[str], None]) -> None:
    """Upload the executor where it was not there when the request was built."""
    if shared.present:
        return
    path = files.path(shared.uri)
    with tempfile.TemporaryDirectory(prefix="subm-executor-") as tmp:
        local = os.path.join(tmp, os.path.basename(path))
        with open(local, "w") as f:
            f.write(shared.source)
        began = time.monotonic()
        files.put(local, path)
    say(f"executor: uploaded to {shared.uri} ({len(shared.source) / 1e3:.0f} kB) in {time.monotonic() - began:.1f} s "
        "(once: later jobs reuse it)")
