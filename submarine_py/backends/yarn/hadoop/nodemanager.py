"""A YARN NodeManager's REST API: a container's state and its log files (``subm logs``, the
reports AMs leave in their log folder), with ``requests`` and, on a secure cluster, SPNEGO
(``spnego.py``), as the ResourceManager's in ``rest.py``.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import requests

from ....errors import BackendError
from .resourcemanager import daemon_says, yarn_user
from . import addresses
from .spnego import http_auth


#: A NodeManager's states of a container it has not started yet (its REST API's words).
STILL_LOCALIZING = frozenset({"NEW", "LOCALIZING", "SCHEDULED"})


class LogRefused(BackendError):
    """A NodeManager that has a container's log file answered a server error instead of it."""


def log_refused(node_http: str, container_id: str, name: str, status: int, body: str) -> LogRefused:
    """What a NodeManager's error answer to a log file means, in one line."""
    said = daemon_says(body, most=160)
    why = ""
    if status == 500:
        # Seen on the secure rig (Hadoop 3.1.2 without libhadoop.so): the listing comes, every
        # file answers 500 ("Secure IO is not possible without native code extensions").
        usually = "this" if "native code" in said or "SecureIOUtils" in said else "on a secure cluster this usually"
        why = (f"; {usually} means the NodeManager lacks Hadoop's native library (libhadoop.so in "
               "$HADOOP_HOME/lib/native), without which a secure NodeManager cannot open a user's log "
               "files: its admin installs it (docs/security.md)")
    return LogRefused(f"the NodeManager at {node_http} refused to serve {name} of {container_id} "
                      f"(HTTP {status}: {said}){why}")


def node_log(node_http: str, container_id: str, name: str, timeout: float = 10.0) -> Optional[bytes]:
    """A (small) container log file from its NodeManager (None when the NM no longer has it or
    refuses to serve it)."""
    chunks: List[bytes] = []
    try:
        if stream_node_log(node_http, container_id, name, 0, chunks.append, timeout=timeout) is None:
            return None
    except LogRefused:
        return None
    return b"".join(chunks)


def node_log_sizes(node_http: str, container_id: str, timeout: float = 10.0) -> Optional[Dict[str, int]]:
    """``{file name: size}`` of a container's log files (None when the NM does not know it)."""
    try:
        resp = _session().get(f"{_base(node_http)}/ws/v1/node/containers/{container_id}/logs", timeout=timeout,
                            headers={"Accept": "application/json"}, params={"user.name": yarn_user()},
                            auth=http_auth())
        if resp.status_code != 200:
            return None
        data = resp.json()
    except (requests.RequestException, ValueError):
        return None
    infos = data.get("containerLogsInfo") if isinstance(data, dict) else data
    if isinstance(infos, list):  # some versions: one entry per aggregation type
        infos = next((i for i in infos if isinstance(i, dict)), {})
    entries = (infos or {}).get("containerLogInfo") or []
    if isinstance(entries, dict):
        entries = [entries]
    out = {}
    for e in entries:
        try:
            out[str(e["fileName"])] = int(e.get("fileSize") or 0)
        except (KeyError, TypeError, ValueError):
            continue
    return out


#: Bytes asked for beyond what a file held at the last look, so a file that grows meanwhile
#: is still read from where we stopped in one request.
TAIL_SLACK = 1 << 16
LOG_CHUNK = 1 << 16
_HEADER_LIMIT = 8192


def stream_node_log(node_http: str, container_id: str, name: str, offset: int, write: Callable[[bytes], Any],
                    known_size: Optional[int] = None, timeout: float = 10.0) -> Optional[int]:
    """Copy a container log file from byte ``offset`` on to ``write``, in pieces; returns the
    offset reached (None when the NodeManager does not have the file; :class:`LogRefused` when
    it answers a server error).

    The NodeManager's REST endpoint (Hadoop 3.1) has no ranges: ``size=-N`` gives the last N
    bytes, and its header says the file's length then (``LogLength``), which locates them.
    From offset 0 the whole file is streamed; memory stays flat whatever its size.
    """
    want = None if offset <= 0 else max(1, (known_size or offset) - offset) + TAIL_SLACK
    for _ in range(8):
        params = {"user.name": yarn_user()} if want is None else {"user.name": yarn_user(), "size": str(-want)}
        try:
            resp = _session().get(f"{_base(node_http)}/ws/v1/node/containers/{container_id}/logs/{name}",
                                params=params, timeout=timeout, stream=True, auth=http_auth())
        except requests.RequestException:
            return None
        with resp:
            if resp.status_code >= 500:
                raise log_refused(node_http, container_id, name, resp.status_code, resp.text)
            if resp.status_code != 200:
                return None
            pieces = resp.iter_content(LOG_CHUNK)
            head, rest = _read_header(pieces)
            length = _log_length(head)
            if length is None:  # not the wrapped format: the body is the file itself
                return _copy(rest, pieces, offset, None, write)
            if length <= offset:
                return offset
            body = length if want is None else min(want, length)
            start = length - body
            if start > offset:  # grew past our slack meanwhile: ask for more
                want = length - offset + TAIL_SLACK
                continue
            _copy(rest, pieces, offset - start, body - (offset - start), write)
            return max(length, offset)
    return offset


def _read_header(pieces: Iterator[bytes]) -> Tuple[bytes, bytes]:
    """The NM's header ('Container: ...LogContents:\\n') and what followed it in the last piece."""
    buf = b""
    marker = b"LogContents:\n"
    for piece in pieces:
        buf += piece
        at = buf.find(marker)
        if at >= 0:
            return buf[:at], buf[at + len(marker):]
        if len(buf) > _HEADER_LIMIT:
            break
    return b"", buf


def _log_length(head: bytes) -> Optional[int]:
    for line in head.splitlines():
        if line.startswith(b"LogLength:"):
            try:
                return int(line.split(b":", 1)[1].strip())
            except ValueError:
                return None
    return None


def _copy(first: bytes, pieces: Iterator[bytes], skip: int, count: Optional[int],
          write: Callable[[bytes], Any]) -> int:
    """Write ``count`` bytes (all, if None) after skipping ``skip``, from ``first`` then ``pieces``."""
    done = 0
    for piece in itertools.chain([first], pieces):
        if skip:
            cut = min(skip, len(piece))
            piece, skip = piece[cut:], skip - cut
        if count is not None:
            piece = piece[:count - done]
        if piece:
            write(piece)
            done += len(piece)
        if count is not None and done >= count:
            break
    return done


_sessions: List[requests.Session] = []


def _session() -> requests.Session:
    """One session for every NodeManager: its connections kept, HTTPS trusting what the client
    trusts (``addresses.prepare``)."""
    if not _sessions:
        _sessions.append(addresses.prepare(requests.Session()))
    return _sessions[0]


def _base(node_http: str) -> str:
    return addresses.nm_url(node_http)


def nm_container(node_http: str, container_id: str, timeout: float = 5.0) -> Dict[str, Any]:
    try:
        resp = _session().get(f"{_base(node_http)}/ws/v1/node/containers/{container_id}", timeout=timeout,
                            headers={"Accept": "application/json"}, params={"user.name": yarn_user()},
                            auth=http_auth())
        return (resp.json() or {}).get("container") or {} if resp.status_code == 200 else {}
    except (requests.RequestException, ValueError):
        return {}


def log_files(container: Dict[str, Any]) -> List[str]:
    """The log files a NodeManager lists for a container (``containerLogFiles``)."""
    files = container.get("containerLogFiles") or []
    return [str(f) for f in files] if isinstance(files, list) else [str(files)]


def nm_answers(node_http: str, timeout: float = 1.0) -> bool:
    """Whether a NodeManager's web API answers (a dead machine does not)."""
    try:
        return requests.get(f"{addresses.nm_url(node_http)}/ws/v1/node/info", timeout=timeout,
                            verify=addresses.current_trust().bundle or True).status_code < 500
    except requests.RequestException:
        return False
