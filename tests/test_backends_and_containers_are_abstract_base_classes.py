"""``Backend`` and the AM's ``Containers`` are abstract base classes (issue 31): a backend, or a
backend's containers, that misses a method every backend must implement cannot be made at all
(``TypeError`` naming the method), instead of failing in the middle of a job. Methods whose
no-op is a right default keep it."""
from __future__ import annotations

import inspect

import pytest

from submarine_py.am.containers import Containers
from submarine_py.backends.base import Backend
from submarine_py.backends.local.backend import LocalBackend
from submarine_py.backends.local.containers import LocalContainers

pytestmark = pytest.mark.unit


def test_what_every_backend_and_its_containers_must_implement_is_abstract():
    assert Backend.__abstractmethods__ == {"request", "submit", "status", "kill", "list", "logs", "cluster"}
    assert Containers.__abstractmethods__ == {"launch", "poll", "kill"}


def test_a_backend_missing_a_method_cannot_be_made():
    class NoCluster(Backend):
        name = "partial"

        def request(self, plan): ...
        def submit(self, request, *, detach=False): ...
        def status(self, app_id): ...
        def kill(self, app_id, why=""): ...
        def list(self, include_finished=False): ...
        def logs(self, app_id, out, role=None, index=None, follow=False, attempt=None, tail=None): ...

    with pytest.raises(TypeError, match="cluster"):
        NoCluster()

    class Whole(NoCluster):
        def cluster(self):
            return {}

    assert Whole().check_cluster(None) is None and Whole().shared_dir(None, "a") is None  # defaults kept


def test_containers_missing_a_method_cannot_be_made():
    class NoPoll(Containers):
        def launch(self, task, env):
            return "e1"

        def kill(self, executor):
            pass

    with pytest.raises(TypeError, match="poll"):
        NoPoll()

    class Whole(NoPoll):
        def poll(self):
            return []

    containers = Whole()
    assert containers.admit([], None).fits and containers.held() is None  # defaults kept


def test_every_backend_and_its_containers_and_the_tests_stand_ins_are_whole():
    from fake_containers import IdleContainers
    from submarine_py.backends.yarn.client.backend import YarnBackend  # (skein is imported only when used)
    from submarine_py.backends.yarn.am.containers import YarnContainers

    classes = [LocalBackend, LocalContainers, YarnBackend, YarnContainers, IdleContainers]
    assert [c.__name__ for c in classes if inspect.isabstract(c)] == []
