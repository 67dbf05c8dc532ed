"""The interface between the ApplicationMaster and whatever runs containers.

The AM's logic knows nothing of YARN or local processes: a backend gives it its
:class:`Containers` (``LocalContainers``, ``YarnContainers``), which start
executors and say when one has ended. :class:`Containers` is an abstract base class: a
backend's containers that miss :meth:`~Containers.launch`, :meth:`~Containers.poll` or
:meth:`~Containers.kill` cannot be made; every other method has a default that is right
where a backend has nothing to add.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..plan import TaskPlan
from ..states import Cause, GateState, JobState, Placement
from ..admission import Verdict


@dataclass(frozen=True)
class Ended:
    """An executor (its container) that is gone."""

    executor: str
    exit_code: Optional[int]
    diagnostics: str = ""
    #: The role the executor was started for (known even if it never registered).
    role: Optional[str] = None
    #: When its container was allocated or started (epoch seconds), if the driver knows: tells
    #: a container started before the task's current attempt from one started for it.
    started_at: Optional[float] = None
    #: False when the driver itself refused the container (say YARN placed it on a machine the
    #: AM found dead): only a replacement is needed, it is no failure of the task.
    counts: bool = True
    #: Not empty when the node refused to launch it (an untrusted image, a mount not allowed:
    #: ``refusals.refusal``): the verdict, in one line; no restart can help, the job fails.
    refusal: str = ""
    #: Set where the cluster says it ended the container itself (``PREEMPTED``: taken back for
    #: other work; ``NODE_LOST``: its machine or its disks failed): no failure of the program, a
    #: restart spends ``restart.max_cluster_restarts``. None: the exit code says what happened.
    cause: Optional[Cause] = None


@dataclass(frozen=True)
class Held:
    """A task container the cluster lists for the job now (asked for, or granted), as the
    cluster itself says: what :meth:`Containers.held` answers, whatever the AM remembers."""

    executor: str
    #: The cluster's word on it (YARN: skein's WAITING, REQUESTED, RUNNING).
    state: str = ""
    #: The AM gave it back moments ago (:meth:`Containers.kill`): the cluster has not caught up yet.
    given_back: bool = False


class Containers(ABC):
    """Starts executors for tasks and reports the ones that ended."""

    #: Name shown in logs and reports ("local", "yarn").
    name = "abstract"
    #: True when a container asked for that cannot be placed yet waits inside the cluster
    #: (YARN's pending requests): replacements under a running gang are asked for at once.
    #: False (local): they go through :meth:`admit` like a gang, alone.
    queues_requests = False

    def admit(self, tasks: Sequence[TaskPlan], placement: Placement) -> Verdict:
        """Whether every one of ``tasks`` (a gang to start) can have its container now, all at
        once; when not, what the job waits for (:mod:`.admission`). A yes may hold what it
        admitted for the job (a machine's GPUs) until :meth:`kill` or :meth:`close`."""
        return Verdict(True)

    def admit_extra(self, task: TaskPlan, placement: Placement, asking: Sequence[TaskPlan] = ()) -> Verdict:
        """Whether one more container, for ``task`` of an elastic role beyond its ``min``, fits
        now: growth takes room that is free, never waits in line for it or holds it (a yes may
        hold what it admitted for ``task``, as :meth:`admit`). ``asking``: containers of this
        job asked for in the same breath, which the cluster does not count yet."""
        return self.admit([*asking, task], placement)

    def granted(self, executors: Sequence[str]) -> bool:
        """Whether the cluster has allocated the containers of these executors (all of them)."""
        return True

    def announce(self, state: GateState) -> None:
        """Tell other jobs' admission where this job's gang stands: queued (waiting for room),
        asked (its containers arriving) or held (YARN: the application's progress, which every
        AM reads from the RM). Called from the main loop only."""

    @abstractmethod
    def launch(self, task: TaskPlan, env: Dict[str, str]) -> str:
        """Start an executor for ``task`` with ``env`` added; return its executor id."""

    @abstractmethod
    def poll(self) -> List[Ended]:
        """Executors that ended since the last call."""

    @abstractmethod
    def kill(self, executor: str) -> None:
        """Stop an executor (and its task) now."""

    def suspect(self, executor: str) -> None:
        """An executor's connection to the AM dropped under a poll: its process may have died.
        Look at its container now rather than at the next report of the cluster (YARN's comes
        with the AM's next heartbeat to the RM, seconds later); :meth:`poll` says if it ended.
        Nothing to do where the backend sees its processes end at once (local). Called from the
        main loop only."""

    def lost(self, executor: str) -> None:
        """An executor went silent (its node may be dead): release its container now, and keep
        replacements off the machine it ran on while that machine does not answer."""
        self.kill(executor)

    def registered(self, executor: str, info: Dict[str, Optional[str]]) -> None:
        """An executor registered, saying where it runs (``container``: the cluster's container
        id, ``node_http``: its node manager's web address), which spares asking the cluster."""

    def held(self) -> Optional[List[Held]]:
        """Every task container the cluster holds or is asked for for this job now (its AM's
        aside), as the cluster lists it, not as the AM remembers it; None where the backend
        cannot say (then the AM's own records stand). Containers the backend itself keeps for
        a launch to come (YARN: asked for with the application, not taken yet) are left out.
        The AM gives back every one no task of its uses (``Allocation.reconcile``). Called from
        the main loop only."""
        return None

    def given_back(self, executor: str) -> bool:
        """Whether the AM gave this executor's container back (:meth:`kill`) before it ever
        registered: its executor, should it still come up, has nothing to run (YARN may start a
        container whose stop crossed its launch)."""
        return False

    def localizing(self, executors: Sequence[str]) -> List[str]:
        """Of these executors' containers, those the cluster is still preparing on their node
        (YARN unpacking the job's environment there for the first time), each as a short word:
        the gang's clock waits for them. Nothing to prepare by default."""
        return []

    def describe(self, executor: str) -> str:
        """A short word on an executor that has not registered (e.g. 'pending in queue default')."""
        return ""

    def describe_role(self, role: str) -> str:
        """A short word on a role whose task has no executor yet (e.g. containers pending)."""
        return "no container yet"

    def log_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        """Where the task's stdout/stderr can be read (a path or a URL)."""
        return ""

    def stderr_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        """Where the task's stderr alone can be read (a path or a URL); "" if unknown."""
        return ""

    def stderr_tail(self, task: TaskPlan, executor: Optional[str]) -> str:
        """The end of the task's stderr since its last attempt began, when the executor could
        not send it (it sends it where its stderr is a file it can read)."""
        return ""

    def details(self, executor: Optional[str]) -> Dict[str, str]:
        """Extra facts about an executor for its task's report: fields of :class:`TaskReport`
        (YARN: ``container_id``, ``node_http``). Must be cheap."""
        return {}

    def set_status_url(self, url: str) -> None:
        """Make the AM's status page reachable (YARN: the tracking URL)."""

    def answer(self, path: str, query: Mapping[str, str]) -> Optional[Dict[str, Any]]:
        """What this backend serves other jobs' AMs on the AM's endpoint, open and read-only as
        the status page (YARN: the line's verdicts, ``backends/yarn/am/steward.py``); None: no
        such path here."""
        return None

    def finish(self, state: JobState, diagnostics: str) -> None:
        """Record the job's final state with the cluster manager."""

    def close(self) -> None:
        """Make sure no executor of this job is left running."""
