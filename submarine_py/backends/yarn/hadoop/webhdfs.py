"""The cluster's filesystem, from the submitting machine: WebHDFS through fsspec.

The submitting machine (a laptop, an edge node) has no Hadoop client and no ``libhdfs.so``;
the NameNode's web address answers HTTP, and on a secure cluster SPNEGO (the login subm
already holds, ``spnego.http_auth``). fsspec's WebHDFS follows the NameNode's redirect to a
DataNode for the bytes (an upload: one CREATE, streamed, :func:`_stream`). Its errors become
BackendErrors here that name the path and the address.
"""
from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlparse

from ....errors import BackendError, SpecError
from . import addresses
from .resourcemanager import rm_wait_seconds, say as say_line

#: What a NameNode that is not the active one says (HDFS HA): the call goes to another.
NOT_ACTIVE = ("StandbyException", "in state standby", "RetriableException", "ObserverRetryOnActiveException",
              "NameNode still not started", "Server too busy")
#: What a NameNode that does not answer raises (requests' ConnectionError and its kin).
NO_ANSWER = ("ConnectionError", "ConnectTimeout", "ReadTimeout", "ChunkedEncodingError", "ProtocolError",
             "RemoteDisconnected")


@dataclass(frozen=True)
class ClusterFilesystem:
    """Where the cluster's default filesystem is: ``hdfs://authority`` and its NameNodes' web
    URLs (every NameNode of a nameservice; HTTPS where ``dfs.http.policy`` says so)."""

    uri: str
    namenode_urls: Tuple[str, ...]

    @classmethod
    def from_conf(cls, conf_dir: Optional[str] = None) -> "ClusterFilesystem":
        """From core-site.xml's ``fs.defaultFS`` and hdfs-site.xml (``addresses.py``)."""
        found = addresses.from_conf(conf_dir)
        if found.fs_problem:
            raise SpecError([("environment", f"{found.fs_problem}, so the environment cannot travel through it: "
                                             "set environment.python to an interpreter every node has")])
        return cls(uri=found.fs_uri, namenode_urls=found.namenode_urls)


class Files:
    """What submission does on the cluster's filesystem: ask whether a path exists, upload a file.
    Each call goes to the NameNode that answered last, then to the others: one that does not
    answer or is not the active one (HA) is passed over, for up to SUBM_RM_WAIT seconds."""

    def __init__(self, where: ClusterFilesystem, user: str, auth: Any = None,
                 say: Callable[[str], None] = say_line, wait_seconds: Optional[float] = None):
        self.where, self.user = where, user
        self._auth = auth
        self._fs: Dict[int, Any] = {}
        self.active = 0
        self._switching = threading.Lock()
        self.say = say
        self.wait_seconds = rm_wait_seconds() if wait_seconds is None else wait_seconds

    def _filesystem(self, i: Optional[int] = None) -> Any:
        i = self.active if i is None else i
        if i not in self._fs:
            try:
                from fsspec.implementations.webhdfs import WebHDFS
            except ImportError:
                raise BackendError("shipping the environment to HDFS needs fsspec: pip install "
                                   "'submarine-py[yarn]'") from None
            url = urlparse(self.where.namenode_urls[i])
            https = url.scheme == "https"
            # skip_instance_cache: fsspec would hand back another user's instance of this address.
            fs = WebHDFS(url.hostname, port=url.port or (addresses.NN_HTTPS_PORT if https else addresses.NN_HTTP_PORT),
                         user=None if self._auth else self.user, use_https=https, skip_instance_cache=True)
            addresses.prepare(fs.session)
            if self._auth is not None:
                fs.session.auth = self._auth
            self._fs[i] = fs
        return self._fs[i]

    def _call(self, what: str, path: str, fn: Callable[[Any], Any]) -> Any:
        """``fn(filesystem)`` on the active NameNode, found as the module says."""
        urls = self.where.namenode_urls
        started, before = time.monotonic(), self.active
        failures: Dict[str, str] = {}
        wait = self.wait_seconds if len(urls) == 1 else max(self.wait_seconds, 30.0)
        while True:
            for i in [self.active] + [j for j in range(len(urls)) if j != self.active]:
                try:
                    out = fn(self._filesystem(i))
                except FileNotFoundError:
                    raise
                except Exception as exc:
                    refused = addresses.untrusted(urls[i], exc)
                    if refused is not None:
                        raise refused from None
                    if not _elsewhere(exc):
                        raise BackendError(f"could not {what} {self.where.uri}{path} through the NameNode's WebHDFS "
                                           f"at {urls[i]}: {_said(exc)}") from None
                    failures[urls[i]] = _said(exc)
                    continue
                if not failures:
                    # Served where it was sent first; a call begun before a failover (an upload's
                    # stream to its DataNode) does not send the others back to a NameNode since gone.
                    return out
                with self._switching:  # uploads run side by side: the first to switch says so
                    switched, self.active = i != self.active, i
                if i != before and switched:
                    gone = "; ".join(f"{u} {w}" for u, w in failures.items() if u != urls[i])
                    self.say(f"HDFS failed over: {gone}; {urls[i]} serves (after {time.monotonic() - started:.0f} s)")
                return out
            waited = time.monotonic() - started
            if waited >= wait:
                where = "; ".join(f"{u} ({w})" for u, w in failures.items())
                raise BackendError(f"could not {what} {self.where.uri}{path}: no NameNode serves WebHDFS at {where}"
                                   f"{f', waited {waited:.0f} s' if wait else ''}; check HADOOP_CONF_DIR, or wait "
                                   "longer with SUBM_RM_WAIT=SECONDS") from None
            time.sleep(1.0)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (fsspec's own ``exists`` says False for any error: a standby's too)."""
        try:
            self._call("read", path, lambda fs: fs.info(path))
        except FileNotFoundError:
            return False
        return True

    def put(self, local: str, path: str, progress: Optional[Callable[[int], None]] = None) -> None:
        """Upload ``local`` to ``path``: under a name of its own first, renamed when whole, so
        that a job never localizes half a file, and two submissions racing both succeed. A
        NameNode failing over mid-way costs the part written so far: it is written again whole.
        ``progress(n)`` is called as each ``n`` more bytes are sent (with a negative ``n`` where
        a failover makes the bytes sent so far count for nothing)."""
        part = f"{path}.part-{secrets.token_hex(4)}"
        folder = os.path.dirname(path)
        self._call("create", folder, lambda fs: fs.makedirs(folder, exist_ok=True))
        try:
            self._call("write", part, lambda fs: _stream(fs, local, part, progress))
            if not self.exists(path):
                self._call("rename to", path, lambda fs: _rename(fs, part, path))
        finally:
            try:
                if self.exists(part):
                    self._call("remove", part, lambda fs: fs.rm(part))
            except Exception:
                pass

    def listing(self, folder: str) -> List[Dict[str, Any]]:
        """The files of ``folder`` as WebHDFS lists them (``[]`` when there is no such folder)."""
        try:
            return list(self._call("list", folder, lambda fs: fs.ls(folder, detail=True)))
        except FileNotFoundError:
            return []

    def remove(self, path: str) -> None:
        self._call("remove", path, lambda fs: fs.rm(path))

    def uri(self, path: str) -> str:
        return f"{self.where.uri}{path}"

    def path(self, uri: str) -> str:
        """The path of ``uri`` (one of :meth:`uri`'s) on the cluster's filesystem."""
        return uri[len(self.where.uri):]


#: The bytes read from the file per block sent: large, so that an upload of gigabytes is not a
#: million small writes (http.client asks for 8 KB).
UPLOAD_BLOCK = 4 << 20


class _Blocks:
    """A file as a request's body, read in :data:`UPLOAD_BLOCK` blocks, each one counted."""

    def __init__(self, f: Any, size: int, progress: Optional[Callable[[int], None]]):
        self._f, self._size, self._progress, self.sent = f, size, progress, 0

    def read(self, _n: int = -1) -> bytes:
        block = self._f.read(UPLOAD_BLOCK)
        self.sent += len(block)
        if block and self._progress is not None:
            self._progress(len(block))
        return block

    def __len__(self) -> int:
        return self._size


def _stream(fs: Any, local: str, part: str, progress: Optional[Callable[[int], None]]) -> None:
    """Write ``local`` to ``part`` in one WebHDFS CREATE, its bytes streamed to the DataNode the
    NameNode names. (fsspec's ``put_file`` creates an empty file, then APPENDs every 5 MB: a
    NameNode call and a new write pipeline each, ~26 MB/s on the rig against ~195 MB/s for one
    stream, bench/environment_travel.py.)"""
    size = os.path.getsize(local)
    created = fs._call("CREATE", "PUT", part, redirect=False, overwrite="true")
    location = fs._apply_proxy(created.headers["Location"])
    with open(local, "rb") as f:
        body = _Blocks(f, size, progress)
        try:
            written = fs.session.put(location, data=body, headers={"content-type": "application/octet-stream",
                                                                   "Content-Length": str(size)})
            written.raise_for_status()
        except BaseException:
            if progress is not None and body.sent:
                progress(-body.sent)  # written again whole, maybe through another NameNode
            raise


def _rename(fs: Any, part: str, path: str) -> None:
    """Rename ``part`` to ``path``; done already where a failover hid the first answer."""
    try:
        fs.mv(part, path)
    except FileNotFoundError:
        if not fs.exists(path):
            raise


def _elsewhere(exc: BaseException) -> bool:
    """Whether another NameNode (or this one, later) may serve what ``exc`` refused: it does not
    answer, or it is not the active one."""
    names = {type(e).__name__ for e in _chain(exc)}
    text = " ".join(str(e) for e in _chain(exc))
    return bool(names & set(NO_ANSWER)) or any(w in text for w in NOT_ACTIVE) or isinstance(exc, ConnectionError)


def _chain(exc: BaseException) -> List[BaseException]:
    out: List[BaseException] = []
    while exc is not None and len(out) < 8:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def _said(exc: BaseException) -> str:
    """What a failed WebHDFS call says, in a few words."""
    text = " ".join(str(exc).split())
    if any(w in text for w in ("in state standby", "StandbyException")):
        return "is a standby"
    for words in ("Connection refused", "timed out", "Name or service not known", "No route to host"):
        if words in text:
            return f"does not answer ({words.lower()})"
    if type(exc).__name__ in NO_ANSWER:
        return f"does not answer ({type(exc).__name__})"
    return text[:300] or type(exc).__name__
