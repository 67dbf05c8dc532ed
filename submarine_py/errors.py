"""The one exception family of submarine-py.

Every error the project raises on purpose derives from :class:`SubmarineError`;
each subclass also inherits the matching built-in, so callers may catch either.
The CLI catches ``SubmarineError`` once and prints ``Error: ...``.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Tuple


class SubmarineError(Exception):
    """Base class of every error submarine-py raises on purpose."""

    exit_code = 1


class SpecError(SubmarineError, ValueError):
    """A job spec (or a command's input) is invalid.

    Holds every problem found, each as ``(path, message)``, so one run of
    ``subm validate`` reports them all.
    """

    exit_code = 2

    def __init__(self, problems: Iterable[Tuple[str, str]]):
        self.problems: List[Tuple[str, str]] = list(problems)
        super().__init__(self._format())

    def _format(self) -> str:
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.problems]
        if len(lines) == 1:
            return lines[0]
        return f"{len(lines)} problems:\n" + "\n".join("  " + line for line in lines)


class BackendError(SubmarineError, RuntimeError):
    """A backend (local or YARN) could not do what was asked."""


class CredentialsError(BackendError):
    """This user cannot prove who they are to a secure (Kerberized) cluster: no ticket, an
    expired one, a keytab that does not log in. Input the user fixes (``kinit``, the right
    keytab) before anything is submitted, so exit 2; a ``BackendError`` for code that reads
    the cluster and degrades when it cannot (the AM's admission)."""

    exit_code = 2


class AccessDeniedError(BackendError):
    """The cluster refused this user an action on a job: its ACLs (the job file's ``acls``,
    YARN's ``yarn.admin.acl``) do not name them."""


class ClusterLimitError(SpecError):
    """The spec asks for more than the target cluster can ever give."""


class JobNotFoundError(SubmarineError, LookupError):
    """No job with that id is known to the backend."""


class WaitTimeout(SubmarineError, TimeoutError):
    """A job did not end within the time given to wait for it (``subm wait --timeout``, exit
    124 as ``timeout(1)``'s); the job goes on. ``report`` is its last status seen."""

    exit_code = 124

    def __init__(self, message: str, report: Any = None):
        super().__init__(message)
        self.report = report


class ProblemCollector:
    """Checks that go on after the first problem, so one error names every problem found.

    Subclasses call :meth:`fail` for each problem and :meth:`raise_if_any` at the end.
    """

    def __init__(self) -> None:
        self.problems: List[Tuple[str, str]] = []

    def fail(self, path: str, msg: str) -> None:
        self.problems.append((path, msg))

    def raise_if_any(self) -> None:
        if self.problems:
            raise SpecError(self.problems)
