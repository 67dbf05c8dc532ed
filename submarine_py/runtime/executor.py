#!/usr/bin/env python3
"""submarine-py executor: one per task container, standard library only.

It must run inside any user image that has ``python3``, so it imports nothing
outside the standard library and is shipped to containers as this one file.

Life of an executor::

    reserve a free port and hold it       (no other process can take it)
    register host:port with the AM        POST /v1/register
    wait for instructions                 GET  /v1/next   (long poll)
      run:      start the task's command with the environment the AM built
      register: stop the command, re-register for the next attempt (same port when possible)
      exit:     stop the command (SIGTERM to its process group, then SIGKILL), leave
    report every exit of the command      POST /v1/exit
    while a command with GPUs runs        POST /v1/gpu    (NVML samples, when NVML answers)

Each poll returns after a couple of seconds at most and the next one starts at
once: the polls are the executor's heartbeat (the AM declares a silent executor
lost, since a machine that dies closes no connection).

The executor outlives attempts, so a gang restart needs no new containers.
Settings come from the environment: SUBM_TOKEN (or SUBM_TOKEN_FILE, a file
holding it: on YARN, where variables end up in a log the NodeManager serves), SUBM_ROLE, SUBM_AM_URL (or
SUBM_AM_DISCOVERY), SUBM_EXECUTOR_ID (or skein's SKEIN_CONTAINER_ID), and
optionally SUBM_INDEX (preferred task index), SUBM_ADVERTISE_HOST, SUBM_WORKDIR,
SUBM_LOG_TO_CONTAINER, SUBM_STOP_GRACE (SIGTERM -> SIGKILL when stopped by a signal), and on
YARN SUBM_FILES_ARCHIVE / SUBM_FILES_LINKS (the job's files, laid out in the working
directory before the executor registers).
"""
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request

AM_LOST_SECONDS = float(os.environ.get("SUBM_AM_LOST_SECONDS", "60"))
#: SIGTERM -> SIGKILL when the task is stopped; the AM sends the job's
#: timeouts.stop_grace_seconds with every stop and in SUBM_STOP_GRACE.
DEFAULT_GRACE = float(os.environ.get("SUBM_STOP_GRACE", "3"))
#: How long one long poll for instructions lasts unless the AM says otherwise at registration.
#: Polls follow each other at once: they are the executor's heartbeat, and the AM declares an
#: executor lost after a few missed ones (a dead machine closes no connection).
POLL_SECONDS = 2.0
#: A failed attempt's stderr tail sent with its exit code (the AM quotes it in diagnostics).
TAIL_LINES = 20
TAIL_BYTES = 2048
DISCOVERY_MAX_DELAY = 0.25
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Pids that subprocess.Popen reaps itself (reaping them here would lose their exit code).
_POPEN_CHILDREN = set()


def _log(msg):
    sys.stderr.write("[subm-executor %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def _prctl(option, value):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, int(value), 0, 0, 0)
    except Exception:  # not Linux: best effort only
        pass


def _die_with_parent(sig=signal.SIGKILL):
    """Ask Linux to signal this process when its parent exits (no orphans)."""
    _prctl(PR_SET_PDEATHSIG, sig)


def _descendants():
    """Pids of every process below this one (Linux /proc; orphans of the task's
    command stay below us because the executor is a child subreaper)."""
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            state, ppid = fields[0], int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
        if state == "Z":  # dead: reap orphans left to us (the command itself is Popen's to reap)
            if ppid == os.getpid() and int(entry) not in _POPEN_CHILDREN:
                _reap(int(entry))
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


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


def visible_gpu_ids(env, count):
    """The NVML devices a task sees: CUDA_VISIBLE_DEVICES's entries (indices or UUIDs) in
    order, or every device where it is unset. Entries that are neither are left out."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return [str(i) for i in range(count)]
    out = []
    for item in value.split(","):
        item = item.strip()
        if item.isdigit() and int(item) < count:
            out.append(item)
        elif item.startswith(("GPU-", "MIG-")):
            out.append(item)
        elif item:  # CUDA ignores the rest of the list after an invalid entry
            break
    return out


class GpuSampler:
    """Utilization and memory of the task's GPUs through NVML, loaded with ctypes.

    NVML is NVIDIA's driver library (libnvidia-ml.so.1), present wherever a GPU
    is usable; user images need no pynvml. Anything missing (no library, no
    device, a call failing) turns sampling off, silently: it must never disturb
    the task.
    """

    def __init__(self, env, library="libnvidia-ml.so.1", lib=None):
        """``lib``: an already loaded NVML (tests hand a fake here)."""
        self.handles = []
        self.lib = None
        try:
            import ctypes  # some minimal Pythons lack _ctypes: then no sampling

            class Utilization(ctypes.Structure):  # nvmlUtilization_t
                _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

            class Memory(ctypes.Structure):  # nvmlMemory_t
                _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                            ("used", ctypes.c_ulonglong)]

            self.ctypes, self.structs = ctypes, (Utilization, Memory)
            lib = lib or ctypes.CDLL(library)
            if lib.nvmlInit_v2() != 0:
                return
            self.lib = lib
            count = ctypes.c_uint(0)
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return self.close()
            for dev in visible_gpu_ids(env, count.value):
                handle = ctypes.c_void_p()
                if dev.isdigit():
                    rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(dev)), ctypes.byref(handle))
                else:
                    rc = lib.nvmlDeviceGetHandleByUUID(dev.encode(), ctypes.byref(handle))
                if rc == 0:
                    self.handles.append((dev, handle))
        except (ImportError, OSError, AttributeError):
            self.lib = None
        if not self.handles:
            self.close()

    @property
    def active(self):
        return self.lib is not None and bool(self.handles)

    def sample(self):
        """``[{"id", "utilization" (%), "memory_used_mb", "memory_total_mb"}]``; None when off."""
        if not self.active:
            return None
        out, byref = [], self.ctypes.byref
        for dev, handle in self.handles:
            util, mem = self.structs[0](), self.structs[1]()
            if (self.lib.nvmlDeviceGetUtilizationRates(handle, byref(util)) != 0
                    or self.lib.nvmlDeviceGetMemoryInfo(handle, byref(mem)) != 0):
                continue
            out.append({"id": dev, "utilization": int(util.gpu), "memory_used_mb": int(mem.used) >> 20,
                        "memory_total_mb": int(mem.total) >> 20})
        return out or None

    def close(self):
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except (OSError, AttributeError):
                pass
        self.lib = None


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


def log_to_container(env):
    """On YARN: write stdout/stderr (ours and the task's) as files of the container's log dir."""
    log_dir = (env.get("LOG_DIRS") or "").split(",")[0]
    if not log_dir or not os.path.isdir(log_dir):
        return
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = os.open(os.path.join(log_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def _stderr_path():
    """The file this process's stderr writes to, or None (a pipe or a terminal: in a local
    Docker container the backend reads the tail itself)."""
    try:
        if not stat.S_ISREG(os.fstat(2).st_mode):
            return None
        path = os.readlink("/proc/self/fd/2")
    except OSError:
        return None
    return path if os.path.isfile(path) else None


def stderr_tail(path, start):
    """The last lines (at most TAIL_LINES, TAIL_BYTES) written to ``path`` since offset ``start``."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            begin = max(start, end - TAIL_BYTES)
            f.seek(begin)
            data = f.read(end - begin)
    except (OSError, ValueError):
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    if begin > start and lines:
        lines = lines[1:]  # the first line was cut
    return "\n".join(lines[-TAIL_LINES:])


def _load_envcache():
    """envcache.py from beside this file (``subm_envcache.py`` on YARN), standard library only."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("subm_envcache.py", "envcache.py"):
        path = os.path.join(here, name)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("subm_envcache", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError("envcache.py is not beside %s" % __file__)
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


def lay_out_files(env, workdir):
    """On YARN: unpack the job's files archive into the working directory as real files
    (YARN localizes it as a symlink into its cache; scripts must import their siblings),
    and link each ``scheme://`` source, localized under a flat name, at its destination."""
    archive = env.get("SUBM_FILES_ARCHIVE")
    if archive:
        path = os.path.join(workdir, archive)
        if os.path.exists(path):
            with tarfile.open(path) as tar:
                if hasattr(tarfile, "tar_filter"):  # Python 3.12+ (and security backports)
                    tar.extractall(workdir, filter="tar")
                else:
                    tar.extractall(workdir)
            os.remove(path)  # only the link to YARN's cache
    links = json.loads(env.get("SUBM_FILES_LINKS") or "{}")
    for dest, name in links.items():
        src, target = os.path.join(workdir, name), os.path.join(workdir, dest)
        if os.path.lexists(src) and not os.path.lexists(target):
            parent = os.path.dirname(target)
            if parent:
                os.makedirs(parent, exist_ok=True)
            os.rename(src, target)


def _index_from_container_id(container_id):
    tail = (container_id or "").rsplit("_", 1)[-1]
    return tail if tail.isdigit() else None


class Executor:
    def __init__(self, env):
        self.env = env
        self.executor_id = env.get("SUBM_EXECUTOR_ID") or env["SKEIN_CONTAINER_ID"]
        self.role = env["SUBM_ROLE"]
        self.index_hint = env.get("SUBM_INDEX") or _index_from_container_id(env.get("SKEIN_CONTAINER_ID"))
        self.host = env.get("SUBM_ADVERTISE_HOST") or env.get("NM_HOST") or socket.getfqdn()
        self.workdir = env.get("SUBM_WORKDIR") or os.getcwd()
        # environment.archive: unpacked into the node's cache in the background while we register.
        self.environment = (_load_envcache().ShippedEnvironment(env, self.workdir, log=_log)
                            if env.get("SUBM_ENV_ARCHIVE") else None)
        self.am = AMClient(discover_am(env), read_token(env), self.executor_id)
        self.instructions = queue.Queue()
        self.reservation = None
        self.child = None
        self.child_attempt = None
        #: Where this attempt's stderr begins (path, offset), when stderr is a readable file.
        self.stderr_start = None
        self.stopping = False
        self.killed = False  # the last stop needed SIGKILL
        self.seq = 0
        self.poll_seconds = POLL_SECONDS
        self.done = threading.Event()
        self.gpu = None  # a GpuSampler once a task with GPUs has started, if NVML answers

    # -- AM communication ----------------------------------------------------
    def register(self, attempt=None):
        preferred = self.reservation.port if self.reservation else 0
        if self.reservation is None or self.reservation.sock is None:
            self.reservation = PortReservation(preferred)
        body = {"executor": self.executor_id, "role": self.role, "index": self.index_hint,
                "host": self.host, "port": self.reservation.port, "pid": os.getpid(),
                "attempt": attempt, "container": self.env.get("CONTAINER_ID"),
                "log_dirs": self.env.get("LOG_DIRS")}
        reply = self.am.call("POST", "/v1/register", body)
        self.index_hint = str(reply.get("index", self.index_hint))
        try:
            self.poll_seconds = min(max(float(reply.get("heartbeat", POLL_SECONDS)), 0.2), 20.0)
        except (TypeError, ValueError):
            pass

    def poll_forever(self):
        """Long-poll the AM for instructions and queue them for the main loop."""
        while not self.done.is_set():
            try:
                reply = self.am.call("GET", "/v1/next?executor=%s&after=%d&wait=%g"
                                     % (self.executor_id, self.seq, self.poll_seconds),
                                     timeout=self.poll_seconds + 10)
            except Exception as exc:  # AM gone for good: stop the task, leave
                self.instructions.put({"op": "am-lost", "why": str(exc)})
                return
            for instr in reply.get("instructions", []):
                self.seq = max(self.seq, instr["seq"])
                self.instructions.put(instr)

    # -- the task's process --------------------------------------------------
    def start(self, instr):
        env = dict(os.environ)
        for k in ("SUBM_TOKEN", "SUBM_TOKEN_FILE", "SUBM_AM_URL", "SUBM_EXECUTOR_ID"):
            env.pop(k, None)
        env.update(instr["env"])
        header = instr.get("header") or "[subm] %s attempt %s" % (self.role, instr["attempt"])
        for stream in (sys.stdout, sys.stderr):
            stream.write(header + "\n")
            stream.flush()
        path = _stderr_path()
        try:
            self.stderr_start = (path, os.fstat(2).st_size) if path else None
        except OSError:
            self.stderr_start = None
        if not instr.get("hold_port"):
            self.reservation.release()
        cwd = instr.get("workdir") or self.workdir
        shared = env.get("SUBM_SHARED_DIR")
        if shared and not os.path.isdir(shared):
            sys.stderr.write("[subm] SUBM_SHARED_DIR %s is not a folder on %s: shared_dir must be a path "
                             "that every node mounts\n" % (shared, self.host))
            sys.stderr.flush()
            self.report_exit(instr["attempt"], 127, stopped=False)
            return
        try:
            if self.environment is not None:
                self.environment.apply(env)
            self.child = subprocess.Popen(
                ["/bin/sh", "-c", instr["command"]], cwd=cwd, env=env,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            sys.stderr.write("[subm] cannot start the command: %s\n" % exc)
            sys.stderr.flush()
            self.report_exit(instr["attempt"], 127, stopped=False)
            return
        _POPEN_CHILDREN.add(self.child.pid)
        self.child_attempt = instr["attempt"]
        self.stopping = self.killed = False
        if instr.get("gpus") and self.gpu is None:
            self.gpu = GpuSampler(env)
            if self.gpu.active:
                every = max(0.5, float(instr.get("gpu_sample_seconds") or 5))
                threading.Thread(target=self.sample_gpus, args=(every,), daemon=True).start()
        try:
            self.am.call("POST", "/v1/started", {"executor": self.executor_id, "attempt": instr["attempt"],
                                                 "pid": self.child.pid})
        except Exception as exc:
            _log("could not tell the AM the task started: %s" % exc)

    def sample_gpus(self, every):
        """Every few seconds while the command runs, send the AM its GPUs' use (a missed
        send is retried with the next; at most a few minutes of samples are kept)."""
        pending = []
        while not self.done.wait(every):
            child, attempt = self.child, self.child_attempt
            devices = self.gpu.sample() if child is not None and child.poll() is None else None
            if devices:
                pending.append({"time": round(time.time(), 3), "attempt": attempt, "devices": devices})
                del pending[:-60]
            if not pending:
                continue
            try:
                self.am.call("POST", "/v1/gpu", {"executor": self.executor_id, "samples": pending},
                             timeout=5, retry_for=0)
                pending = []
            except Exception:  # the AM is busy or gone: the main loop handles a lost AM
                pass

    def stop_child(self, grace):
        """SIGTERM to the task's processes, SIGKILL to what is left after ``grace`` seconds.

        A task that exits sooner is not waited for: the wait ends with its last process.
        """
        if self.child is None or self.child.poll() is not None:
            return
        self.stopping = True
        started = time.monotonic()
        deadline = started + grace
        _signal_tree(self.child.pid, signal.SIGTERM)
        try:
            self.child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        while _descendants() and time.monotonic() < deadline:  # the command's own children
            time.sleep(0.02)
        exited = self.child.poll() is not None
        left = _descendants()
        _signal_tree(self.child.pid, signal.SIGKILL)
        self.child.wait()
        self.killed = not exited or bool(left)
        if self.killed:
            _log("the task did not exit within the %g s grace after SIGTERM: sent SIGKILL" % grace)
        else:
            _log("the task exited on SIGTERM in %.2f s (grace %g s)" % (time.monotonic() - started, grace))

    def check_child(self):
        if self.child is None or self.child.poll() is None:
            return
        code = self.child.returncode
        if code < 0:
            code = 128 - code  # like a shell: killed by signal N -> 128+N
        if self.stopping and self.killed:
            code = 128 + signal.SIGKILL  # some of it had to be killed, whatever the shell said
        _signal_tree(None, signal.SIGKILL)  # whatever the command left behind
        attempt, stopped = self.child_attempt, self.stopping
        self.child = None
        self.report_exit(attempt, code, stopped)

    def report_exit(self, attempt, code, stopped):
        body = {"executor": self.executor_id, "attempt": attempt, "exit_code": code, "stopped": stopped}
        if code != 0 and not stopped and self.stderr_start:
            tail = stderr_tail(*self.stderr_start)
            if tail is not None:
                body["stderr_tail"], body["stderr_log"] = tail, self.stderr_start[0]
        try:
            self.am.call("POST", "/v1/exit", body)
        except Exception as exc:
            _log("could not report exit code %s to the AM: %s" % (code, exc))

    # -- main loop -------------------------------------------------------------
    def run(self):
        self.register()
        threading.Thread(target=self.poll_forever, daemon=True).start()
        while True:
            self.check_child()
            try:
                instr = self.instructions.get(timeout=0.05 if self.child else 1.0)
            except queue.Empty:
                continue
            op = instr["op"]
            if op == "run":
                if self.child is None:
                    self.start(instr)
            elif op == "register":
                self.stop_child(float(instr.get("grace", DEFAULT_GRACE)))
                self.check_child()
                self.register(instr.get("attempt"))
            elif op in ("exit", "am-lost"):
                if op == "am-lost":
                    _log(instr.get("why", "the AM is gone"))
                self.stop_child(float(instr.get("grace", DEFAULT_GRACE)))
                self.check_child()
                self.done.set()
                if op == "exit":
                    try:
                        self.am.call("POST", "/v1/goodbye", {"executor": self.executor_id}, retry_for=2)
                    except Exception:
                        pass
                return int(instr.get("code", 0 if op == "exit" else 1))


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _kill_escaped():
    """SIGKILL every descendant that left the executor's process group (``setsid``).

    When a container is stopped, YARN's NodeManager signals the container's process
    group only: SIGTERM, then SIGKILL 250 ms later (yarn.nodemanager.sleep-delay-before-sigkill.ms),
    and the executor is gone with that SIGKILL. A process outside the group would outlive
    the job, so it gets now what the group gets at the end.
    """
    group = os.getpgrp()
    for p in _descendants():
        try:
            if os.getpgid(p) != group:
                os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_tree(pid, sig):
    """Signal the task's command and everything it started.

    The command stays in the executor's process group (so YARN's kill of the
    container's group reaches it); the executor walks its descendants instead.
    """
    pids = _descendants()
    if pid is not None and pid not in pids:
        pids.insert(0, pid)
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def main():
    _die_with_parent(signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.environ.get("SUBM_LOG_TO_CONTAINER") == "1":
        log_to_container(os.environ)
    try:
        lay_out_files(os.environ, os.environ.get("SUBM_WORKDIR") or os.getcwd())
    except (OSError, ValueError, tarfile.TarError) as exc:
        _log("cannot lay out the job's files: %s" % exc)
        sys.exit(1)
    try:
        executor = Executor(os.environ)
    except (ConnectionError, KeyError, ImportError, OSError) as exc:
        _log("cannot start: %s" % exc)
        sys.exit(1)

    def on_signal(signum, frame):
        _kill_escaped()
        executor.stop_child(DEFAULT_GRACE)
        sys.exit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        code = executor.run()
    except (ConnectionError, RuntimeError) as exc:
        _log(str(exc))
        executor.stop_child(DEFAULT_GRACE)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
