"""The words of the AM's diagnostics: what a failed task's stderr says (the error first,
then its last lines), and what a gang timeout found missing (why no restart is left:
:meth:`submarine_py.restarts.Restarts.spent`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

from ..executor.stderr import SKIPPED, TAIL_BYTES, TAIL_LINES, TRACEBACK, find_error
from ..states import TaskState
from .containers import Containers
from .records import Task, shown

#: How much of a failed task's stderr its diagnostics quote (the executor sends as much).
STDERR_TAIL_LINES = TAIL_LINES
STDERR_TAIL_BYTES = TAIL_BYTES
INDENT = "    "


@dataclass(frozen=True)
class StderrQuote:
    """What diagnostics quote of a failed task's stderr: the error found in it (the last
    traceback's exception, or the last line that names an error: the executor's
    ``find_error``) and its last lines."""

    error: Tuple[str, ...] = ()
    tail: Tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for the AM's decision: the exception (with where the traceback's last
        frame is), or the line that names an error, or else the last line."""
        if not self.error:
            return f"last stderr line: {self.tail[-1].strip()}" if self.tail else ""
        said = [line for line in self.error if not line.strip().endswith(TRACEBACK)]
        frame = next((line.strip() for line in said if line.strip().startswith('File "')), "")
        message = next((line.strip() for line in said if not line[:1].isspace()), said[-1].strip())
        return f"error: {message}" + (f" ({frame})" if frame else "")

    def quoted(self, task_id: str) -> str:
        """The error's lines, then the last lines, each under its title and indented."""
        parts = []
        if self.error and list(self.error) != list(self.tail):
            parts.append(f"the error in {task_id}'s stderr:\n" + "\n".join(INDENT + line for line in self.error))
        if self.tail:
            parts.append(f"last lines of {task_id}'s stderr:\n" + "\n".join(INDENT + line for line in self.tail))
        return "\n".join(parts)


def quote_stderr(text: str) -> StderrQuote:
    """What to quote of ``text``: what the executor sent (``stderr_tail``: the error it found,
    SKIPPED, the last lines) or, where it could not read its stderr, the end of the log the
    backend read itself (local Docker)."""
    _, error = find_error(text.splitlines())
    before, skipped, after = text.rpartition("\n" + SKIPPED + "\n")
    return StderrQuote(error=tuple(error), tail=tuple(tail_lines(after if skipped else text)))


def tail_lines(text: str) -> List[str]:
    """The last lines of a stream that hold something, bounded (STDERR_TAIL_LINES, _BYTES)."""
    lines = text.encode("utf-8", "replace")[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").splitlines()
    return [line.rstrip() for line in lines if line.strip()][-STDERR_TAIL_LINES:]


def quote_tail(text: str) -> str:
    """The last lines of a stream, bounded and indented for diagnostics."""
    return "\n".join(INDENT + line for line in tail_lines(text))


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
