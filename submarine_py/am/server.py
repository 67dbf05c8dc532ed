"""The AM's HTTP endpoint: the executors' API and the status page.

Executor calls carry the job's token (``Authorization: Bearer``); the status
page and ``/v1/status`` are read-only and open, as YARN's own UI is.

An executor spends its life in a long poll (``/v1/next``) on a connection it keeps open. When
its process dies the kernel closes that connection at once: :class:`_DropWatch` tells the AM
(``AM.connection_dropped``), which has the containers look at that executor's container without
waiting for the cluster's word (on YARN, seconds later).
"""
from __future__ import annotations

import contextlib
import hmac
import json
import logging
import selectors
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, Optional, Tuple
from urllib.parse import parse_qs, urlparse

from ..executor import protocol
from ..templating import render
from .shell import AM

log = logging.getLogger("subm.am.http")
MAX_BODY = 1 << 20


def serve(am: AM, host: str = "0.0.0.0", port: int = 0) -> Tuple[ThreadingHTTPServer, int]:
    """Serve ``am`` on a background thread; returns the server and its port."""

    class Handler(_Handler):
        master = am
        drops = _DropWatch(am.connection_dropped)

    server = _Server((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="am-http", daemon=True).start()
    return server, server.server_address[1]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # An executor or browser that went away mid-reply is routine, not an AM error.
        log.debug("connection from %s ended early", client_address, exc_info=True)


class _DropWatch:
    """One thread that watches the connections of the long polls in progress and names the
    executor whose connection its peer closed (nothing else arrives on a connection while its
    poll waits: readable means closed, or data that is not ours to read, then it stops looking)."""

    def __init__(self, dropped: Callable[[str], None]):
        self.dropped = dropped
        self.selector = selectors.DefaultSelector()
        #: epoll watches a socket from its registration on; select() and poll() only from their
        #: next call, so the thread must be woken for each new poll (not on Linux).
        self.wake = not isinstance(self.selector, getattr(selectors, "EpollSelector", ()))
        self.lock = threading.Lock()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        threading.Thread(target=self._run, name="am-dropwatch", daemon=True).start()

    @contextlib.contextmanager
    def watching(self, conn: socket.socket, executor: str) -> Iterator[None]:
        with self.lock:
            try:
                self.selector.register(conn, selectors.EVENT_READ, executor)
                watched = True
            except (KeyError, ValueError, OSError):
                watched = False
        if watched and self.wake:
            self.wake_w.send(b".")
        try:
            yield
        finally:
            if watched:
                self._forget(conn)

    def _forget(self, conn: socket.socket) -> bool:
        with self.lock:
            try:
                self.selector.unregister(conn)
                return True
            except (KeyError, ValueError, OSError):  # forgotten already, or closed
                return False

    def _run(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self.wake_r.recv(4096)
                    continue
                try:
                    closed = not key.fileobj.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:  # reset by the peer, or closed here meanwhile
                    closed = True
                # Only a poll still waiting counts (else the handler has moved on with it).
                if self._forget(key.fileobj) and closed:
                    try:
                        self.dropped(key.data)
                    except Exception:  # the AM's business; the watch goes on
                        log.exception("telling the AM that %s's connection dropped", key.data)


class _Handler(BaseHTTPRequestHandler):
    master: AM
    drops: _DropWatch
    #: The executor whose polls this connection carries, once one came.
    executor: Optional[str] = None
    #: Executors keep their connections open between calls (their polls are heartbeats).
    protocol_version = "HTTP/1.1"
    #: A reply is written as headers, then body: without TCP_NODELAY the body can wait for the
    #: client's delayed ACK (up to 40 ms) on a kept-open connection.
    disable_nagle_algorithm = True
    #: A kept connection idle this long is closed (its thread ends): an executor on a machine
    #: that died never closes its own. Executors reconnect transparently when they call again.
    timeout = 120

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except ConnectionError:  # reset: its peer died with bytes of ours unread
            self.close_connection = True
            self.raw_requestline = b""
        # A kept connection its executor closed between two polls (an idle timeout leaves the
        # last request line in place).
        if self.executor and not getattr(self, "raw_requestline", b"x"):
            self.master.connection_dropped(self.executor)

    def log_message(self, fmt: str, *args: Any) -> None:  # keep the AM log for decisions
        log.debug("%s " + fmt, self.address_string(), *args)

    def _reply(self, code: int, body: Any, ctype: str = "application/json") -> None:
        data = (json.dumps(body) if ctype == "application/json" else body).encode()
        if code >= 400:  # a refused request's body may be unread: the connection cannot go on
            self.close_connection = True
        self.send_response(code)
        self.send_header("Content-Type", ctype + "; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        got = self.headers.get("Authorization", "")
        if hmac.compare_digest(got.encode(), f"Bearer {self.master.token}".encode()):
            return True
        self._reply(401, {"error": "missing or wrong token"})
        return False

    def _body(self) -> Dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        return json.loads(self.rfile.read(n) or b"{}")

    def do_GET(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        path = url.path.rstrip("/") or "/"
        if path.endswith(protocol.PATH_AM):  # how containers find the AM through the RM's proxy
            return self._reply(200, {"url": self.master.url, "app_id": self.master.job_id})
        if path.endswith(protocol.PATH_STATUS):
            return self._reply(200, self.master.report().to_dict())
        if path == protocol.PATH_NEXT:
            if not self._authorized():
                return
            q = parse_qs(url.query)
            try:
                wait = min(max(float(q.get("wait", ["20"])[0]), 0.0), 20.0)
                after = int(q.get("after", ["0"])[0])
                executor = q["executor"][0]
            except (KeyError, ValueError) as exc:
                return self._reply(400, {"error": f"bad request: {exc}"})
            self.master.heard_from(executor, *_quiet(q))
            self.executor = executor
            with self.drops.watching(self.connection, executor):
                items = self.master.next_instructions(executor, after, wait=wait)
            return self._reply(200, {"instructions": items})
        if path in ("/", "/status", "/index.html") or path.endswith("/status"):
            html = render("status.html.j2", report=self.master.report())
            return self._reply(200, html, "text/html")
        served = self.master.containers.answer(path, {k: v[0] for k, v in parse_qs(url.query).items()})
        if served is not None:
            return self._reply(200, served)
        self._reply(404, {"error": f"no such path {url.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        try:
            body = self._body()
            path = urlparse(self.path).path
            if body.get("executor") is not None:
                self.master.heard_from(str(body["executor"]))
            if path == protocol.PATH_REGISTER:
                return self._reply(200, self.master.on_register(body))
            if path == protocol.PATH_STARTED:
                self.master.on_started(body)
            elif path == protocol.PATH_EXIT:
                self.master.on_exit(body)
            elif path == protocol.PATH_METRIC:
                self.master.on_metric(body)
            elif path == protocol.PATH_GPU:
                self.master.on_gpu(body)
            elif path == protocol.PATH_GOODBYE:
                self.master.on_goodbye(body)
            elif path == protocol.PATH_KILL:
                self.master.kill(str(body.get("why") or "killed by request"))
            else:
                return self._reply(404, {"error": f"no such path {path}"})
            self._reply(200, {"ok": True})
        except (KeyError, ValueError, TypeError) as exc:
            self._reply(400, {"error": f"bad request: {exc}"})


def _quiet(q: Dict[str, Any]) -> Tuple[Optional[float], Optional[int]]:
    """What a poll says of its executor's running task: (seconds it has printed nothing, its
    attempt); (None, None) when it says nothing (no task runs) or nothing readable."""
    try:
        return float(q["quiet"][0]), int(q["attempt"][0])
    except (KeyError, IndexError, ValueError):
        return None, None
