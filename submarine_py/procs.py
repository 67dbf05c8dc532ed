"""Process helpers shared by the CLI side and the AM (Linux first, degrade elsewhere)."""
from __future__ import annotations

import os
import signal
from typing import Callable, Optional

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` asking Linux to signal the child when its parent thread ends.

    A parent that dies between the fork and the ``prctl`` sends nothing: the child, already
    orphaned, then signals itself (its parent is no longer the one that forked it)."""
    parent = os.getpid()

    def _set() -> None:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        except Exception:
            return
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return _set


def signal_group(pid: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def pid_alive(pid: Optional[int]) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
