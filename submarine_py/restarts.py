"""The one place where a failure becomes a restart, or the end of the job.

The job file's ``restart`` section (a :class:`~.states.RestartPolicy`, ``max_restarts`` and
``max_cluster_restarts``), what ended the attempt (its :class:`~.states.Cause`) and the budget
already spent decide what a failure does: restart the whole gang, restart the failed task
alone, or give up. Everything that depends on that decision asks :class:`Restarts`: the
ApplicationMaster when a task fails, hangs, is preempted or loses its node, and when it takes
a job over from a lost AM, the YARN backend (whether the cluster replaces failed containers,
how many application attempts YARN may start), and the diagnostics that say why no restart is
left.

Two budgets, because two parties fail. The program's failures (its command failed, it hung)
spend ``max_restarts``: a program that fails again and again should stop. The cluster's
(YARN preempted its container for another queue, its machine died) spend
``max_cluster_restarts``, larger by default: the program did nothing wrong, and on a shared
cluster preemption is routine. Under ``gang`` a cluster fault restarts the gang (a
collective job cannot go on without one of its members); under ``task`` the task alone;
under ``never`` the gang, since ``never`` is about the program's failures (a job that cannot
resume starts again from the beginning, which beats failing for what the cluster did).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from .jobfile.model import RestartSpec
from .states import Cause, RestartPolicy

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
class Spent:
    """Restarts so far, by the gang or by one task: in all (``restarts``), how many of them were
    for the cluster's faults (``cluster``) and how many resized an elastic gang (``resized``:
    they spend nothing); the rest spent ``max_restarts``."""

    restarts: int = 0
    cluster: int = 0
    resized: int = 0

    @property
    def program(self) -> int:
        return self.restarts - self.cluster - self.resized


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
    def max_cluster_restarts(self) -> int:
        return self.spec.max_cluster_restarts

    @property
    def attempts_at_most(self) -> int:
        """Attempts a gang (under ``gang``) or a task (under ``task``) may have for the program's
        failures alone; each restart for the cluster's faults adds one."""
        return self.spec.max_restarts + 1

    def after(self, cause: Cause, gang: Spent, task: Spent) -> Decision:
        """An attempt of a task ended for ``cause``; ``gang`` and ``task``: the restarts spent so far
        by the gang and by that task. The program's causes spend ``max_restarts``, the cluster's
        ``max_cluster_restarts`` (see the module's doc)."""
        if not cause.is_cluster:
            return self.after_task_failure(gang.program, task.program)
        if self.policy == RestartPolicy.TASK:
            if task.cluster < self.max_cluster_restarts:
                return Decision(Remedy.RESTART_TASK)
        elif gang.cluster < self.max_cluster_restarts:  # gang, and never (see the module's doc)
            return Decision(Remedy.RESTART_GANG)
        return Decision(Remedy.GIVE_UP, self.cluster_spent())

    def after_task_failure(self, gang_restarts: int, task_restarts: int) -> Decision:
        """A task failed by the program's fault (its command, its container never starting, a
        hang); ``gang_restarts`` and ``task_restarts`` are the restarts of ``max_restarts``
        spent so far by the gang and by that task."""
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

    def cluster_spent(self) -> str:
        """Why no restart is left for the cluster's faults."""
        limit = self.max_cluster_restarts
        if not limit:
            return "max_cluster_restarts is 0"
        return f"after {limit} restart{'s' if limit != 1 else ''} for the cluster's faults (max_cluster_restarts)"

    @property
    def am_attempts(self) -> int:
        """Application attempts the cluster may start (YARN caps them at
        ``yarn.resourcemanager.am.max-attempts``, 2 by default): a new AM counts the loss as a
        restart and goes on from the attempts the earlier one saved."""
        if self.policy == RestartPolicy.NEVER or self.max_restarts <= 0:
            return 1
        return AM_ATTEMPTS_WITH_RESTARTS
