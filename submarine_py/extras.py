"""What the environment a job runs with must have installed for the features its file uses.

A feature of the job file may need a package where the job runs: a ``sweep`` section needs
Optuna where its ApplicationMaster runs (it asks Optuna for each trial's parameters), a
``tensorboard`` section needs TensorBoard where its TensorBoard task runs. When that environment
is the one ``subm`` runs in (the local backend always; YARN unless ``environment.python`` names
another interpreter for the nodes), a missing package is known before anything is submitted:
the job is refused (exit 2) naming the field and the extra to install, rather than accepted
and failed in its AM (on YARN, after a second application attempt that fails the same way).

Backends say where the AM and the tasks run (:func:`missing`'s flags); this module says what
each feature needs.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from .jobfile.model import TENSORBOARD_ROLE, JobSpec

Problem = Tuple[str, str]


@dataclass(frozen=True)
class Extra:
    """A package a feature needs, and where."""

    #: The job file's field that asks for the feature (named in the refusal).
    field: str
    #: The package's name in words.
    name: str
    #: The module that must import.
    module: str
    #: The project's extra that installs it (``pip install 'submarine-py[<extra>]'``).
    extra: str
    #: "am": where the ApplicationMaster runs; "tasks": where the feature's task runs.
    where: str


SWEEP = Extra("sweep", "Optuna", "optuna", "sweep", "am")
TENSORBOARD = Extra("tensorboard", "TensorBoard", "tensorboard", "tensorboard", "tasks")


def needed(job: JobSpec) -> List[Extra]:
    """The extras the job's features need (a TensorBoard task with a command of the job file's
    own, or in a Docker image, brings its own)."""
    out = [SWEEP] if job.sweep is not None else []
    role = job.roles.get(TENSORBOARD_ROLE) if job.tensorboard is not None else None
    if role is not None and not role.docker and not role.command:
        out.append(TENSORBOARD)
    return out


def missing(job: JobSpec, *, am_here: bool, tasks_here: bool,
            installed: Optional[Callable[[str], bool]] = None) -> List[Problem]:
    """Problems for each extra the job needs in an environment that is this interpreter's
    (``am_here``: its AM runs with it; ``tasks_here``: its tasks do) and that it lacks.
    ``installed``: whether a module imports here (tests give their own)."""
    has = installed or importable
    where = {"am": am_here, "tasks": tasks_here}
    problems = []
    for extra in needed(job):
        if not where[extra.where] or has(extra.module):
            continue
        runs = "ApplicationMaster" if extra.where == "am" else "tasks"
        problems.append((extra.field, f"{extra.name} is not installed for {sys.executable}, the interpreter "
                                      f"the job's {runs} run with: pip install {extra.module} (or "
                                      f"'submarine-py[{extra.extra}]') into that environment"))
    return problems


def importable(module: str) -> bool:
    """Whether ``module`` imports in this interpreter (found, not imported: milliseconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
