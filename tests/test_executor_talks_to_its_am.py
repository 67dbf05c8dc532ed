"""How an executor talks to its AM (``executor/am_client.py``): a small HTTP/1.1 client that
keeps its connections open, follows the RM proxy's redirects, reads chunked replies, retries
what the AM may answer later and refuses what it never will.

The servers here are Python's own ``ThreadingHTTPServer`` on 127.0.0.1, in this process.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import pytest

from submarine_py.executor import am_client
from submarine_py.executor.am_client import AMClient, discover_am, fetch, split_url

EXECUTOR_PACKAGE = Path(am_client.__file__).parent


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: List[Dict[str, Any]] = []
    connections: set = set()
    fail_first = 0

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, headers: Dict[str, str] = None, chunked: bool = False) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 7):
                part = body[i:i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        type(self).seen.append({"method": self.command, "path": self.path, "body": body,
                                "auth": self.headers.get("Authorization")})
        type(self).connections.add(self.client_address)
        if self.path.startswith("/redirect"):
            return self._send(302, b"", {"Location": "/am"})
        if self.path == "/am":
            return self._send(200, json.dumps({"url": "http://127.0.0.1:1/x"}).encode(), chunked=True)
        if self.path == "/refused":
            return self._send(403, b"no")
        if self.path == "/flaky" and type(self).fail_first > 0:
            type(self).fail_first -= 1
            return self._send(503, b"later")
        self._send(200, json.dumps({"ok": True, "echo": json.loads(body or b"{}")}).encode())

    do_GET = do_POST = _handle


@pytest.fixture
def server():
    Recorder.seen, Recorder.connections, Recorder.fail_first = [], set(), 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.unit
def test_calls_carry_the_token_and_reuse_one_connection(server):
    client = AMClient(server + "/base", "s3cret", "worker_0")
    for i in range(5):
        assert client.call("POST", "/v1/x", {"i": i})["echo"] == {"i": i}
    assert [s["path"] for s in Recorder.seen] == ["/base/v1/x"] * 5
    assert {s["auth"] for s in Recorder.seen} == {"Bearer s3cret"}
    assert len(Recorder.connections) == 1


@pytest.mark.unit
def test_a_4xx_is_refused_at_once_and_a_5xx_retried(server):
    client = AMClient(server, "t", "e")
    with pytest.raises(RuntimeError, match="403"):
        client.call("GET", "/refused", retry_for=30)
    assert len(Recorder.seen) == 1
    Recorder.fail_first = 2
    assert client.call("GET", "/flaky", retry_for=30) == {"ok": True, "echo": {}}


@pytest.mark.unit
def test_an_unreachable_am_is_a_connection_error_after_the_retry_time():
    client = AMClient("http://127.0.0.1:9", "t", "e")
    with pytest.raises(ConnectionError, match="unreachable"):
        client.call("GET", "/v1/next", timeout=1, retry_for=0.3)


@pytest.mark.unit
def test_a_kept_connection_the_am_closed_is_replaced_without_a_failure(server):
    client = AMClient(server, "t", "e")
    client.call("GET", "/v1/a")
    for conn in client._idle:  # as if the server had dropped it while idle
        conn.sock.shutdown(2)
    assert client.call("GET", "/v1/b", retry_for=0)["ok"] is True


@pytest.mark.unit
def test_discovery_follows_redirects_and_reads_chunked_replies(server):
    assert discover_am({"SUBM_AM_DISCOVERY": server + "/redirect/{app}", "SKEIN_APPLICATION_ID": "app_1"}) \
        == "http://127.0.0.1:1/x"
    assert Recorder.seen[0]["path"] == "/redirect/app_1"
    assert fetch(server + "/am")[0] == 200


@pytest.mark.unit
def test_the_first_executor_on_a_node_finds_the_am_for_the_jobs_other_executors_there(server, tmp_path):
    """One request through the RM's proxy per node and AM attempt, not one per container."""
    def env(container: str) -> Dict[str, str]:
        return {"SUBM_AM_DISCOVERY": server + "/am", "SKEIN_APPLICATION_ID": "app_1",
                "LOCAL_DIRS": f"{tmp_path},/other/disk", "CONTAINER_ID": container}

    for n in (2, 3, 4):
        assert discover_am(env(f"container_e07_1795404731164_0001_01_00000{n}")) == "http://127.0.0.1:1/x"
    assert len(Recorder.seen) == 1
    assert (tmp_path / "subm-am-url-1").read_text() == "http://127.0.0.1:1/x"
    # A container of the AM's next attempt asks again: the first AM may be gone.
    (tmp_path / "subm-am-url-1").write_text("http://127.0.0.1:2/gone")
    assert discover_am(env("container_1795404731164_0001_02_000005")) == "http://127.0.0.1:1/x"
    assert len(Recorder.seen) == 2
    # Without YARN's variables (other launchers) every executor asks.
    assert discover_am({"SUBM_AM_DISCOVERY": server + "/am"}) == "http://127.0.0.1:1/x"
    assert len(Recorder.seen) == 3


@pytest.mark.unit
@pytest.mark.parametrize("url,parts", [
    ("http://h:8088/proxy/app/x", ("http", "h", 8088, "/proxy/app/x")),
    ("http://h", ("http", "h", 80, "/")),
    ("https://user@h/x", ("https", "h", 443, "/x")),
    ("http://[::1]:9/", ("http", "::1", 9, "/")),
])
def test_urls_split_into_scheme_host_port_and_path(url, parts):
    assert split_url(url) == parts


@pytest.mark.local
def test_the_executor_registers_without_importing_urllib_or_subprocess(tmp_path):
    """What each task container pays before it registers: the executor as YARN runs it
    (``python3 -S``, its siblings beside it), stopped right after loading."""
    for name in ("executor", "protocol", "proctree", "processes", "nvml", "am_client"):
        source = EXECUTOR_PACKAGE / ("main.py" if name == "executor" else f"{name}.py")
        (tmp_path / f"subm_{name}.py").write_text(source.read_text())
    probe = ("import runpy, sys; runpy.run_path('subm_executor.py', run_name='probe'); "
             "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    assert not {"urllib.request", "http.client", "subprocess", "tarfile", "ssl", "email"} & set(out)


def test_malformed_json_is_a_value_error_even_before_json_is_imported(tmp_path):
    """The executor decodes with ``_json``'s C scanner, sparing json's imports; on malformed
    input that scanner raises json.decoder's error only where json.decoder is imported, else a
    SystemError ("returned NULL without setting an exception") crashed the executor. A fresh
    ``python3 -S`` as on a node: the decoder says what is wrong, as a ValueError."""
    (tmp_path / "subm_am_client.py").write_text((EXECUTOR_PACKAGE / "am_client.py").read_text())
    (tmp_path / "subm_protocol.py").write_text((EXECUTOR_PACKAGE / "protocol.py").read_text())
    probe = ("import importlib.util as u, sys; sys.path.insert(0, '.'); import subm_protocol\n"
             "spec = u.spec_from_file_location('subm_am_client', 'subm_am_client.py')\n"
             "c = u.module_from_spec(spec); c.protocol = subm_protocol; spec.loader.exec_module(c)\n"
             "assert 'json.decoder' not in sys.modules\n"
             "try:\n    c.loads('{data/train.csv: .subm-url-0}')\n"
             "except ValueError as exc:\n    print('ValueError', exc)")
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("ValueError Expecting property name"), out.stderr
