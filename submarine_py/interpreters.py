"""Make ``python`` and ``python3`` in a task's command the environment subm runs from.

Python finds its virtualenv through the ``pyvenv.cfg`` beside (or one folder
above) the path it was *started from*, without resolving symlinks. A symlink to
``/venv/bin/python`` placed in another folder therefore starts the base
interpreter, without the venv's packages. So a task gets a folder of tiny shell
wrappers, ``exec /venv/bin/python "$@"``, first on its ``PATH``, and then the
interpreter's own folder (its console scripts: ``torchrun``, ``pip``, ...). This
holds for venvs, conda envs, pyenv and system interpreters alike, and where a
folder has only ``python3`` (Debian's ``/usr/bin``).
"""
from __future__ import annotations

import os
import shlex
from typing import List, Optional, Tuple

from .executor import protocol

#: The names a command may use for the job's interpreter.
NAMES = ("python", "python3")
#: The wrapper folder in a YARN container's working directory.
YARN_BIN_DIR = ".subm-bin"
#: Set ("1"), a YARN task's executor writes :func:`wrapper_script` of its own interpreter (the
#: one the launch script started by the job's path) into YARN_BIN_DIR when its first command
#: starts: the launch script's mkdir and chmod were processes of their own in every container,
#: while the gang assembles. (A flag, not the script: YARN writes variables into its launch
#: script unescaped, where a "$@" would be expanded.)
WRAPPER_ENV = protocol.PYTHON_WRAPPER


def wrapper_script(python: str) -> str:
    """A shell script that runs ``python`` (by the path given, so its venv holds) with its arguments."""
    return f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n'


def write_wrappers(python: str, folder: str) -> None:
    """Write ``python`` and ``python3`` wrappers for ``python`` into ``folder``."""
    os.makedirs(folder, exist_ok=True)
    for name in NAMES:
        path = os.path.join(folder, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(wrapper_script(python))
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)


def search_path(python: str, wrapper_dir: str, rest: str = "") -> str:
    """``PATH`` for a task: the wrappers, then the interpreter's own folder, then ``rest``."""
    parts: List[str] = [wrapper_dir, os.path.dirname(python)]
    if rest:
        parts.append(rest)
    return os.pathsep.join(parts)


#: The launch scripts' variable for the interpreter's path: assigned once, shell-quoted
#: (:func:`assign`), then used only as ``"$SUBM_PY"`` (:data:`PY`), never pasted into other
#: shell text, where a ``$(...)`` in environment.python would run.
PY_VAR = "SUBM_PY"
PY = f'"${PY_VAR}"'


def assign(python: str) -> str:
    """The shell line that sets :data:`PY_VAR` to ``python``, as data."""
    return f"{PY_VAR}={shlex.quote(python)}"


def shell_path(python: str, folder: str = YARN_BIN_DIR) -> str:
    """The shell line that puts ``folder`` (relative to the working directory), then the
    interpreter's own folder, first on ``PATH``."""
    # The interpreter's folder is shell-quoted: environment.python is the user's, and this
    # line runs in YARN's container (a "$(...)" in it would run there).
    own = os.path.dirname(python)
    return f'export PATH="$PWD/{folder}":{shlex.quote(own) + ":" if own else ""}"$PATH"'


#: The word of a launch line for an image without the executor's interpreter (refusals.py reads it).
NO_PYTHON3 = "has no python3"


def image_launch_lines(executor: str, image: str, python: str = "", folder: str = YARN_BIN_DIR,
                       logs: Optional[Tuple[str, str]] = None) -> str:
    """Shell lines that start the executor in a Docker image, as outside one: with ``python``
    (environment.python, which must then exist in the image) or the image's ``python3``; the
    executor writes ``python``/``python3`` wrappers of itself into ``folder`` (WRAPPER_ENV),
    first on PATH, so a task's ``python`` resolves in images that have only ``python3``
    (Debian's, Ubuntu's). What the image lacks is said in one line on stderr, exit 127.
    ``image``: the image's name as the shell should print it inside double quotes: a variable
    (``$YARN_CONTAINER_RUNTIME_DOCKER_IMAGE``) or a name the job file's rules allow (``IMAGE``:
    no shell syntax).
    ``logs``: the task's stdout and stderr files (mounted at the same paths), which the executor
    then writes itself, as on YARN: a pipe to ``docker run`` is no file it can read back for a
    sweep's metric lines, a hang's quiet time or its diagnostics' last lines."""
    if python:
        find = (f"{assign(python)}\n"
                f'[ -x {PY} ] || {{ echo "[subm] environment.python ${PY_VAR} does not exist in image {image}" >&2; '
                "exit 127; }")
    else:
        find = (f'{PY_VAR}=$(command -v python3) || {{ echo "[subm] image {image} {NO_PYTHON3} on its PATH, '
                "which subm's executor needs\" >&2; exit 127; }")
    redirect = f" >>{shlex.quote(logs[0])} 2>>{shlex.quote(logs[1])}" if logs else ""
    return f'{find}\nexport PATH="$PWD/{folder}:$PATH"\nexec {PY} -S {shlex.quote(executor)}{redirect}'


#: How the AM's launch line begins the one line it prints when its node cannot start it
#: (:func:`am_start_check`); the YARN backend quotes that line as the job's diagnostics.
NODE_LACKS = "[subm] node "
#: What the AM imports that its interpreter must have (skein's client; this package).
AM_MODULES = ("skein", "submarine_py")


def am_start_check() -> str:
    """Shell lines run before the ApplicationMaster starts with ``"$SUBM_PY"`` (:data:`PY_VAR`,
    set before them): where the node lacks that interpreter, or the packages the AM imports,
    they say so in one line on stderr, naming the node (``NM_HOST``, which YARN sets in every
    container), what is missing and what to set, and exit 127. Without them, the job ends with
    skein's "Application driver failed with exit code 127, see logs". (find_spec, not an
    import: milliseconds.) The path is the variable's value, never shell text."""
    where = f'{NODE_LACKS}$NM_HOST'
    fix = ("the nodes lack the Python environment this job was submitted from; set environment.python "
           "to an interpreter with submarine-py[yarn] installed on every node (docs/yarn.md)")
    probe = shlex.quote("import sys, importlib.util as u; "
                        f"sys.exit(any(u.find_spec(m) is None for m in {AM_MODULES!r}))")
    return (f'if ! command -v {PY} >/dev/null 2>&1; then echo "{where}: no ${PY_VAR} there, the interpreter '
            f'the ApplicationMaster runs with: {fix}" >&2; exit 127; fi\n'
            f'{PY} -c {probe} 2>/dev/null || {{ echo "{where}: ${PY_VAR} lacks skein or submarine_py, which '
            f'the ApplicationMaster imports: {fix}" >&2; exit 127; }}')
