"""What travels, decided in one place: from the job file and the submitting side's word alone
(no cluster, no file read), whether the AM and the tasks outside images run the interpreter
that submits (and so need what is installed here: :mod:`submarine_py.extras`), and whether that
environment travels to the nodes (``travel/``) or they have it at its path already.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .....jobfile.model import JobSpec

#: Opting out: "no" when the nodes have the submitting environment at its path.
SHIP_ENV = "SUBM_SHIP_ENVIRONMENT"


def ship_environment() -> bool:
    """Whether the submitting environment travels (SUBM_SHIP_ENVIRONMENT is not "no")."""
    return os.environ.get(SHIP_ENV, "").strip().lower() not in ("no", "0", "false")


@dataclass(frozen=True)
class Choice:
    """Who runs the submitting interpreter, and whether it travels."""

    #: The AM does (always, unless ``environment.python`` names another for it and the tasks).
    am_here: bool
    #: The tasks outside images do too (not with ``environment.archive``: they bring their own).
    tasks_here: bool
    #: It travels: the AM runs it and SUBM_SHIP_ENVIRONMENT does not say the nodes have it.
    ships: bool


def choose(spec: JobSpec) -> Choice:
    """``environment.python`` names another interpreter for the AM and the tasks, unless every
    role is in an image (then it is the images', and the AM, outside them, runs this one);
    ``environment.archive`` brings the tasks their own."""
    env = spec.environment
    in_images = all(role.docker for role in spec.roles.values())
    other = bool(env.python) and not in_images and not env.archive
    am_here = not other
    return Choice(am_here=am_here, tasks_here=am_here and not env.archive, ships=am_here and ship_environment())
