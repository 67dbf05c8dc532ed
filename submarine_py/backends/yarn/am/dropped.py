"""Executors whose connection to the AM dropped: their containers asked of their NodeManagers at
once, not when YARN says.

YARN tells an application that a container ended only in its AM's next heartbeat to the
ResourceManager, and skein's AM beats every 5 s while it asks for nothing (min(5 s, the RM's AM
expiry / 2)). A replacement asked for right after that news waits for the following beat:
a lost container came back 7.4 s after its process died, against 3.7 s for skein's own
restart (``docs/benchmarks.md``). An executor's process that dies closes its long poll's
connection at once (``am/server.py``), and its NodeManager knows the container ended a few
milliseconds later: asked then, the replacement is asked for within a tenth of a second.

Only what the program did is taken from the NodeManager (an exit of its own, not 0); an end the
cluster decided (preempted, killed by the RM or the AM) waits for YARN's own word, which says
why (``exits.cluster_cause``).
"""
from __future__ import annotations

import logging
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from ....am.containers import Ended
from .exits import KILLED_BY_AM, NM_EXITED, container_end, nm_failure
from .held import ContainerState
from ..hadoop.nodemanager import nm_container

log = logging.getLogger("subm.am.yarn")

#: How long a dropped executor's NodeManager is asked whether its container ended (a connection
#: can also drop while the process lives: the AM's own idle timeout, a network fault).
ASK_FOR_SECONDS = 2.0
#: How often, meanwhile (the NodeManager notices its container's exit within milliseconds).
ASK_EVERY_SECONDS = 0.1


class Dropped:
    """The executors whose connection dropped, and what their NodeManagers say of them.

    ``where(executor)`` gives (skein's container record or None, YARN container id, NodeManager
    web address) of an executor; ``done(executor)`` whether its end is already known."""

    def __init__(self, where: Callable[[str], Tuple[Any, Optional[str], Optional[str]]],
                 done: Callable[[str], bool], clock: Callable[[], float]):
        self.where = where
        self.done = done
        self.clock = clock
        #: executor -> (first dropped, next time to ask)
        self.asking: Dict[str, Tuple[float, float]] = {}

    def add(self, executor: str) -> None:
        now = self.clock()
        self.asking.setdefault(executor, (now, now))

    def ended(self) -> List[Ended]:
        """The dropped executors whose container its NodeManager says ended (each said once)."""
        now, out = self.clock(), []
        for executor, (since, next_ask) in list(self.asking.items()):
            if self.done(executor) or now - since > ASK_FOR_SECONDS:
                del self.asking[executor]
                continue
            if now < next_ask:
                continue
            self.asking[executor] = (since, now + ASK_EVERY_SECONDS)
            settled, ended = self.ask(executor)
            if settled:
                del self.asking[executor]
            if ended is not None:
                out.append(ended)
        return out

    def ask(self, executor: str) -> Tuple[bool, Optional[Ended]]:
        """Whether its NodeManager has the last word on the container (it ended, or the NodeManager
        does not answer: then the AM's silence rules decide), and its end if it ended of the
        program's doing."""
        c, container, node_http = self.where(executor)
        if not container or not node_http:
            return True, None
        info = nm_container(node_http, container, timeout=1.0)
        if not info:
            return True, None
        if info.get("state") not in NM_EXITED:
            return False, None
        code = nm_failure(info)
        if code is None or code == KILLED_BY_AM:
            return True, None
        record = c if c is not None and getattr(c, "yarn_container_id", None) == container else _record(
            executor, container, node_http, c)
        ended = container_end(record, ContainerState.FAILED.value, info)
        if ended.cause is not None:  # the cluster's doing: YARN's report says why
            return True, None
        log.info("executor %s dropped its connection and its NodeManager says container %s ended "
                 "(exit status %s): not waiting for YARN's report", executor, container, code)
        return True, ended


def _record(executor: str, container: str, node_http: str, c: Any) -> Any:
    """What ``container_end`` reads of skein's container record, for one skein has not placed
    yet as far as the AM last asked (its registration said where it runs)."""
    return types.SimpleNamespace(
        id=executor, yarn_container_id=container, yarn_node_http_address=node_http, exit_message="",
        service_name=getattr(c, "service_name", None) or executor.rsplit("_", 1)[0],
        start_time=getattr(c, "start_time", None))
