"""The one place where a failure becomes a restart, or the end of the job.

The job file's ``restart`` section (a :class:`~.states.RestartPolicy` and ``max_restarts``)
and the budget already spent decide what a failure does: restart the whole gang, restart the
failed task alone, or give up. Everything that depends on that decision asks
:class:`Restarts`: the ApplicationMaster when a task fails and when it takes a job over
from a lost AM, the YARN backend (whether the cluster replaces failed containers, how many
application attempts YARN may start), and the diagnostics that say why no restart is left.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from .jobfile.model import RestartSpec
from .states import RestartPolicy

#: YARN attempts of an application whose policy allows restarts: one lost AM (its process, its
#: machine) is recovered. Not more: skein ends an application for good only from its last
#: attempt, so a job that fails in an earlier one costs one more (short) AM attempt that repeats
#: the verdict, and more attempts would repeat it more often.
AM_ATTEMPTS_WITH_RESTARTS = 2


class Remedy(str, Enum):
    """What a failure does to the job."""

    RESTART_GANG = "restart the gang"
    RESTART_TASK = "restart the task"
    GIVE_UP = "give up"


@dataclass(frozen=True)
class Decision:
    remedy: Remedy
    #: Why no restart is left, in the policy's words (when the remedy is GIVE_UP), else "".
    why: str = ""

    @property
    def gives_up(self) -> bool:
        return self.remedy == Remedy.GIVE_UP


@dataclass(frozen=True)
class Restarts:
    """A job's restart policy, answering for every failure (see the module's doc)."""

    spec: RestartSpec

    @property
    def policy(self) -> RestartPolicy:
        return self.spec.policy

    @property
    def max_restarts(self) -> int:
        return self.spec.max_restarts

    @property
    def attempts_at_most(self) -> int:
        """Attempts a gang (under ``gang``) or a task (under ``task``) may have in all."""
        return self.spec.max_restarts + 1

    def after_task_failure(self, gang_restarts: int, task_restarts: int) -> Decision:
        """A task failed (its command, its container, its machine); ``gang_restarts`` and
        ``task_restarts`` are the restarts spent so far by the gang and by that task."""
        if self.policy == RestartPolicy.GANG and gang_restarts < self.max_restarts:
            return Decision(Remedy.RESTART_GANG)
        if self.policy == RestartPolicy.TASK and task_restarts < self.max_restarts:
            return Decision(Remedy.RESTART_TASK)
        return Decision(Remedy.GIVE_UP, self.spent())

    def after_am_loss(self, gang_restarts: int, task_restarts: Iterable[int]) -> Decision:
        """The AM was lost: the cluster started a new one in new containers, so every task
        starts again. Under ``gang`` that is one restart of the gang; under ``task`` one
        restart of each task, so each must have one left. Counts are those spent before it."""
        if self.policy == RestartPolicy.GANG and gang_restarts < self.max_restarts:
            return Decision(Remedy.RESTART_GANG)
        if self.policy == RestartPolicy.TASK and all(r < self.max_restarts for r in task_restarts):
            return Decision(Remedy.RESTART_GANG)
        return Decision(Remedy.GIVE_UP, self.spent())

    def spent(self) -> str:
        """Why no restart is left, in the policy's words."""
        if self.policy == RestartPolicy.NEVER:
            return f"restart policy '{self.policy}'"
        limit = self.max_restarts
        return f"after {limit} restart{'s' if limit != 1 else ''}" if limit else "max_restarts is 0"

    @property
    def cluster_replaces_containers(self) -> bool:
        """Whether the cluster may start a new container for one that failed (YARN through
        skein: quicker than asking for one afterwards); the AM still decides whether the job
        goes on. Never under ``never``: the first failure ends the job."""
        return self.policy != RestartPolicy.NEVER

    @property
    def am_attempts(self) -> int:
        """Application attempts the cluster may start (YARN caps them at
        ``yarn.resourcemanager.am.max-attempts``, 2 by default): a new AM counts the loss as a
        restart and goes on from the attempts the earlier one saved."""
        if self.policy == RestartPolicy.NEVER or self.max_restarts <= 0:
            return 1
        return AM_ATTEMPTS_WITH_RESTARTS
