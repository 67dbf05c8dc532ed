"""Field-level rules of the job file: what a name, an image, a mount, a queue, a node label,
a tag or a file name may be, the numeric limits, and how values are shown in problems.

Pure and free of the spec dataclasses (``model.py``) and of the walk that applies these rules
with each field's path (``validate.py``).
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
#: A name YARN turns into a file of the container's directory (a ``files`` destination or a
#: source's base name): YARN's launch script writes it between double quotes, so no ``$``,
#: backquote, quote, backslash or control character may reach it; no ``:``/``#``/``%``/``?``
#: (URIs) and no leading ``-`` (an option to ``ln``).
FILE_NAME = re.compile(r"^[A-Za-z0-9._+@=,~][A-Za-z0-9._+@=,~ -]*\Z")
#: A host or container path of a Docker mount (YARN separates mounts with ',' and fields with ':').
MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._+@=~/-]*\Z")
#: A queue name or path (root.team.a): no spaces, no empty parts.
QUEUE = re.compile(r"^[A-Za-z0-9_@+-]+(?:\.[A-Za-z0-9_@+-]+)*\Z")
#: YARN's node label names; Hadoop 3.1 takes one label per request.
NODE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,254}\Z")
#: Linux: one argument or ``NAME=value`` string of a process (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 131072
#: What a task's own variables and command may take of the kernel's ARG_MAX (2 MiB with the
#: usual 8 MiB stack), leaving the rest to the container's inherited environment and subm's.
MAX_TASK_ARGS_BYTES = 1 << 20
#: Upper bounds: beyond them a number is a typo, and YARN's int32 fields would overflow.
MAX_INSTANCES = 1000
MAX_VCORES = 1024
MAX_GPUS = 64
MAX_GANG_SECONDS = 24 * 3600
MAX_JOB_SECONDS = 366 * 24 * 3600
#: YARN keeps at most 10 tags of at most 100 characters; submarine-py uses one itself.
MAX_TAGS = 9
MAX_TAG_CHARS = 100


FILE_NAME_RULE = ("names may hold letters, digits, spaces and . _ + @ = , ~ - (not first), "
                   "nothing a shell would read")


def base_name(source: str) -> str:
    """The last part of a source path or URL (what YARN calls the localized copy)."""
    path = source.split("://", 1)[1].split("/", 1)[-1] if "://" in source else source
    return os.path.basename(path.rstrip("/")) or path


def mount_problem(m: Any) -> Optional[str]:
    if not isinstance(m, str):
        return f"expected 'src:dst[:ro|rw]', got {show(m)}"
    parts = m.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        return f"expected 'src:dst[:ro|rw]', got {show(m)}"
    if len(parts) == 3 and parts[2] not in ("ro", "rw"):
        return f"the mode must be ro or rw, got {parts[2]!r}"
    if not (os.path.isabs(parts[0]) and os.path.isabs(parts[1])):
        return f"both paths must be absolute, got {show(m)}"
    for part in parts[:2]:
        if not MOUNT_PATH.match(part):
            return (f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes mounts through a "
                    f"shell script), got {part!r}")
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
