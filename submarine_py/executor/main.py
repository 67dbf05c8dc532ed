#!/usr/bin/env python3
"""submarine-py executor: one per task container, standard library only.

It must run inside any user image that has ``python3`` (as ``python3 -S``), so it imports
nothing outside the standard library. It goes to containers with the few modules it imports
(:data:`SIBLINGS`, and ``envcache.py`` with environment.archive): on YARN as one file, their
code embedded (``bundle.py``); locally as ``subm_executor.py`` beside
``subm_<module>.py`` files (:func:`shipped_files`). This file holds the executor's life and
its task, the siblings the rest (the working directory's files: ``workdir.py``; a sweep's
trial's metric lines: ``trial_metric.py``).

Life of an executor::

    reserve a free port and hold it       (no other process can take it)
    register host:port with the AM        POST /v1/register
    wait for instructions                 GET  /v1/next   (long poll)
      run:      start the task's processes (its command, once per local rank), each with
                the environment the AM built for it (processes.py: one task for failure)
      register: stop the processes, re-register for the next attempt (same port when possible)
      exit:     stop the processes (SIGTERM to them and theirs, then SIGKILL), leave
      hung:     stop the processes, report their end as the task's failure (it printed nothing
                for timeouts.hang_seconds: the AM decides, from what the polls say)
      stop:     stop the processes of that attempt (a sweep's trial stopped early); the
                executor stays, and the next ``run`` starts the next trial at once
    report every end of the task          POST /v1/exit  (the first failed process, or all 0)
    a sweep's trial: its metric's lines   POST /v1/metric (the lines of its stdout naming it)
    while a command with GPUs runs        POST /v1/gpu    (NVML samples, when NVML answers)

Each poll returns after a couple of seconds at most and the next one starts at
once: the polls are the executor's heartbeat (the AM declares a silent executor
lost, since a machine that dies closes no connection). While a task runs, each poll
also says how long it has printed nothing (its stdout and stderr are files, whose
modification time every write moves), which is how the AM finds a hung task.

The executor outlives attempts, so a gang restart needs no new containers.
Settings come from the environment: SUBM_TOKEN (or SUBM_TOKEN_FILE, a file
holding it: on YARN, where variables end up in a log the NodeManager serves), SUBM_ROLE, SUBM_AM_URL (or
SUBM_AM_DISCOVERY), SUBM_EXECUTOR_ID (or skein's SKEIN_CONTAINER_ID), and
optionally SUBM_INDEX (preferred task index), SUBM_ADVERTISE_HOST, SUBM_WORKDIR,
SUBM_LOG_TO_CONTAINER, SUBM_STOP_GRACE (SIGTERM -> SIGKILL when stopped by a signal), and on
YARN SUBM_FILES_ARCHIVE / SUBM_FILES_LINKS (the job's files, laid out in the working
directory before the executor registers).
"""
import os
import sys
import time

try:
    import _signal as signal  # signal.py's own base: no enum (see am_client.py)
except ImportError:  # pragma: no cover - not CPython
    import signal

try:
    from _queue import Empty, SimpleQueue  # what queue.SimpleQueue is, without queue's imports
except ImportError:  # pragma: no cover - another Python
    from queue import Empty, SimpleQueue

# Imported when first needed (see Executor.start, workdir.py): every task container starts
# an executor, and all of them start together; what each imports before it registers is CPU
# the whole node pays at the moment the gang assembles (see am_client.py).
subprocess = None

#: The modules the executor imports, standard library only like itself, shipped with it
#: (see :func:`shipped_files`, ``bundle.py``): process tree, the task's processes, NVML
#: sampling, the AM, the working directory, a sweep's trial's metric; and the names of the
#: protocol with the AM (``protocol.py``, which the AM imports too).
SIBLINGS = ("protocol", "proctree", "processes", "stderr", "nvml", "am_client", "workdir", "trial_metric")
#: Loaded only with environment.archive (see ``envcache.py``); shipped only then where the
#: modules travel as files of their own.
ENVCACHE = "envcache"


#: How long one long poll for instructions lasts unless the AM says otherwise at registration.
#: Polls follow each other at once: they are the executor's heartbeat, and the AM declares an
#: executor lost after a few missed ones (a dead machine closes no connection).
POLL_SECONDS = 2.0

#: A task killed by a SIGKILL its executor did not send has its end reported this much later.
#: A machine that dies (a NodeManager's container killed, say) takes every process of the
#: container in no set order; an executor that outlives its task by a moment would report the
#: cluster's fault as the program's (exit code 137, spending the job's max_restarts) where its
#: silence would have told the AM the truth. What kills the task alone (the kernel's OOM killer,
#: a user's ``kill -9``) is reported as the task's failure all the same, this much later.
FOREIGN_KILL_DELAY_SECONDS = 1.0
#: The signals that end the executor (its task stopped, everything below it killed).
LEAVING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def shipped_name(module):
    """A sibling's file name in a container (``subm_`` names: the job's own files keep theirs)."""
    return "subm_%s.py" % module


def shipped_files(modules=SIBLINGS):
    """``{file name in a container: path here}``: this executor and ``modules`` (its siblings).
    YARN localizes them into the container's directory, local Docker mounts them in one folder,
    local processes run this file where it is, beside them."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = {shipped_name("executor"): os.path.abspath(__file__)}
    for name in modules:
        out[shipped_name(name)] = os.path.join(here, name + ".py")
    return out


_LOADED = {}


def _sibling(name):
    """A module beside this file: from the package when the executor is imported as its module,
    else from ``subm_<name>.py`` (shipped) or ``<name>.py`` (run where the package is), loaded by
    path and kept out of sys.modules (``python -S``, whatever the image's sys.path holds)."""
    if __package__:
        import importlib

        return importlib.import_module("." + name, __package__)
    if name not in _LOADED:
        module = type(sys)(shipped_name(name)[:-3])  # a plain module (importlib costs imports)
        if name != "protocol":  # the protocol's names, for every module (see protocol.py)
            module.protocol = _sibling("protocol")
        compiled = globals().get("SUBM_CODE") or {}  # the bundle's (see bundle.py)
        if name in compiled:
            module.__file__, code = __file__, compiled[name]
        else:
            path, source = _sibling_source(name)
            module.__file__, code = path, compile(source, path, "exec")
        exec(code, module.__dict__)
        _LOADED[name] = module
    return _LOADED[name]


def _sibling_source(name):
    """``(path, source)`` of a sibling: ``subm_<name>.py`` (shipped) or ``<name>.py`` beside this file."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, shipped_name(name)), os.path.join(here, name + ".py")):
        if os.path.exists(path):
            with open(path, "rb") as f:
                return path, f.read()
    raise ImportError("%s.py is not beside %s" % (name, __file__))


protocol = _sibling("protocol")  # the names of the protocol with the AM
proctree, am_client = _sibling("proctree"), _sibling("am_client")  # nvml: when a task has GPUs


def _log(msg):
    sys.stderr.write("[subm-executor %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def log_to_container(env):
    """On YARN: write stdout/stderr (ours and the task's) as files of the container's log dir."""
    log_dir = (env.get("LOG_DIRS") or "").split(",")[0]
    if not log_dir or not os.path.isdir(log_dir):
        return
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = os.open(os.path.join(log_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def _index_from_container_id(container_id):
    tail = (container_id or "").rsplit("_", 1)[-1]
    return tail if tail.isdigit() else None


def _node_http(env):
    """The web address of the NodeManager running this container (YARN sets both in every
    container), or None: the AM then asks the cluster where the container is."""
    host, port = env.get("NM_HOST"), env.get("NM_HTTP_PORT")
    return "%s:%s" % (host, port) if host and port else None


def _fqdn():
    import socket  # only where neither the launcher nor YARN said which host this is

    return socket.getfqdn()


class Executor:
    def __init__(self, env):
        self.env = env
        self.executor_id = env.get(protocol.EXECUTOR_ID) or env["SKEIN_CONTAINER_ID"]
        self.role = env[protocol.ROLE]
        #: SIGTERM -> SIGKILL whenever the task is stopped: the job's timeouts.stop_grace_seconds,
        #: which reaches the executor by this one route (the plan's executor_settings).
        self.grace = float(env[protocol.STOP_GRACE])
        self.index_hint = env.get(protocol.INDEX) or _index_from_container_id(env.get("SKEIN_CONTAINER_ID"))
        self.host = env.get(protocol.ADVERTISE_HOST) or env.get("NM_HOST") or _fqdn()
        self.workdir = env.get(protocol.WORKDIR) or os.getcwd()
        # environment.archive: unpacked into the node's cache in the background while we register.
        self.environment = (_sibling(ENVCACHE).ShippedEnvironment(env, self.workdir, log=_log)
                            if env.get(protocol.ENV_ARCHIVE) else None)
        self.am = am_client.AMClient(am_client.discover_am(env), am_client.read_token(env), self.executor_id)
        self.instructions = SimpleQueue()
        self.reservation = None
        self.task = None  # the running attempt's TaskProcesses (processes.py)
        self.task_attempt = None
        self.task_started = 0.0  # when it started (epoch seconds)
        self.hung = None  # (attempt, seconds quiet, stderr tail, stdout tail): the AM found it hung
        #: Where this attempt's stderr begins (path, offset), when stderr is a readable file.
        self.stderr_start = self.stdout_start = None
        self.stopping = False  # the task is being stopped (not failing by itself)
        self.killed = False  # the last stop needed SIGKILL
        self.seq = 0
        self.poll_seconds = POLL_SECONDS
        self.done = am_client.Event()
        self.gpu = None  # a GpuSampler once a task with GPUs has started, if NVML answers
        self.commands_prepared = False  # see prepare_for_commands
        #: A sweep's trial: its metric, whose lines go to the AM (trial_metric.py's TrialMetric).
        self.metric = None

    # -- AM communication ----------------------------------------------------
    def register(self, attempt=None):
        preferred = self.reservation.port if self.reservation else 0
        if self.reservation is None or self.reservation.sock is None:
            self.reservation = am_client.PortReservation(preferred)
        body = {"executor": self.executor_id, "role": self.role, "index": self.index_hint,
                "host": self.host, "port": self.reservation.port, "pid": os.getpid(),
                "attempt": attempt, "container": self.env.get("CONTAINER_ID"),
                "node_http": _node_http(self.env), "log_dirs": self.env.get("LOG_DIRS")}
        reply = self.am.call("POST", protocol.PATH_REGISTER, body)
        self.index_hint = str(reply.get("index", self.index_hint))
        try:
            self.poll_seconds = min(max(float(reply.get("heartbeat", POLL_SECONDS)), 0.2), 20.0)
        except (TypeError, ValueError):
            pass

    def poll_forever(self):
        """Long-poll the AM for instructions and queue them for the main loop."""
        while not self.done.is_set():
            task, attempt = self.task, self.task_attempt
            printed = _sibling("stderr").last_printed(self.task_started) if task is not None and task.running() else None
            quiet = "" if printed is None else "&quiet=%.1f&attempt=%d" % (max(0.0, time.time() - printed), attempt)
            try:
                reply = self.am.call("GET", "%s?executor=%s&after=%d&wait=%g%s"
                                     % (protocol.PATH_NEXT, self.executor_id, self.seq, self.poll_seconds, quiet),
                                     timeout=self.poll_seconds + 10)
            except Exception as exc:  # AM gone for good: stop the task, leave
                self.instructions.put({"op": "am-lost", "why": str(exc)})
                return
            for instr in reply.get("instructions", []):
                self.seq = max(self.seq, instr["seq"])
                self.instructions.put(instr)

    # -- the task's processes ------------------------------------------------
    def prepare_for_commands(self):
        """Once, before the first command: what only commands need is done then, not while
        the gang assembles and every container's executor starts at once (subprocess's
        imports, prctl through ctypes: 3 ms of CPU, the ``python`` wrappers)."""
        global subprocess
        if self.commands_prepared:
            return
        import subprocess
        _sibling("processes")
        proctree.die_with_parent(signal.SIGTERM, proctree.STARTED_BY)
        proctree.become_subreaper()
        _sibling("workdir").write_python_wrappers(self.env, self.workdir)
        self.commands_prepared = True

    def start(self, instr):
        """Start the attempt's processes: one per environment of the instruction (``envs``,
        in local-rank order; ``env`` alone for one process)."""
        base = dict(os.environ)
        for k in (protocol.TOKEN, protocol.TOKEN_FILE, protocol.AM_URL, protocol.EXECUTOR_ID, protocol.PYTHON_WRAPPER):
            base.pop(k, None)
        envs = [dict(base, **e) for e in (instr.get("envs") or [instr["env"]])]
        header = instr.get("header") or "[subm] %s attempt %s" % (self.role, instr["attempt"])
        for stream in (sys.stdout, sys.stderr):
            stream.write(header + "\n")
            stream.flush()
        stderr = _sibling("stderr")
        path, out = stderr.stderr_path(), stderr.stderr_path(1)
        try:
            self.stderr_start = (path, os.fstat(2).st_size) if path else None
            self.stdout_start = (out, os.fstat(1).st_size) if out else None
        except OSError:
            self.stderr_start = self.stdout_start = None
        if not instr.get("hold_port"):
            self.reservation.release()
        cwd = instr.get("workdir") or self.workdir
        shared = envs[0].get(protocol.SHARED_DIR)
        if shared and not os.path.isdir(shared):
            sys.stderr.write("[subm] SUBM_SHARED_DIR %s is not a folder on %s: shared_dir must be a path "
                             "that every node mounts\n" % (shared, self.host))
            sys.stderr.flush()
            self.report_exit(instr["attempt"], 127, stopped=False)
            return
        self.prepare_for_commands()
        try:
            for env in envs:
                if self.environment is not None:
                    self.environment.apply(env)
            self.task = _sibling("processes").TaskProcesses(instr["command"], envs, cwd, subprocess,
                                                            proctree, _sibling("stderr").ERROR_SEARCH_BYTES)
        except OSError as exc:
            sys.stderr.write("[subm] cannot start the command: %s\n" % exc)
            sys.stderr.flush()
            self.report_exit(instr["attempt"], 127, stopped=False)
            return
        self.task_attempt, self.task_started = instr["attempt"], time.time()
        self.stopping = self.killed = False
        self.metric = None
        if instr.get("metric") and self.stdout_start:
            self.metric = _sibling("trial_metric").TrialMetric(instr["metric"], *self.stdout_start)
        if instr.get("gpus") and self.gpu is None:
            nvml = _sibling("nvml")
            self.gpu = nvml.GpuSampler(nvml.task_env(envs))  # the task's GPUs, once for all
            if self.gpu.active:
                every = max(0.5, float(instr.get("gpu_sample_seconds") or 5))
                am_client.start_thread(self.sample_gpus, every)
        try:
            self.am.call("POST", protocol.PATH_STARTED, {"executor": self.executor_id, "attempt": instr["attempt"],
                                                 "pid": self.task.pids[0], "pids": self.task.pids})
        except Exception as exc:
            _log("could not tell the AM the task started: %s" % exc)

    def sample_gpus(self, every):
        """Every few seconds while the command runs, send the AM its GPUs' use (a missed
        send is retried with the next; at most a few minutes of samples are kept)."""
        pending = []
        while not self.done.wait(every):
            task, attempt = self.task, self.task_attempt
            devices = self.gpu.sample() if task is not None and task.running() else None
            if devices:
                pending.append({"time": round(time.time(), 3), "attempt": attempt, "devices": devices})
                del pending[:-60]
            if not pending:
                continue
            try:
                self.am.call("POST", protocol.PATH_GPU, {"executor": self.executor_id, "samples": pending},
                             timeout=5, retry_for=0)
                pending = []
            except Exception:  # the AM is busy or gone: the main loop handles a lost AM
                pass

    def stop_task(self, grace, since=None):
        """SIGTERM to the task's processes (and theirs), SIGKILL to what is left after ``grace``
        seconds. A task that exits sooner is not waited for: the wait ends with its last process.
        ``since``: when they got SIGTERM already."""
        task = self.task
        if task is None or (since is None and task.poll()):
            return
        self.stopping = True
        started = since or time.monotonic()
        self.killed = task.stop(grace, since)
        if self.killed:
            _log("the task did not exit within the %g s grace after SIGTERM: sent SIGKILL" % grace)
        else:
            _log("the task exited on SIGTERM in %.2f s (grace %g s)" % (time.monotonic() - started, grace))

    def check_task(self):
        """Report the task's end: at its first failed process (whose siblings are then stopped),
        or once every process has exited (0: the task succeeded; stopped: how it ended)."""
        task = self.task
        if task is None:
            return
        ended = task.poll()
        if task.failure and not task.reported and not self.stopping:
            rank, code = task.failure
            self.outlive_a_dying_machine(code)
            task.reported = True
            since = time.monotonic() if task.running() else None
            if since:  # the others: SIGTERM at once, the grace waited for once reported
                _log("local rank %d exited with code %d: stopping the task's other processes" % (rank, code))
                task.signal(signal.SIGTERM)
            self.report_exit(self.task_attempt, code, stopped=False,
                             local_rank=rank if len(task) > 1 else None, tail=task.stderr_tail(rank))
            if since:
                self.stop_task(self.grace, since)
                ended = True
        if not ended:
            return
        task.kill()  # whatever the processes left behind
        self.task = None
        if task.reported:
            return
        code = task.task_exit_code()
        if self.stopping and self.killed:
            code = 128 + signal.SIGKILL  # some of it had to be killed, whatever the shell said
        hung = self.hung if self.hung and self.hung[0] == self.task_attempt and code != 0 else None
        self.report_exit(self.task_attempt, code, self.stopping and hung is None, tail=hung and hung[2], hung=hung)

    def outlive_a_dying_machine(self, code):
        """Wait FOREIGN_KILL_DELAY_SECONDS before reporting a task that a SIGKILL ended (``code``
        137) while we were not stopping it: if its machine is dying, we die in that time too."""
        if code == 128 + signal.SIGKILL:
            _log("the task was killed (SIGKILL) by someone else: its end is reported in %g s, "
                 "unless this container goes with it" % FOREIGN_KILL_DELAY_SECONDS)
            time.sleep(FOREIGN_KILL_DELAY_SECONDS)

    def report_exit(self, attempt, code, stopped, local_rank=None, tail=None, hung=None):
        """``tail``: the failed process's stderr, when captured; else read from the executor's
        stderr file (one process), where it is a file. ``hung``: stopped as hung (``self.hung``)."""
        body = {"executor": self.executor_id, "attempt": attempt, "exit_code": code, "stopped": stopped}
        if self.metric is not None:  # a sweep's trial: what it printed last
            body["metric_lines"] = self.metric.lines(final=True)
            self.metric = None
        if local_rank is not None:
            body["local_rank"] = local_rank
        if code != 0 and not stopped:
            if tail is not None:
                tail = _sibling("stderr").stderr_report(tail)
            elif self.stderr_start:
                tail = _sibling("stderr").stderr_tail(*self.stderr_start)
            if tail is not None:
                body["stderr_tail"] = tail
            if self.stderr_start:
                body["stderr_log"] = self.stderr_start[0]
        if hung is not None:
            body["hung"], body["stdout_tail"] = hung[1], hung[3]
        try:
            self.am.call("POST", protocol.PATH_EXIT, body)
        except Exception as exc:
            _log("could not report exit code %s to the AM: %s" % (code, exc))

    # -- main loop -------------------------------------------------------------
    def run(self):
        self.register()
        am_client.start_thread(self.poll_forever)
        while True:
            self.check_task()
            if self.metric is not None and self.task is not None:
                self.metric.send(self.am, self.executor_id, self.task_attempt, _log)
            try:
                instr = self.instructions.get(timeout=0.05 if self.task else 1.0)
            except Empty:
                continue
            op = instr["op"]
            if op == "run":
                if self.task is None:
                    self.start(instr)
            elif op == "hung":  # what it printed last is read now, before the stop adds our words
                if self.task is not None and instr.get("attempt") == self.task_attempt:
                    self.hung = (self.task_attempt, instr.get("quiet"),
                                 _sibling("stderr").last_lines(*self.stderr_start) if self.stderr_start else None,
                                 _sibling("stderr").last_lines(*self.stdout_start) if self.stdout_start else None)
                    self.stop_task(self.grace)
            elif op == "stop":  # a sweep's trial stopped early: the executor stays for the next
                if self.task is not None and instr.get("attempt") == self.task_attempt:
                    self.stop_task(self.grace)
            elif op == "register":
                self.stop_task(self.grace)
                self.check_task()
                self.register(instr.get("attempt"))
            elif op in ("exit", "am-lost"):
                if op == "am-lost":
                    _log(instr.get("why", "the AM is gone"))
                self.stop_task(self.grace)
                self.check_task()
                self.done.set()
                if op == "exit":
                    try:
                        self.am.call("POST", protocol.PATH_GOODBYE, {"executor": self.executor_id}, retry_for=2)
                    except Exception:
                        pass
                return int(instr.get("code", 0 if op == "exit" else 1))


def main():
    if os.environ.get(protocol.LOG_TO_CONTAINER) == "1":
        log_to_container(os.environ)
    try:
        _sibling("workdir").lay_out_files(os.environ, os.environ.get(protocol.WORKDIR) or os.getcwd())
    except (OSError, ValueError) as exc:
        _log("cannot lay out the job's files: %s" % exc)
        sys.exit(1)
    try:
        executor = Executor(os.environ)
    except (ConnectionError, KeyError, ImportError, OSError, ValueError) as exc:
        _log("cannot start: %s" % exc)
        sys.exit(1)

    def on_signal(signum, frame):
        # Leaving: a second signal (the AM's death notice after YARN's SIGTERM, say) must not
        # cut this handler short between its SIGSTOPs and its SIGKILLs.
        for s in LEAVING_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        proctree.kill_escaped()
        executor.stop_task(executor.grace)
        proctree.kill_everything_below()
        sys.exit(128 + signum)

    for s in LEAVING_SIGNALS:
        signal.signal(s, on_signal)
    try:
        code = executor.run()
    except (ConnectionError, RuntimeError) as exc:
        _log(str(exc))
        executor.stop_task(executor.grace)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
