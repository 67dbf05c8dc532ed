"""Field-level rules of the job file: what a role or variable name, an image or a mount may
be, the numeric limits, and how values are shown in problems.

These hold for every backend; what only one backend cannot take (YARN's queue and node
label names, the characters its launch script passes on...) is that backend's
``check(spec)`` (``backends/yarn/client/rules.py``). Pure and free of the spec dataclasses
(``model.py``) and of the walk that applies these rules with each field's path (``validate.py``).
"""
from __future__ import annotations

import os
import re
from typing import Any, List, Mapping, Optional, Tuple

#: A role's name: a letter, then letters, digits or '-'.
ROLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,62}\Z")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# [registry[:port]/]path[:tag][@digest], lower-case path components as Docker requires.
IMAGE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?\Z"
)
RESERVED_ENV_PREFIX = "SUBM_"
MAX_STOP_GRACE_SECONDS = 3600
#: timeouts.lost_after_seconds: an executor's heartbeat comes every third of it (at most 2 s).
MIN_LOST_AFTER_SECONDS = 1
MAX_LOST_AFTER_SECONDS = 600
#: Linux: one argument or ``NAME=value`` string of a process (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 131072
#: What a task's own variables and command may take of the kernel's ARG_MAX (2 MiB with the
#: usual 8 MiB stack), leaving the rest to the container's inherited environment and subm's.
MAX_TASK_ARGS_BYTES = 1 << 20
#: Upper bounds on every backend: beyond them a number is a typo (and YARN's int32 fields
#: would overflow).
MAX_INSTANCES = 1000
MAX_VCORES = 1024
MAX_GPUS = 64
#: roles.R.processes: as many as the most GPUs a task may have.
MAX_PROCESSES = 64
MAX_GANG_SECONDS = 24 * 3600
MAX_JOB_SECONDS = 366 * 24 * 3600


def mount_problem(m: Any) -> Optional[str]:
    """Why a Docker mount is not ``src:dst[:ro|rw]`` with absolute paths (Docker's ``-v`` form), or None."""
    if not isinstance(m, str):
        return f"expected 'src:dst[:ro|rw]', got {show(m)}"
    parts = m.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        return f"expected 'src:dst[:ro|rw]', got {show(m)}"
    if len(parts) == 3 and parts[2] not in ("ro", "rw"):
        return f"the mode must be ro or rw, got {parts[2]!r}"
    if not (os.path.isabs(parts[0]) and os.path.isabs(parts[1])):
        return f"both paths must be absolute, got {show(m)}"
    return None


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def exec_limit_problems(command: str, env: Mapping[str, str], path: str) -> List[Tuple[str, str]]:
    """What Linux's execve() takes: each string at most MAX_ARG_STRLEN, all of them within ARG_MAX.

    The task runs as ``/bin/sh -c COMMAND`` with its variables in the environment; past
    these limits every attempt would die with 'Argument list too long'. Returns (path, problem) pairs.
    """
    problems: List[Tuple[str, str]] = []
    size = len(command.encode()) + 1
    if size > MAX_ARG_STRLEN:
        problems.append((f"{path}.command", f"is {size - 1} bytes; a command may be at most {MAX_ARG_STRLEN - 1} "
                                            "(Linux's limit on one argument, MAX_ARG_STRLEN)"))
    total = size
    for name, value in env.items():
        entry = len(name.encode()) + 1 + len(value.encode()) + 1
        total += entry + 8  # and its pointer
        if entry > MAX_ARG_STRLEN:
            problems.append((f"{path}.env.{name}", f"NAME=value is {entry - 1} bytes; an environment variable may "
                                                   f"be at most {MAX_ARG_STRLEN - 1} (Linux's MAX_ARG_STRLEN)"))
    if total > MAX_TASK_ARGS_BYTES:
        problems.append((f"{path}.env", f"the command and variables take {total} bytes; a task's may take at "
                                        f"most {MAX_TASK_ARGS_BYTES} (Linux's ARG_MAX, with room for the rest of "
                                        "the environment)"))
    return problems
