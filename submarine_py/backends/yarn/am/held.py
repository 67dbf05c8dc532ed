"""What a YARN job holds, as YARN lists it (issue 32): the AM gives back every task container no
task of its uses, checked against skein's own list of the application's containers, not only its
records; and the ResourceManager's count of the job's containers, which ``subm status`` weighs
against the AM's word ("holding no task container").
"""
from __future__ import annotations

import logging
from typing import Any, Collection, List, Mapping, Optional

from ....am.containers import Held
from ....states import Named

log = logging.getLogger("subm.am.yarn")


class ContainerState(Named):
    """skein's words (``skein.model.ContainerState``), not a task's: a container's state in its records."""

    WAITING = "WAITING"
    REQUESTED = "REQUESTED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


#: skein's states of a container that has ended (as skein's API takes and gives them: strings).
CONTAINER_ENDED = frozenset(s.value for s in (ContainerState.SUCCEEDED, ContainerState.FAILED, ContainerState.KILLED))
#: skein's states of a container the application holds or has asked for.
HELD_STATES = (ContainerState.WAITING, ContainerState.REQUESTED, ContainerState.RUNNING)
#: A container given back this recently and still listed is the cluster catching up; listed
#: longer, it is given back again.
GIVE_BACK_SECONDS = 10.0


def held_containers(app: Any, services: Collection[str], aside: Collection[str],
                    killed_at: Mapping[str, float], now: float) -> Optional[List[Held]]:
    """The task containers skein lists for the application (``services``: the job's roles) in
    ``HELD_STATES``, less those kept ``aside`` for a launch to come; None where skein does not
    answer."""
    try:
        found = app.get_containers(services=list(services), states=[s.value for s in HELD_STATES])
    except Exception as exc:
        log.debug("get_containers: %s", exc)
        return None
    return [Held(c.id, str(c.state), given_back=now - killed_at.get(c.id, float("-inf")) < GIVE_BACK_SECONDS)
            for c in found if c.id not in aside]
