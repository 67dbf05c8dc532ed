"""The task's processes: one per local rank, started, watched and stopped as one task.

Standard library only, shipped beside the executor (``subm_processes.py``, see ``main.py``).

A task runs ``processes`` copies of its command (torchrun's ``--nproc_per_node``), each with the
environment the AM built for its local rank. They are one task: the first that exits non-zero
is the task's failure (its exit code, its local rank, its stderr's last lines), and the others
are then stopped; the task succeeds when every one has exited 0 (one that exits 0 early while
the others run is fine, as under torchrun).

Every process stays in the executor's process group, as a single command does: YARN's
NodeManager stops a container by signalling that group, so it reaches every process of the task
even if the executor itself is killed first. The executor is a child subreaper (``proctree.py``):
whatever a process leaves behind stays below it and is stopped with the task.

Output: stdout is shared as it is (lines of the processes interleave, torchrun's default). With
more than one process each one's stderr comes through a pipe of its own that the executor copies
to its own stderr as it arrives (no prefix: what the program writes, as under torchrun) while
keeping its last bytes, so that a failure quotes the stderr of the process that failed. A single
process writes straight to the executor's stderr, as before.
"""
import os
import time

import _thread

try:
    import _signal as signal  # signal.py's own base: no enum (see am_client.py)
except ImportError:  # pragma: no cover - not CPython
    import signal

#: How long a failed process's stderr may take to reach the executor once it has exited (its
#: children can keep the pipe open: then its tail is what has arrived by then).
DRAIN_SECONDS = 0.5
#: How long :meth:`TaskProcesses.kill` waits for each SIGKILLed process to be reaped. Bounded
#: because kill() also runs in the executor's SIGTERM handler: if the signal came while the main
#: loop was inside Popen.poll(), Popen's waitpid lock is held by the frame the handler
#: interrupted, and an unbounded Popen.wait() would wait for it forever (the executor, orphaned,
#: outliving its job). Popen.wait(timeout) only tries that lock.
KILL_WAIT_SECONDS = 5.0


def exit_code(returncode):
    """A process's end as a shell says it: killed by signal N -> 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def _write_all(fd, data):
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:  # our stderr is gone: keep draining, or the process would block
            return


class StderrPipe:
    """One process's stderr: copied to the executor's stderr (fd 2) as it comes, its last
    ``keep`` bytes kept. A thread of its own reads it until every writer has closed it."""

    def __init__(self, keep):
        self.keep = keep
        self.read_fd, self.write_fd = os.pipe()
        self.last = b""
        self.cut = False  # more came than ``last`` keeps: its first line is cut
        self._done = _thread.allocate_lock()
        self._done.acquire()

    def start(self):
        """After the process has started with ``write_fd``: close ours, copy what comes."""
        os.close(self.write_fd)
        self.write_fd = None
        _thread.start_new_thread(self._copy, ())

    def close_unused(self):
        """The process never started: nobody will read."""
        for fd in (self.read_fd, self.write_fd):
            if fd is not None:
                os.close(fd)
        self.read_fd = self.write_fd = None

    def _copy(self):
        try:
            while True:
                try:
                    data = os.read(self.read_fd, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                _write_all(2, data)
                self.last += data
                if len(self.last) > self.keep:
                    self.last, self.cut = self.last[-self.keep:], True
        finally:
            os.close(self.read_fd)
            self._done.release()

    def tail(self, wait):
        """The last bytes, as text, once everything written has arrived (or ``wait`` s passed)."""
        if self._done.acquire(True, max(0.0, wait)):
            self._done.release()
        text = self.last.decode("utf-8", "replace")
        return text.split("\n", 1)[-1] if self.cut else text


class Process:
    """One local rank: its Popen, its exit code once it has exited, its stderr pipe (or None)."""

    def __init__(self, local_rank, popen, pipe):
        self.local_rank = local_rank
        self.popen = popen
        self.pipe = pipe
        self.code = None


class TaskProcesses:
    """``len(envs)`` processes of ``command`` (``/bin/sh -c``), local rank ``i`` with ``envs[i]``.

    ``subprocess`` and ``proctree`` are the executor's (imported once it runs commands).
    Raises OSError when a process cannot start (the ones already started are killed).
    """

    def __init__(self, command, envs, cwd, subprocess, proctree, tail_bytes):
        self.proctree = proctree
        self.subprocess = subprocess
        self.processes = []
        #: ``(local rank, exit code)`` of the first process that exited non-zero, or None.
        self.failure = None
        #: The task's end has been reported to the AM (a failure is reported at once).
        self.reported = False
        capture = len(envs) > 1
        try:
            for rank, env in enumerate(envs):
                pipe = StderrPipe(tail_bytes) if capture else None
                try:
                    popen = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd, env=env,
                                             stderr=pipe.write_fd if pipe else None,
                                             preexec_fn=proctree.dying_with_this_process())
                except BaseException:
                    if pipe:
                        pipe.close_unused()
                    raise
                proctree.POPEN_CHILDREN.add(popen.pid)
                if pipe:
                    pipe.start()
                self.processes.append(Process(rank, popen, pipe))
        except OSError:
            self.kill()
            raise

    def __len__(self):
        return len(self.processes)

    @property
    def pids(self):
        return [p.popen.pid for p in self.processes]

    def running(self):
        """Whether a process still runs (as last polled: safe from another thread)."""
        return any(p.code is None for p in self.processes)

    def poll(self):
        """Take the exits of processes that ended; True once every one has."""
        for p in self.processes:
            if p.code is None and p.popen.poll() is not None:
                p.code = exit_code(p.popen.returncode)
                self.proctree.POPEN_CHILDREN.discard(p.popen.pid)
                if p.code != 0 and self.failure is None:
                    self.failure = (p.local_rank, p.code)
        return not self.running()

    def task_exit_code(self):
        """The task's exit code once every process has exited: the first failure's, else 0."""
        return self.failure[1] if self.failure else 0

    def signal(self, sig):
        """``sig`` to every process of the task that has not been reaped, and to everything
        below the executor (what they started, orphans included: see ``proctree.py``)."""
        targets = set(self.proctree.descendants())
        targets.update(p.popen.pid for p in self.processes if p.code is None)
        if sig == signal.SIGKILL:  # none may fork between the scan and the kill
            targets = self.proctree.freeze(sorted(targets))
        for pid in targets:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, grace, since=None):
        """SIGTERM to every process and what they started, SIGKILL to what is left after
        ``grace`` seconds; returns True when SIGKILL was needed. Returns as soon as the last
        process is gone: a task that exits on SIGTERM is not waited for. ``since``: when the
        SIGTERM was sent already (``time.monotonic()``), so that none is sent twice."""
        if since is None:
            since = time.monotonic()
            self.signal(signal.SIGTERM)
        deadline = since + grace
        while time.monotonic() < deadline:
            if self.poll() and not self.proctree.descendants():
                break
            time.sleep(0.02)
        self.poll()
        exited = not self.running()
        left = self.proctree.descendants()
        self.kill()
        return not exited or bool(left)

    def kill(self):
        """SIGKILL to every process and what they left behind; waits for the processes."""
        self.signal(signal.SIGKILL)
        for p in self.processes:
            try:
                p.popen.wait(KILL_WAIT_SECONDS)
            except self.subprocess.TimeoutExpired:
                pass  # see KILL_WAIT_SECONDS: the handler's caller exits now, init reaps it
        self.poll()

    def stderr_tail(self, local_rank, wait=DRAIN_SECONDS):
        """What the process of ``local_rank`` last wrote to stderr, or None when its stderr
        was not captured (a single process: the executor reads its own stderr's file)."""
        pipe = self.processes[local_rank].pipe
        return pipe.tail(wait) if pipe is not None else None
