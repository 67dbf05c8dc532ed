"""Which files of the user's folder of travelling environments go: what nothing uses any more.

Each change of the environment (a package installed) or of the code being edited uploads a new
archive under ``/user/<user>/.subm/environments``; the old ones, gigabytes each, would stay
forever. An upload killed half-way (SIGKILL, a machine that died: ``Files.put`` removes its own
otherwise) leaves its ``.part-*`` file. Pruning runs after an upload, from one listing:

* a ``.part-*`` file created a day ago or more (HDFS stamps a file when it is created and when
  it is closed; no upload takes a day);
* an archive the job being submitted does not use, that no node has localized, and nothing
  written, for ``UNUSED_DAYS``: YARN reads the archive on each node that localizes it, which
  moves its access time (HDFS keeps access times to the hour by default,
  ``dfs.namenode.accesstime.precision``; where that is 0, access times are off and the
  modification time decides). A job still running that was submitted weeks ago from an
  environment since changed keeps its unpacked copy in the nodes' cache; only a node that
  never had it would need the archive again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List

#: An archive nobody used for this long is removed.
UNUSED_DAYS = 14
#: A ``.part-*`` upload nobody wrote to for this long is removed.
PART_DAYS = 1
DAY_MS = 24 * 3600 * 1000
#: The names of what ``plan`` uploads (see ``travel.plan``).
ARCHIVE_PREFIXES = ("env-", "site-", "python", "code-")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz")


@dataclass(frozen=True)
class Stale:
    """A file to remove, and why (for what subm says)."""

    path: str
    size: int
    why: str


def stale(entries: Iterable[Dict[str, Any]], keep: Iterable[str], now_ms: int) -> List[Stale]:
    """Of a folder's WebHDFS listing (``name``, ``type``, ``length``, ``accessTime``,
    ``modificationTime``), the files to remove; ``keep``: paths the job uses."""
    keep = set(keep)
    out = []
    for e in entries:
        path = str(e.get("name", ""))
        base = path.rsplit("/", 1)[-1]
        if str(e.get("type", "")).lower() != "file" or path in keep:
            continue
        modified = int(e.get("modificationTime") or 0)
        used = max(int(e.get("accessTime") or 0), modified)
        size = int(e.get("length") or e.get("size") or 0)
        if ".part-" in base:
            if now_ms - modified > PART_DAYS * DAY_MS:
                out.append(Stale(path, size, "an upload left unfinished"))
        elif base.startswith(ARCHIVE_PREFIXES) and base.endswith(ARCHIVE_SUFFIXES):
            if now_ms - used > UNUSED_DAYS * DAY_MS:
                out.append(Stale(path, size, f"unused for {UNUSED_DAYS} days"))
    return out
