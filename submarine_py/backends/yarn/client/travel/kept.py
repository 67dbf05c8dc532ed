"""Packed archives kept on the submitting machine, so that another cluster (or the same one once
its copy was pruned) gets the environment without packing it again: packing gigabytes takes
minutes, uploading them to a cluster nearby seconds.

They are kept in ``SUBM_PACK_CACHE`` (default ``$XDG_CACHE_HOME/subm/packed``, else
``~/.cache/subm/packed``; ``none`` keeps nothing), named as on the cluster, so by the fingerprint
of what is installed. Of the archives of one kind (a venv's, a conda env's, an interpreter's)
the :data:`KEEP` used last stay. Two submissions that need the same archive at once pack it once:
the second waits for the first (a lock per archive) and reuses it.

Beside them, per environment (by its path), a record of the rest layer packed last
(``rest-<hash of the path>.json``): the next submission from that environment, after a small
change, ships a delta above that layer instead of packing the rest again (``layers.py``); only
while that layer's archive is kept here.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

#: Where packed archives are kept; "none" keeps nothing.
PACK_CACHE = "SUBM_PACK_CACHE"
#: How many archives of one kind stay (the environment as it is, and as it was last).
KEEP = 2


def folder() -> Optional[str]:
    """The folder of kept archives, or None when SUBM_PACK_CACHE says "none"."""
    configured = os.environ.get(PACK_CACHE, "").strip()
    if configured.lower() in ("none", "no", "off"):
        return None
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "subm", "packed")


def kind(name: str) -> str:
    """What an archive is an archive of: its name without the fingerprint
    (``env-venv-<fp>.tar.gz`` -> ``env-venv``, ``python3.11-<fp>.tar.gz`` -> ``python3.11``)."""
    return name.rsplit("-", 1)[0]


@contextlib.contextmanager
def archive(name: str, pack: Callable[[str], None]) -> Iterator[Tuple[str, bool]]:
    """The path of the packed archive ``name`` and whether it was packed now: kept from an earlier
    submission, else made by ``pack(path)`` and kept; where keeping is off, or its folder cannot
    be written, made in a temporary folder removed when the block ends."""
    where = folder()
    lock = None
    if where is not None:
        try:
            os.makedirs(where, exist_ok=True)
            lock = open(os.path.join(where, name) + ".lock", "a")
        except OSError:  # a folder that cannot be written (a read-only home): keep nothing
            where = None
    if lock is None:
        with tempfile.TemporaryDirectory(prefix="subm-pack-") as tmp:
            path = os.path.join(tmp, name)
            pack(path)
            yield path, True
        return
    path = os.path.join(where, name)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another submission packing it: wait, then reuse
        fresh = not os.path.exists(path)
        if fresh:
            try:
                pack(path + ".part")
                os.replace(path + ".part", path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + ".part")
        else:
            os.utime(path)  # used now: kept over older ones of its kind
    if fresh:
        trim(where, kind(name))
    yield path, fresh


def trim(where: str, of_kind: str) -> None:
    """Remove the archives of ``of_kind`` but the :data:`KEEP` used last (and their locks)."""
    archives = [e for e in os.scandir(where)
                if e.is_file() and not e.name.endswith((".lock", ".part")) and kind(e.name) == of_kind]
    archives.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        for path in (old.path, old.path + ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def has(name: str) -> bool:
    """Whether the archive ``name`` is kept here."""
    where = folder()
    return where is not None and os.path.isfile(os.path.join(where, name))


def _rest_record(prefix: str) -> Optional[str]:
    where = folder()
    if where is None:
        return None
    return os.path.join(where, f"rest-{hashlib.sha256(prefix.encode()).hexdigest()[:16]}.json")


def previous_rest(prefix: str) -> Optional[Dict[str, Any]]:
    """The record of the rest layer last packed from the environment at ``prefix``, where its
    archive is still kept here (else None)."""
    path = _rest_record(prefix)
    try:
        with open(path or "", encoding="utf-8") as f:
            record = json.load(f)
        name = f"{record['kind']}-{record['fingerprint']}.tar.gz"
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if has(name) else None


def remember_rest(prefix: str, record: Dict[str, Any]) -> None:
    """Keep ``record`` as the rest layer last packed from the environment at ``prefix``."""
    path = _rest_record(prefix)
    if path is None:
        return
    try:
        with open(path + ".part", "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(path + ".part", path)
    except OSError:
        pass  # a delta next time is an optimisation
