"""The cluster's filesystem, from the submitting machine: WebHDFS through fsspec.

The submitting machine (a laptop, an edge node) has no Hadoop client and no ``libhdfs.so``;
the NameNode's web address answers HTTP, and on a secure cluster SPNEGO (the login subm
already holds, ``spnego.http_auth``). fsspec's WebHDFS follows the NameNode's redirect to a
DataNode for the bytes. Its errors become BackendErrors here that name the path and the address.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import urlparse

from ....errors import BackendError, SpecError
from .conf import hadoop_conf

NAMENODE_HTTP_PORT = 9870


@dataclass(frozen=True)
class ClusterFilesystem:
    """Where the cluster's default filesystem is: ``hdfs://authority`` and the NameNode's web address."""

    uri: str
    http_address: str

    @classmethod
    def from_conf(cls, conf_dir: Optional[str] = None) -> "ClusterFilesystem":
        """From core-site.xml's ``fs.defaultFS`` and hdfs-site.xml's ``dfs.namenode.http-address``."""
        default = hadoop_conf("core-site.xml", conf_dir).get("fs.defaultFS", "")
        parsed = urlparse(default)
        if parsed.scheme != "hdfs" or not parsed.hostname:
            raise SpecError([("environment", f"the cluster's default filesystem is {default or 'file:///'} "
                                             "(fs.defaultFS), not HDFS, so the environment cannot travel through "
                                             "it: set environment.python to an interpreter every node has")])
        http = hadoop_conf("hdfs-site.xml", conf_dir).get("dfs.namenode.http-address", "")
        if not http or http.startswith("0.0.0.0") or "${" in http:
            http = f"{parsed.hostname}:{NAMENODE_HTTP_PORT}"
        return cls(uri=f"hdfs://{parsed.netloc}", http_address=http)


class Files:
    """What submission does on the cluster's filesystem: ask whether a path exists, upload a file."""

    def __init__(self, where: ClusterFilesystem, user: str, auth: Any = None):
        self.where, self.user = where, user
        self._auth = auth
        self._fs: Any = None

    def _filesystem(self) -> Any:
        if self._fs is None:
            try:
                from fsspec.implementations.webhdfs import WebHDFS
            except ImportError:
                raise BackendError("shipping the environment to HDFS needs fsspec: pip install "
                                   "'submarine-py[yarn]'") from None
            host, _, port = self.where.http_address.rpartition(":")
            # skip_instance_cache: fsspec would hand back another user's instance of this address.
            self._fs = WebHDFS(host, port=int(port), user=None if self._auth else self.user,
                               skip_instance_cache=True)
            if self._auth is not None:
                self._fs.session.auth = self._auth
        return self._fs

    def _call(self, what: str, path: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise BackendError(f"could not {what} {self.where.uri}{path} through the NameNode's WebHDFS at "
                               f"{self.where.http_address}: {exc}") from None

    def exists(self, path: str) -> bool:
        return bool(self._call("read", path, lambda: self._filesystem().exists(path)))

    def put(self, local: str, path: str) -> None:
        """Upload ``local`` to ``path``: under a name of its own first, renamed when whole, so
        that a job never localizes half a file, and two submissions racing both succeed."""
        fs = self._filesystem()
        part = f"{path}.part-{secrets.token_hex(4)}"
        self._call("create", os.path.dirname(path), lambda: fs.makedirs(os.path.dirname(path), exist_ok=True))
        try:
            self._call("write", part, lambda: fs.put_file(local, part))
            if not self.exists(path):
                self._call("rename to", path, lambda: fs.mv(part, path))
        finally:
            try:
                if fs.exists(part):
                    fs.rm(part)
            except Exception:
                pass

    def listing(self, folder: str) -> List[Dict[str, Any]]:
        """The files of ``folder`` as WebHDFS lists them (``[]`` when there is no such folder)."""
        try:
            return list(self._call("list", folder, lambda: self._filesystem().ls(folder, detail=True)))
        except FileNotFoundError:
            return []

    def remove(self, path: str) -> None:
        self._call("remove", path, lambda: self._filesystem().rm(path))

    def uri(self, path: str) -> str:
        return f"{self.where.uri}{path}"

    def path(self, uri: str) -> str:
        """The path of ``uri`` (one of :meth:`uri`'s) on the cluster's filesystem."""
        return uri[len(self.where.uri):]
