"""How the executor reaches its ApplicationMaster: finding it, the job's token, calls with
retries, and the port it holds for the address it registers.

Standard library only, shipped beside the executor (``subm_am_client.py``, see ``executor.py``).

Its HTTP is a small HTTP/1.1 client over :mod:`socket` rather than :mod:`urllib.request`:
every task container starts an executor, and importing urllib (http.client, email, ssl) cost
each of them about 60 ms of CPU before it could register, which hundreds of executors starting
at once on a node pay together. The client also keeps its connections to the AM open, so the
long polls that serve as heartbeats cost no new connection each. ``https://`` addresses (an RM
web proxy behind TLS) still go through urllib, imported only then. It connects directly, whatever
``http_proxy`` says: the AM and the RM are the cluster's own hosts.

For the same reason it holds what the executor needs of :mod:`json`, :mod:`socket` and
:mod:`threading` (:func:`dumps`, :func:`loads`, :func:`connect`, :class:`Event`,
:func:`start_thread`), made of the C modules under them: those three, and :mod:`signal`, import
enum, re, functools and collections, 16 ms of CPU per executor here (27 -> 11 ms for the
interpreter with its imports), half of what an executor spent before it registered.
"""
import os
import time

import _thread

try:
    import _socket as socket  # socket.py's own base: no enum (its constants are plain ints)
except ImportError:  # pragma: no cover - not CPython
    import socket

if __package__:  # shipped, main.py's _sibling gives every module ``protocol`` before it runs
    from . import protocol

AM_LOST_SECONDS = float(os.environ.get(protocol.AM_LOST_SECONDS, "60"))
DISCOVERY_MAX_DELAY = 0.25
MAX_REDIRECTS = 5
MAX_LINE = 65536


class HTTPStatusError(Exception):
    """A reply other than 2xx: ``code``, and the start of its body."""

    def __init__(self, code, body):
        Exception.__init__(self, "HTTP %d: %r" % (code, body[:200]))
        self.code, self.body = code, body


def split_url(url):
    """``(scheme, host, port, path)`` of an ``http(s)://host[:port]/path`` URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ValueError("not an http(s) URL: %r" % url)
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):  # [v6]:port
        host, _, port = authority[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise ValueError("no host in %r" % url)
    return scheme, host, int(port) if port else (443 if scheme == "https" else 80), slash + path or "/"


def host_header(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def connect(host, port, timeout):
    """A TCP connection to ``host:port`` (socket.create_connection, on the C module)."""
    # An ASCII name goes to getaddrinfo as bytes: a str one costs the IDNA codec's imports
    # (encodings.idna, stringprep, unicodedata).
    name = host.encode() if host.isascii() else host
    err = None
    for family, kind, proto, _, address in socket.getaddrinfo(name, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            err = exc
    raise err or OSError("cannot resolve %s" % host)


class _Reader:
    """Buffered reads of a socket: ``readline`` and ``read`` as the file makefile() gives."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self):
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def readline(self, limit=MAX_LINE):
        while True:
            end = self.buf.find(b"\n", 0, limit)
            if end >= 0 or len(self.buf) >= limit or not self._more():
                cut = end + 1 if end >= 0 else min(limit, len(self.buf))
                line, self.buf = self.buf[:cut], self.buf[cut:]
                return line

    def read(self, size=-1):
        while (size < 0 or len(self.buf) < size) and self._more():
            pass
        cut = len(self.buf) if size < 0 else size
        data, self.buf = self.buf[:cut], self.buf[cut:]
        return data


class _Connection:
    """One HTTP/1.1 connection: a request at a time, kept open while the server allows."""

    def __init__(self, host, port, timeout):
        self.sock = connect(host, port, timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = _Reader(self.sock)
        self.open = True

    def close(self):
        self.open = False
        try:
            self.sock.close()
        except OSError:
            pass

    def request(self, method, host, path, headers, data, timeout):
        """Send one request; returns ``(status, headers, body)``. ``headers`` of the reply
        have lower-case names. The connection closes itself when the reply says so."""
        self.sock.settimeout(timeout)
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % host]
        lines += ["%s: %s" % item for item in headers.items()]
        if data is not None:
            lines.append("Content-Length: %d" % len(data))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b""))
        status_line = self.rfile.readline(MAX_LINE)
        if not status_line:
            raise ConnectionError("the server closed the connection")
        version, _, rest = status_line.decode("latin-1").partition(" ")
        if not version.startswith("HTTP/"):
            raise ValueError("not an HTTP reply: %r" % status_line[:80])
        status = int(rest.split(None, 1)[0])
        reply = {}
        while True:
            line = self.rfile.readline(MAX_LINE)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise ConnectionError("the server closed the connection in the reply's headers")
            name, _, value = line.decode("latin-1").partition(":")
            reply[name.strip().lower()] = value.strip()
        keep = version != "HTTP/1.0" and reply.get("connection", "").lower() != "close"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in reply.get("transfer-encoding", "").lower():
            body = self._chunks()
        elif "content-length" in reply:
            length = int(reply["content-length"])
            body = self.rfile.read(length)
            if len(body) != length:
                raise ConnectionError("the reply ended after %d of %d bytes" % (len(body), length))
        else:  # the body runs to the end of the connection
            body, keep = self.rfile.read(), False
        if not keep:
            self.close()
        return status, reply, body

    def _chunks(self):
        parts = []
        while True:
            size = int(self.rfile.readline(MAX_LINE).split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while self.rfile.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(MAX_LINE)


def _urllib_request(url, method, headers, data, timeout):
    """The same exchange through urllib (https): ``(status, body)``."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=_tls_context()) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


_contexts = {}


def _tls_context():
    """What https calls trust: CA_BUNDLE's CAs (the cluster's, which travel with the job) where
    it is set, else the system's."""
    import ssl

    cafile = os.environ.get(protocol.CA_BUNDLE) or None
    if cafile not in _contexts:
        _contexts[cafile] = ssl.create_default_context(cafile=cafile)
    return _contexts[cafile]


def fetch(url, method="GET", headers=None, data=None, timeout=10.0):
    """One request on a connection of its own, following redirects: ``(status, body)``."""
    headers = dict(headers or {}, Connection="close")
    for _ in range(MAX_REDIRECTS + 1):
        scheme, host, port, path = split_url(url)
        if scheme == "https":
            return _urllib_request(url, method, headers, data, timeout)
        conn = _Connection(host, port, timeout)
        try:
            status, reply, body = conn.request(method, host_header(host, port), path, headers, data, timeout)
        finally:
            conn.close()
        location = reply.get("location")
        if status not in (301, 302, 303, 307, 308) or not location:
            return status, body
        if location.startswith("/"):
            location = "%s://%s%s" % (scheme, host_header(host, port), location)
        url = location
        if status == 303:
            method, data = "GET", None
    raise ConnectionError("more than %d redirects from %s" % (MAX_REDIRECTS, url))


class AMClient:
    """Calls to the AM with the job's token, over connections kept open between calls (one
    per thread that calls at once: the executor's poller, its main loop, its GPU sampler)."""

    def __init__(self, url, token, executor_id):
        self.url = url.rstrip("/")
        self.token = token
        self.executor_id = executor_id
        scheme, self.host, self.port, self.base = split_url(self.url)
        self.base = self.base.rstrip("/")
        self.tls = scheme == "https"
        self._idle = []
        self._lock = _thread.allocate_lock()

    def _once(self, method, path, data, timeout):
        headers = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json"}
        if self.tls:
            return _urllib_request(self.url + path, method, headers, data, timeout)
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        reused = conn is not None
        while True:
            if conn is None:
                conn = _Connection(self.host, self.port, timeout)
            try:
                status, _, body = conn.request(method, host_header(self.host, self.port), self.base + path,
                                               headers, data, timeout)
            except (OSError, ValueError):
                conn.close()
                if not reused:
                    raise
                conn, reused = None, False  # a kept connection the AM had closed: once more, afresh
                continue
            if conn.open and 200 <= status < 300:
                with self._lock:
                    self._idle.append(conn)
            else:
                conn.close()
            return status, body

    def call(self, method, path, body=None, timeout=10.0, retry_for=AM_LOST_SECONDS):
        data = None if body is None else dumps(body).encode()
        deadline = time.monotonic() + retry_for
        delay = 0.1
        while True:
            try:
                status, reply = self._once(method, path, data, timeout)
                if 200 <= status < 300:
                    return loads(reply or b"{}")
                if 400 <= status < 500:
                    raise RuntimeError("AM refused %s %s: %s %s" % (method, path, status, reply[:200]))
                err = HTTPStatusError(status, reply)
            except (OSError, ValueError) as exc:
                err = exc
            if time.monotonic() > deadline:
                raise ConnectionError("the ApplicationMaster at %s is unreachable: %s" % (self.url, err))
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class PortReservation:
    """A bound (not listening) socket that keeps other processes off a port.

    SO_REUSEADDR lets a framework that also sets it (PyTorch's TCPStore, gRPC)
    bind and listen on the port while we still hold it; the kernel hands the
    port to nobody else's ``bind(0)`` meanwhile.
    """

    def __init__(self, preferred=0):
        self.sock = None
        self.port = 0
        for port in ((preferred, 0) if preferred else (0,)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("", port))
            except OSError:
                s.close()
                continue
            self.sock, self.port = s, s.getsockname()[1]
            return
        raise OSError("no free port")

    def release(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def discover_am(env):
    """The AM's URL: given (local backend, replacement containers) or asked of the
    AM's endpoint through the YARN RM's web proxy (containers declared up front), once per
    node: the first of the job's executors on a node to find it leaves it for the others
    (:func:`_node_copy`)."""
    if env.get(protocol.AM_URL):
        return env[protocol.AM_URL]
    copy = _node_copy(env)
    if copy:
        try:
            with open(copy) as f:
                found = f.read().strip()
            if found:
                return found
        except OSError:
            pass
    app = env.get("SKEIN_APPLICATION_ID", "")
    urls = [u.strip().replace("{app}", app) for u in env[protocol.AM_DISCOVERY].split(",") if u.strip()]
    deadline = time.monotonic() + float(env.get(protocol.AM_DISCOVERY_SECONDS, "600"))
    # Executors usually start before the AM has published its endpoint. A short, capped
    # backoff finds it within DISCOVERY_MAX_DELAY of its publication (a 1 s cap cost the
    # gang up to 1 s), at a few requests per second per executor for those seconds.
    # Several URLs: one per ResourceManager of an HA cluster; the one that answered is asked first.
    delay, err, url = 0.05, None, urls[0]
    while time.monotonic() < deadline:
        for url in list(urls):
            try:
                status, body = fetch(url)
                if status == 200:
                    found = loads(body).get("url")
                    if found:
                        _leave_copy(copy, found)
                        return found
                err = HTTPStatusError(status, body)
            except (OSError, ValueError) as exc:
                err = exc
                urls.remove(url)
                urls.append(url)  # a master that does not answer goes last
        time.sleep(delay)
        delay = min(delay * 1.5, DISCOVERY_MAX_DELAY)
    raise ConnectionError("could not find the ApplicationMaster at %s: %s" % (", ".join(urls), err))


def _node_copy(env):
    """Where the job's executors on this node keep the AM's URL, or None.

    Each discovery is a request through the RM's web proxy and skein's (about 20 ms of the
    RM's CPU and some of the AM's): 256 executors starting together cost the cluster seconds
    of CPU. YARN's ``LOCAL_DIRS`` is the application's folder on the node, shared by its
    containers there. The file is per AM attempt (from the container's id): containers of a
    new attempt never take an earlier AM's URL.
    """
    local = (env.get("LOCAL_DIRS") or "").split(",")[0]
    parts = (env.get("CONTAINER_ID") or "").split("_")
    if not local or len(parts) < 4 or not parts[-2].isdigit():
        return None
    return os.path.join(local, "subm-am-url-%d" % int(parts[-2]))


def _leave_copy(path, url):
    if path:
        tmp = "%s.%d" % (path, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write(url)
            os.replace(tmp, path)  # never read half-written
        except OSError:
            pass  # only a shortcut


def read_token(env):
    """The job's secret: SUBM_TOKEN, or from the file SUBM_TOKEN_FILE names (read once, then
    unlinked from the working directory so the task's own files do not carry it): the secret
    itself, or a JSON object whose ``token`` it is (YARN's job file, the one file a job ships)."""
    if env.get(protocol.TOKEN):
        return env[protocol.TOKEN]
    path = env.get(protocol.TOKEN_FILE)
    if not path:
        raise KeyError(protocol.TOKEN)
    with open(path) as f:
        token = f.read().strip()
    if token.startswith("{"):
        token = str(loads(token)["token"])
    try:
        if os.path.islink(path):  # YARN's link to the localized copy; the copy stays private
            os.unlink(path)
    except OSError:
        pass
    return token


# -- threads and JSON without threading's and json's imports (see the module's doc) ------------

def start_thread(target, *args):
    """Run ``target(*args)`` in a thread of its own that does not keep the process alive."""
    _thread.start_new_thread(target, args)


class Event:
    """threading.Event's ``set``, ``is_set`` and ``wait``, on a lock of :mod:`_thread`."""

    def __init__(self):
        self._flag = False
        self._guard = _thread.allocate_lock()
        self._gate = _thread.allocate_lock()
        self._gate.acquire()  # released once set: every waiter passes it in turn

    def set(self):
        with self._guard:
            if not self._flag:
                self._flag = True
                self._gate.release()

    def is_set(self):
        return self._flag

    def wait(self, timeout=None):
        if self._flag:
            return True
        if self._gate.acquire(True, -1 if timeout is None else max(0.0, timeout)):
            self._gate.release()
        return self._flag


def _json_codec():
    """``(dumps, loads)`` from :mod:`_json` (the C scanner and encoder :mod:`json` uses), checked
    once on a sample; :mod:`json`'s own where that module differs (another Python)."""
    try:
        import _json

        class Context:
            strict, object_hook, object_pairs_hook = True, None, None
            parse_float, parse_int, parse_constant = float, int, float

        scan = _json.make_scanner(Context())

        def unknown(obj):
            raise TypeError("%s is not JSON serializable" % type(obj).__name__)

        encode = _json.make_encoder(None, unknown, _json.encode_basestring_ascii, None, ": ", ", ",
                                    False, False, True)

        def c_dumps(obj):
            return "".join(encode(obj, 0))

        def c_loads(data):
            text = (data.decode("utf-8") if isinstance(data, bytes) else data).strip()
            try:
                obj, end = scan(text, 0)
            except StopIteration:
                raise ValueError("no JSON value in %r" % text[:80]) from None
            except SystemError:
                # Malformed JSON: the C scanner raises json.decoder's JSONDecodeError, which it
                # finds only where that module is imported (else "returned NULL without setting
                # an exception"). json says what is wrong (a ValueError).
                import json
                return json.loads(text)
            if end != len(text):
                raise ValueError("extra data after JSON at %d" % end)
            return obj

        sample = {"a": [1, -2.5, None, True, False, "\u00e9\"\n"], "b": {}}
        text = c_dumps(sample)
        if text == '{"a": [1, -2.5, null, true, false, "\\u00e9\\"\\n"], "b": {}}' and \
                c_loads(text.encode()) == sample:
            return c_dumps, c_loads
    except Exception:  # pragma: no cover - another Python
        pass
    import json  # pragma: no cover

    return json.dumps, json.loads  # pragma: no cover


dumps, loads = _json_codec()
