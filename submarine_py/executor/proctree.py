"""The executor's process tree: its task's command and everything that command starts.

Standard library only, shipped beside the executor (``subm_proctree.py``, see
``executor.py``). Linux: the executor is a child subreaper, so orphans of the command stay
below it; /proc tells who is below; everything below is signalled together.
"""
import os

try:
    import _signal as signal  # signal.py's own base: no enum (see am_client.py)
except ImportError:  # pragma: no cover - not CPython
    import signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Pids that subprocess.Popen reaps itself (reaping them here would lose their exit code).
POPEN_CHILDREN = set()


def prctl(option, value):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, int(value), 0, 0, 0)
    except Exception:  # not Linux: best effort only
        pass


#: The parent this process (the executor) started with.
STARTED_BY = os.getppid()


def die_with_parent(sig, parent):
    """Ask Linux to signal this process when its parent exits (no orphans). A parent that is
    gone before the asking sends nothing: ``parent`` is the pid this process's parent had, and
    a process already orphaned signals itself now."""
    prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def dying_with_this_process(sig=signal.SIGKILL):
    """A ``preexec_fn``: the child dies with the process that starts it (see ``die_with_parent``);
    the executor's task and the local backend's AM and executors are started with one."""
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)


def become_subreaper():
    """Orphans of the task's command become this process's children (not init's)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def descendants():
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
            fields = _stat(entry)
            state, ppid = fields[0], int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
        if state == "Z":  # dead: reap orphans left to us (the command itself is Popen's to reap)
            if ppid == os.getpid() and int(entry) not in POPEN_CHILDREN:
                reap(int(entry))
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def kill_escaped():
    """SIGKILL every descendant that left the executor's process group (``setsid``).

    When a container is stopped, YARN's NodeManager signals the container's process
    group only: SIGTERM, then SIGKILL 250 ms later (yarn.nodemanager.sleep-delay-before-sigkill.ms),
    and the executor is gone with that SIGKILL. A process outside the group would outlive
    the job, so it gets now what the group gets at the end.
    """
    group = os.getpgrp()
    for p in descendants():
        try:
            if os.getpgid(p) != group:
                os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_everything_below():
    """SIGKILL every process below this one, each frozen first (none forks meanwhile).

    The executor's last act when a signal ends it: what it started must not outlive it, and
    it cannot always name its task's processes. A signal that lands inside ``start()`` finds
    the processes started but not yet the executor's task; one that lands while the task is
    being stopped finds orphans of the task's shell (a shell that dies does not take its
    children with it)."""
    for pid in freeze(descendants()):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def freeze(pids, rounds=100):
    """SIGSTOP ``pids`` and every process below this one, until a scan finds no new process;
    returns them all. A process that forks between a scan and its SIGKILL would leave a child
    no scan saw (an orphan holding the task's pipes); a stopped process forks no more."""
    seen = []
    for _ in range(rounds):
        new = [p for p in pids if p not in seen]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        # kill() returns before the signal lands: one in the middle of fork() finishes it first.
        _until_stopped(new)
        seen += new
        pids = descendants()
    return seen


def _until_stopped(pids, most=1.0):
    """Wait (at most ``most`` s) until each of ``pids`` is stopped or gone."""
    import time

    deadline = time.monotonic() + most
    for p in pids:
        while _state(p) not in "TtZX" and time.monotonic() < deadline:
            time.sleep(0.001)


def _state(pid):
    """A process's state letter (/proc), "X" for one that is gone."""
    try:
        return _stat(pid)[0]
    except (OSError, IndexError):
        return "X"


def _stat(pid):
    """The fields of /proc/PID/stat after the command's name (state, ppid, ...)."""
    with open("/proc/%s/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()

