"""A stand-in for skein's ApplicationClient, as the AM's YARN containers use it (unit tests only)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, List, Optional


def skein_container(service: str, instance: int, state: str = "REQUESTED", yarn: bool = False):
    """skein's Container; ``yarn``: with the YARN id and node address a granted one has."""
    return SimpleNamespace(id=f"{service}_{instance}", service_name=service, instance=instance, state=state,
                           yarn_container_id=f"container_1_0001_01_{instance + 2:06d}" if yarn else None,
                           yarn_node_http_address="n0:8042" if yarn else None, exit_message="", start_time=None)


class FakeApp:
    """skein's ApplicationClient as the AM uses it. ``on_read``/``on_add``: what happens while
    the AM waits for skein's answer (executors registering, say), once each."""

    def __init__(self, containers, yarn: bool = False):
        self.all = {c.id: c for c in containers}
        self.yarn = yarn
        self.added: List[str] = []
        self.killed: List[str] = []
        self.on_read: Optional[Callable[[], None]] = None
        self.on_add: Optional[Callable[[str], None]] = None

    def get_containers(self, services=None, states=None):
        if self.on_read is not None:
            hook, self.on_read = self.on_read, None
            hook()
        return [c for c in self.all.values() if (not states or c.state in states)
                and (not services or c.service_name in services)]

    def add_container(self, service, env):
        c = skein_container(service, len(self.all), yarn=self.yarn)
        self.all[c.id] = c
        self.added.append(c.id)
        if self.on_add is not None:
            self.on_add(c.id)
        return c

    def kill_container(self, cid):
        self.killed.append(cid)
        self.all[cid].state = "KILLED"

    def set_progress(self, value):
        pass
