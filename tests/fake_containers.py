"""A stand-in for the AM's :class:`Containers` (unit tests only), for tests of the AM's logic
that start no executor themselves: ``Containers`` is an abstract base class, and this one gives
its abstract methods the behaviour such tests need."""
from __future__ import annotations

from submarine_py.am.containers import Containers


class IdleContainers(Containers):
    """Starts nothing (a launch is the test's mistake), sees nothing end, kills nothing."""

    name = "fake"

    def launch(self, task, env):
        raise NotImplementedError(f"this stand-in starts no executor (asked for {task.id})")

    def poll(self):
        return []

    def kill(self, executor):
        pass
