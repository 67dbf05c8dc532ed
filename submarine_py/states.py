"""The states of a job and of its tasks, and the restart policies: defined once.

Each is a ``str`` enum, so a state compares equal to its name and is written to
JSON (``--output json``, ``report.json``) as the same plain string as before.
"""
from __future__ import annotations

from enum import Enum


class Named(str, Enum):
    """A ``str`` enum whose ``str()`` and f-string form is the bare value ("RUNNING", "gang").

    Other systems' words (YARN's, skein's) are spelled with it too, each set once in the module
    that talks to that system: the same spelling there means another thing.
    """

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class JobState(Named):
    """A job as subm reports it (YARN's application states, mapped in the YARN backend)."""

    ACCEPTED = "ACCEPTED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    def is_terminal(self) -> bool:
        """True once the job has ended (succeeded, failed or was killed)."""
        return self in _TERMINAL


#: The states a job ends in, in the order they are offered (``subm history --state``).
JOB_ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED)
_TERMINAL = frozenset(JOB_ENDED)


class TaskState(Named):
    """One task (role:index) as the ApplicationMaster sees it."""

    PENDING = "PENDING"        # waiting for an executor to register for it
    REGISTERED = "REGISTERED"  # its executor is up; the gang is not complete yet
    RUNNING = "RUNNING"        # its command runs
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"        # stopped because the job ended
    KILLED = "KILLED"          # stopped because the job was killed


class Phase(Named):
    """Where the ApplicationMaster is in a job's life."""

    QUEUED = "QUEUED"        # waiting for room for the whole gang, holding no task container
    STARTING = "STARTING"    # the gang is being started (or restarted)
    RUNNING = "RUNNING"      # the whole gang registered; commands run
    FINISHING = "FINISHING"  # the verdict is in; executors are being stopped
    DONE = "DONE"            # every executor is gone; the report is final


class GateState(Named):
    """A gang's way through admission (``am/allocation.py``)."""

    QUEUED = "QUEUED"  # holding no task container; asks when the whole gang fits
    ASKED = "ASKED"    # containers asked for; all must be granted within timeouts.hold_seconds
    HELD = "HELD"      # every container granted


class Placement(Named):
    """Where a gang's tasks go (``placement`` in the job file)."""

    PACK = "pack"      # on as few nodes as the free GPUs allow (collectives across machines cost)
    SPREAD = "spread"  # one task per node where possible


class RestartPolicy(Named):
    """What a failed task does to the job (``restart.policy`` in the job file)."""

    GANG = "gang"    # restart every task, as a new attempt of the gang
    TASK = "task"    # restart the failed task alone
    NEVER = "never"  # the first failure fails the job


class Cause(Named):
    """Why an attempt of a task ended without succeeding, and so which budget its restart spends.

    The program's (``failed``, ``hung``) spend ``restart.max_restarts``; the cluster's
    (``preempted``, ``node_lost``) spend ``restart.max_cluster_restarts`` instead: a replacement
    container runs the same program, which did nothing wrong. ``resized`` (an elastic gang
    restarted with a bigger or smaller world: ``docs/elastic.md``) spends neither: nothing failed
    that a budget could bound.
    """

    FAILED = "failed"        # its command exited non-zero (or was killed for its memory), or never started
    HUNG = "hung"            # it printed nothing for timeouts.hang_seconds (and used no GPU)
    PREEMPTED = "preempted"  # the cluster took its container back for other work
    NODE_LOST = "node_lost"  # its machine died or stopped answering (or its disks failed)
    RESIZED = "resized"      # an elastic gang grew (containers granted) or shrank (a node lost): a new world

    @property
    def is_cluster(self) -> bool:
        """The cluster's doing, not the program's."""
        return self in (Cause.PREEMPTED, Cause.NODE_LOST)

    @property
    def spends(self) -> bool:
        """Whether a restart for it spends a budget (``max_restarts`` or ``max_cluster_restarts``)."""
        return self != Cause.RESIZED

    @property
    def words(self) -> str:
        """As people read it: "node lost", "preempted"."""
        return self.value.replace("_", " ")


class TrialState(Named):
    """A sweep's trial (docs/sweeps.md)."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"  # it ended with code 0 and printed its metric
    PRUNED = "PRUNED"        # stopped early: its intermediate values were worse than the rule allows
    FAILED = "FAILED"        # it failed (exit code, no metric printed, its container lost)
    STOPPED = "STOPPED"      # stopped because the sweep ended (killed, or failed by other trials)
