"""How the executor reaches its ApplicationMaster: finding it, the job's token, calls with
retries, and the port it holds for the address it registers.

Standard library only, shipped beside the executor (``subm_am_client.py``, see ``executor.py``).
"""
import json
import os
import socket
import time
import urllib.error
import urllib.request

AM_LOST_SECONDS = float(os.environ.get("SUBM_AM_LOST_SECONDS", "60"))
DISCOVERY_MAX_DELAY = 0.25


class AMClient:
    def __init__(self, url, token, executor_id):
        self.url = url.rstrip("/")
        self.token = token
        self.executor_id = executor_id

    def call(self, method, path, body=None, timeout=10.0, retry_for=AM_LOST_SECONDS):
        data = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + retry_for
        delay = 0.1
        while True:
            req = urllib.request.Request(self.url + path, data=data, method=method)
            req.add_header("Authorization", "Bearer " + self.token)
            req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    return json.loads(resp.read() or b"{}")
            except urllib.error.HTTPError as exc:
                if 400 <= exc.code < 500:
                    raise RuntimeError("AM refused %s %s: %s %s" % (method, path, exc.code, exc.read()[:200])) from None
                err = exc
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
    AM's endpoint through the YARN RM's web proxy (containers declared up front)."""
    if env.get("SUBM_AM_URL"):
        return env["SUBM_AM_URL"]
    url = env["SUBM_AM_DISCOVERY"].replace("{app}", env.get("SKEIN_APPLICATION_ID", ""))
    deadline = time.monotonic() + float(env.get("SUBM_AM_DISCOVERY_SECONDS", "600"))
    # Executors usually start before the AM has published its endpoint. A short, capped
    # backoff finds it within DISCOVERY_MAX_DELAY of its publication (a 1 s cap cost the
    # gang up to 1 s), at a few requests per second per executor for those seconds.
    delay, err = 0.05, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                found = json.loads(resp.read()).get("url")
                if found:
                    return found
        except (OSError, ValueError) as exc:
            err = exc
        time.sleep(delay)
        delay = min(delay * 1.5, DISCOVERY_MAX_DELAY)
    raise ConnectionError("could not find the ApplicationMaster at %s: %s" % (url, err))


def read_token(env):
    """The job's secret: SUBM_TOKEN, or the file SUBM_TOKEN_FILE names (read once, then
    unlinked from the working directory so the task's own files do not carry it)."""
    if env.get("SUBM_TOKEN"):
        return env["SUBM_TOKEN"]
    path = env.get("SUBM_TOKEN_FILE")
    if not path:
        raise KeyError("SUBM_TOKEN")
    with open(path) as f:
        token = f.read().strip()
    try:
        if os.path.islink(path):  # YARN's link to the localized copy; the copy stays private
            os.unlink(path)
    except OSError:
        pass
    return token

