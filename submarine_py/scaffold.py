"""``subm init``: a commented job file that runs as written, and the program it runs.

The pytorch and tensorflow job files run ``python train.py``; a small working
``train.py`` is written beside them unless one is there already (kept, unless
``--force``). The custom one runs ``echo`` and needs no program.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from typing import List, Optional

from .errors import SpecError, SubmarineError
# init's job names take the role-name form (a letter, then letters, digits or '-', at most 63):
# stricter than what a job file's `name` may be, so every name it writes is valid there.
from .jobfile.fields import ROLE_NAME
from .templating import render

FRAMEWORKS = ("pytorch", "tensorflow", "custom")
#: The program each framework's job file runs, shipped in templates/init/.
PROGRAMS = {"pytorch": "pytorch-train.py", "tensorflow": "tensorflow-train.py"}
PROGRAM_NAME = "train.py"
FALLBACK_NAME = "my-job"


@dataclass(frozen=True)
class Written:
    """What ``init`` did: the files it wrote and the existing ones it left alone."""

    written: List[str]
    kept: List[str]


def name_from_directory(directory: str) -> str:
    """A valid job name made from a folder's name: ``My Project`` -> ``my-project``."""
    slug = re.sub(r"[^a-z0-9]+", "-", os.path.basename(os.path.abspath(directory)).lower()).strip("-")
    if slug and not slug[0].isalpha():
        slug = f"job-{slug}"
    slug = slug[:63].rstrip("-")
    return slug if ROLE_NAME.match(slug) else FALLBACK_NAME


def check_name(name: str) -> None:
    if not ROLE_NAME.match(name):
        raise SpecError([("--name", f"{name!r} is not a valid job name: a letter, then letters, digits "
                                    f"or '-', at most 63 characters (e.g. {name_from_directory(name)!r})")])


def write_job_scaffold(framework: str, path: str, name: Optional[str] = None, force: bool = False) -> Written:
    """Write the job file at ``path`` (and its program beside it); refuse bad input with exit 2
    before writing anything."""
    if framework not in FRAMEWORKS:
        raise SpecError([("--framework", f"expected one of {', '.join(FRAMEWORKS)}, got {framework!r}")])
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise SpecError([("--path", f"{directory} {what}: create it first, or pick another --path")])
    if os.path.isdir(path):
        raise SpecError([("--path", f"{path} is a directory; give the job file's path, e.g. {path}/job.yaml")])
    if os.path.exists(path) and not force:
        raise SpecError([("--path", f"{path} exists; pass --force to overwrite it")])
    if name is None:
        name = name_from_directory(directory)
    check_name(name)

    files = [(path, render(f"init/{framework}.yaml.j2", name=name))]
    kept: List[str] = []
    if framework in PROGRAMS:
        program_path = os.path.join(os.path.dirname(path), PROGRAM_NAME)
        if os.path.exists(program_path) and not force:
            kept.append(program_path)
        else:
            source = resources.files("submarine_py").joinpath(f"templates/init/{PROGRAMS[framework]}")
            files.append((program_path, source.read_text(encoding="utf-8")))
    for target, text in files:
        try:
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise SubmarineError(f"cannot write {target}: {exc.strerror}") from None
    return Written([target for target, _ in files], kept)
