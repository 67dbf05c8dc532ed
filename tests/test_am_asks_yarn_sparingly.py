"""What the YARN AM asks skein, and what it learns from its executors instead (pure logic).

``YarnContainers`` runs in the AM against skein's ApplicationClient; here a stand-in client
records the calls. The yarn tests (``test_node_and_container_failures_on_yarn.py``) show the same on a real cluster.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import List, Optional

import pytest

from submarine_py.backends.yarn.am import containers as yarn_containers, exits as yarn_exits
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit


def container(cid: str, state: str, node: str = "n1:8042", yarn_id: Optional[str] = None):
    return SimpleNamespace(id=cid, state=state, service_name=cid.split("_")[0], yarn_node_http_address=node,
                           yarn_container_id=yarn_id or f"container_1_0001_01_{cid.split('_')[1]}",
                           exit_message="", start_time=None)


class FakeApp:
    """skein's ApplicationClient as far as the AM uses it: containers, filtered by state."""

    def __init__(self, containers):
        self.all = {c.id: c for c in containers}
        self.asked: List[List[str]] = []
        self.killed: List[str] = []

    def get_containers(self, states):
        wanted = [str(s) for s in states]
        self.asked.append(sorted(wanted))
        return [c for c in self.all.values() if c.state in wanted]

    def kill_container(self, cid):
        self.killed.append(cid)
        self.all[cid].state = "KILLED"


@pytest.fixture
def yarn(monkeypatch):
    monkeypatch.setattr(yarn_exits, "nm_container", lambda *a, **k: {"exitCode": 1, "diagnostics": ""})
    monkeypatch.setattr(yarn_exits, "node_log", lambda *a, **k: b"")
    monkeypatch.setattr(yarn_containers, "nm_answers", lambda node_http, timeout=1.0: node_http != "dead:8042")
    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {"instances": 2, "command": "x"}}}))
    app = FakeApp([container("worker_0", "RUNNING"), container("worker_1", "RUNNING", node="dead:8042")])
    return YarnContainers(app, plan, user="alice"), app


def poll(yc: YarnContainers):
    yc.next_poll = 0.0
    return yc.poll()


def test_the_poll_asks_for_ended_containers_only_while_no_machine_is_avoided(yarn):
    yc, app = yarn
    assert poll(yc) == []
    assert app.asked == [["FAILED", "KILLED", "SUCCEEDED"]]
    app.all["worker_0"].state = "FAILED"
    [ended] = poll(yc)
    assert ended.executor == "worker_0" and ended.exit_code == 1
    assert poll(yc) == []  # reported once


def test_where_an_executor_runs_comes_from_its_registration_without_asking_skein(yarn):
    yc, app = yarn
    yc.registered("worker_0", {"container": "container_9_0001_01_000002", "node_http": "n1:8042"})
    assert yc.log_location(None, "worker_0") == "http://n1:8042/node/containerlogs/container_9_0001_01_000002/alice"
    assert yc.details("worker_0") == {"container_id": "container_9_0001_01_000002", "node_http": "n1:8042"}
    assert app.asked == []


def test_an_executor_lost_with_its_machine_keeps_replacements_off_it_and_is_not_released_twice(yarn):
    yc, app = yarn
    for cid in ("worker_0", "worker_1"):
        c = app.all[cid]
        yc.registered(cid, {"container": c.yarn_container_id, "node_http": c.yarn_node_http_address})
    poll(yc)
    yc.lost("worker_1")  # its machine does not answer
    assert "dead" in yc.avoided and app.killed == ["worker_1"]
    app.all["worker_1"].state = "RUNNING"  # skein may still list it: its NodeManager never answered
    app.all["worker_2"] = container("worker_2", "RUNNING", node="dead:8042")  # YARN places a replacement there
    app.all["worker_3"] = container("worker_3", "RUNNING", node="n1:8042")
    ended = poll(yc)
    assert app.asked[-1] == sorted(["FAILED", "KILLED", "RUNNING", "SUCCEEDED", "REQUESTED", "WAITING"])
    assert [(e.executor, e.counts) for e in ended] == [("worker_2", False)]
    assert app.killed == ["worker_1", "worker_2"]


def test_an_executor_lost_before_it_registered_with_this_am_is_found_through_skein(yarn):
    yc, app = yarn  # e.g. the AM was replaced, and the executor fell silent before calling the new one
    yc.lost("worker_1")
    assert "dead" in yc.avoided and app.killed == ["worker_1"]


def test_a_gang_timeout_describing_many_tasks_asks_skein_once(yarn):
    yc, app = yarn
    for executor in ("worker_0", "worker_1"):
        assert "RUNNING" in yc.describe(executor)
    assert "2 RUNNING" in yc.describe_role("worker")
    assert len(app.asked) == 1


class AddingApp(FakeApp):
    """The same, where the AM asks for containers (``add_container``): YARN places none at once."""

    def add_container(self, service, env):
        cid = f"{service}_{len(self.all)}"
        self.all[cid] = SimpleNamespace(id=cid, state="REQUESTED", service_name=service, yarn_node_http_address=None,
                                        yarn_container_id=None, exit_message="", start_time=None)
        return self.all[cid]


def test_asking_for_a_gang_asks_skein_for_nothing_but_its_containers():
    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {"instances": 15, "command": "x"}}}))
    app = AddingApp([])
    yc = YarnContainers(app, plan, user="alice")
    for task in plan.tasks:
        ex = yc.launch(task, {})
        assert yc.log_location(task, ex) == ""  # nowhere yet: the registration will say
    assert len(app.all) == 15 and app.asked == []
    yc.registered("worker_0", {"container": "container_9_0001_01_000002", "node_http": "n1:8042"})
    assert yc.log_location(plan.tasks[0], "worker_0").startswith("http://n1:8042/node/containerlogs/")


def test_a_container_yarn_still_localizes_is_asked_of_its_node_by_its_yarn_id(yarn, monkeypatch):
    """The gang's clock waits while YARN localizes a missing task's container (a first job on a
    node unpacks the environment that travels: minutes for gigabytes). The AM recorded the
    container when it asked for it, before YARN placed it: where it went and its YARN id come
    from skein then, and its NodeManager is asked by that id. (It was asked by the executor's
    name, from the record of the asking: the first DDP job of a 6.5 GB venv on isolated nodes
    failed its 120 s gang_seconds with both workers still being localized.)"""
    yc, app = yarn
    yc.containers["worker_0"] = SimpleNamespace(id="worker_0", state="WAITING", service_name="worker",
                                                yarn_node_http_address=None, yarn_container_id=None)
    asked = []
    monkeypatch.setattr(yarn_containers, "nm_container",
                        lambda node, cid, timeout=5.0: asked.append((node, cid)) or {"state": "LOCALIZING"})
    assert yc.localizing(["worker_0"]) == ["container worker_0 on n1 is being localized"]
    assert asked == [("n1:8042", "container_1_0001_01_0")]
    monkeypatch.setattr(yarn_containers, "nm_container", lambda node, cid, timeout=5.0: {"state": "RUNNING"})
    assert yc.localizing(["worker_0"]) == []
