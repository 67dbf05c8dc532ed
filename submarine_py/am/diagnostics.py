"""The words of the AM's diagnostics: a failed task's stderr quoted, and what a gang timeout
found missing (why no restart is left: :meth:`submarine_py.restarts.Restarts.spent`)."""
from __future__ import annotations

from typing import Dict, Iterable, List

from ..states import TaskState
from .containers import Containers
from .records import Task, shown

#: How much of a failed task's stderr its diagnostics quote (the executor reads the same bounds).
STDERR_TAIL_LINES = 20
STDERR_TAIL_BYTES = 2048


def quote_tail(text: str) -> str:
    """The last lines of a stream, bounded and indented for diagnostics."""
    lines = text.encode("utf-8", "replace")[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").splitlines()
    lines = [line.rstrip() for line in lines if line.strip()][-STDERR_TAIL_LINES:]
    return "\n".join("    " + line for line in lines)


def gang_missing(tasks: Iterable[Task], containers: Containers, gang_seconds: float, attempt: int) -> str:
    """Why the gang is not complete: each task not registered, with what the cluster says of it."""
    missing = [ts for ts in tasks if ts.state not in (TaskState.REGISTERED, TaskState.RUNNING)]
    parts: List[str] = []
    by_role: Dict[str, List[str]] = {}
    for ts in missing:
        if ts.executor:
            parts.append(f"{ts.plan.id} ({containers.describe(ts.executor) or 'not registered'})")
        else:  # what the cluster says of a role is the same for each of its tasks: once
            by_role.setdefault(ts.plan.role, []).append(ts.plan.id)
    for role, ids in by_role.items():
        parts.append(f"{', '.join(ids)} ({containers.describe_role(role) or 'not registered'})")
    return (f"gang not complete within timeouts.gang_seconds ({gang_seconds} s), attempt {shown(attempt)}; "
            f"missing: {'; '.join(parts)}")
