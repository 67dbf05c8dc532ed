"""One AM, the line's steward, reads the room for every waiting gang and tells each its verdict
(issue 44): what the ResourceManager serves waiting gangs does not grow with their number. The
steward's verdicts are those each gang's own admission would give; a waiting AM asks the
oldest AM that is up, the next oldest where that one does not answer, and decides alone where
none does. Pure logic: a stand-in RM that counts what it is asked, AMs' endpoints served in
this process."""
from __future__ import annotations

import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List
from urllib.parse import parse_qs, urlparse
import json

import pytest

from submarine_py.admission import Gang, Need, Room, admit, decide_line
from submarine_py.am.allocation import Gate
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.backends.yarn.am.steward import Steward, Stewardship, candidates
from submarine_py.backends.yarn.capacity import Capacity
from submarine_py.executor.protocol import PATH_LINE as LINE_PATH
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.states import Placement

from fake_skein import FakeApp
from test_a_waiting_gang_costs_the_resource_manager_little import CountingRM

pytestmark = pytest.mark.unit

GPU = Need(1024, 1, 1)


def random_line(rng: random.Random):
    """A random cluster and line: nodes, two queues, gangs queued, asked, holding, starving."""
    nodes = {f"n{i}": Need(rng.choice([4096, 8192]), rng.choice([4, 8]), rng.randint(0, 4)) for i in range(rng.randint(1, 5))}
    gangs = []
    for i in range(rng.randint(1, 9)):
        needs = tuple(Need(rng.choice([1024, 2048]), 1, rng.randint(0, 2)) for _ in range(rng.randint(1, 4)))
        asked = rng.random() < 0.15
        holding = needs[:1] if not asked and rng.random() < 0.1 else ()
        gangs.append(Gang(job=f"application_1_{i:04d}", queue=rng.choice(["qa", "qb"]), needs=needs,
                          submitted_at=rng.choice([0.0, 50.0, 90.0]) + i, priority=rng.choice([0, 0, 1]),
                          asked=asked, holding=holding))
    rooms = {}
    for q in ("qa", "qb"):
        limited = rng.random() < 0.6
        rooms[q] = Room(nodes=nodes, others=tuple(gangs), totals={n: v + GPU for n, v in nodes.items()},
                        queue_free=Need(rng.choice([4096, 16384]), 16, rng.randint(0, 6)) if limited else None)
    return gangs, rooms


@pytest.mark.parametrize("seed", range(300))
def test_the_stewards_verdict_for_each_gang_is_the_one_its_own_admission_gives(seed):
    gangs, rooms = random_line(random.Random(seed))
    told = decide_line(rooms, now=100.0)
    for g in gangs:
        if g.asked:
            assert g.job not in told  # already admitted: nothing to decide
            continue
        own = admit(Gang(job=g.job, queue=g.queue, submitted_at=g.submitted_at, needs=g.needs, priority=g.priority),
                    rooms[g.queue], now=100.0)
        assert told[g.job] == own


class LineRM(CountingRM):
    """Two nodes of 2 GPUs, ``used`` of them taken by a holder (as the stand-in RM of the paced
    admission's tests); ``waiting`` subm gangs of 4 GPUs, each RUNNING with its AM up on n0."""

    def __init__(self, used_gpus: int, waiting: int):
        super().__init__(used_gpus)
        self.waiting = waiting

    def apps(self, tags, states, slim=False):  # type: ignore[override]
        self.calls.append("apps")
        return [{"id": f"application_1_{i + 1:04d}", "state": "RUNNING", "startedTime": 1000 + i, "queue": "default",
                 "runningContainers": 1, "applicationTags": "submarine,subm-gang:4x1024m1c1g", "progress": 1.0,
                 "amHostHttpAddress": "n0:8042",
                 "amContainerLogs": f"http://n0:8042/node/containerlogs/container_1_{i + 1:04d}_01_000001/alice"}
                for i in range(self.waiting)]

    def metrics(self):
        return dict(super().metrics(), appsSubmitted=self.waiting, appsRunning=self.waiting)


def steward_of(rm: LineRM, app_id: str = "application_1_0001") -> Steward:
    return Steward(rm, app_id, Capacity(rm, app_id, "default"))  # type: ignore[arg-type]


@pytest.mark.parametrize("waiting", [3, 30])
def test_a_round_of_the_steward_costs_the_rm_the_same_whatever_the_number_waiting(waiting):
    rm = LineRM(used_gpus=4, waiting=waiting)
    steward = steward_of(rm)
    first = steward.read()  # new gangs: read whole (which can never fit, what else they wait for)
    assert rm.calls == ["metrics", "apps", "nodes?states=RUNNING", "scheduler"]
    assert set(first.verdicts) == {f"application_1_{i + 1:04d}" for i in range(waiting)}
    assert [first.verdicts[f"application_1_{i + 1:04d}"].ahead for i in range(waiting)] == list(range(waiting))
    rm.calls.clear()
    later = steward.read()  # no job came or went, nothing free in all: the metrics alone
    assert rm.calls == ["metrics"]
    last = later.verdicts[f"application_1_{waiting:04d}"]
    assert not last.fits and last.ahead == waiting - 1 and last.why.endswith("(the cluster's metrics)")
    rm.waiting, rm.calls = waiting + 1, []
    arrived = steward.read()  # a job came: the line again, and the newcomer's room whole
    assert rm.calls == ["metrics", "apps", "nodes?states=RUNNING", "scheduler"] and len(arrived.verdicts) == waiting + 1


def test_when_gpus_free_up_the_steward_reads_whole_and_admits_the_head_alone():
    rm = LineRM(used_gpus=4, waiting=3)
    steward = steward_of(rm)
    steward.read()
    rm.used, rm.calls = 0, []
    snap = steward.read()
    assert rm.calls == ["metrics", "nodes?states=RUNNING", "scheduler"]
    fits = [job for job, v in snap.verdicts.items() if v.fits]
    assert fits == ["application_1_0001"]  # 4 GPUs free: the head takes them, the rest wait behind it
    assert "older job" in snap.verdicts["application_1_0002"].why
    rm.calls.clear()
    steward.read()  # the head's progress is about to change: the line is read again
    assert rm.calls[:2] == ["metrics", "apps"]


def serve(answer) -> str:
    """An AM's endpoint in this process, serving ``answer`` at LINE_PATH; returns its URL."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            body = json.dumps(answer({k: v[0] for k, v in parse_qs(url.query).items()})).encode()
            self.send_response(200 if url.path == LINE_PATH else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_a_waiting_am_asks_the_oldest_am_up_and_the_next_where_it_is_gone():
    rm = LineRM(used_gpus=4, waiting=3)
    second = steward_of(rm, "application_1_0002")
    urls: Dict[str, str] = {"container_1_0001_01_000001": "http://127.0.0.1:9",  # gone: nothing listens
                            "container_1_0002_01_000001": serve(second.answer)}
    follower = Stewardship("application_1_0003", steward_of(rm, "application_1_0003"),
                           find=lambda node, cid: urls.get(cid))
    follower.learn(rm.apps(None, None))
    assert [c[0] for c in candidates(rm.apps(None, None))] == ["application_1_0001", "application_1_0002",
                                                               "application_1_0003"]
    told = None
    for _ in range(50):  # the second steps in when first asked: its rounds begin then
        told = follower.verdict(spread=False)
        if told is not None:
            break
        time.sleep(0.1)
    assert told is not None and not told.fits and told.told_by == "application_1_0002" and told.ahead == 2
    assert "application_1_0001" in follower.failed  # not asked again for a while


def test_a_gang_whose_verdict_the_steward_told_asks_again_at_the_heads_pace():
    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {
        "instances": 4, "command": "x", "resources": {"memory": "1 GiB", "vcores": 1, "gpus": 1}}}}))
    rm = LineRM(used_gpus=4, waiting=3)
    me = "application_1_0003"
    oldest = steward_of(LineRM(used_gpus=4, waiting=3))  # its own reads, in its own AM
    url = serve(oldest.answer)
    am = YarnContainers(FakeApp([]), plan, user="alice", rm=rm, app_id=me, submitted_at=1.0,  # type: ignore[arg-type]
                        stewardship=Stewardship(me, steward_of(rm, me), find=lambda node, cid: url))
    first = am.admit(plan.tasks, Placement.PACK)  # its own first read, whole: who may steward
    assert first.told_by == "" and first.ahead == 2
    oldest.snapshot = oldest.read()
    rm.calls.clear()
    told = am.admit(plan.tasks, Placement.PACK)
    assert told.told_by == "application_1_0001" and told.ahead == 2 and rm.calls == []  # nothing of the RM
    gate = Gate(hold_seconds=60)
    gate.answer(told, 0.0, what="job", decide=lambda *a: None, finish=lambda *a: None)
    assert gate.not_before <= 2.5  # the head's pace, not three times it
    assert am.answer(LINE_PATH, {"app": "application_1_0002"}) is not None  # every AM can steward


def test_growth_and_a_gang_other_than_the_tags_are_decided_by_the_am_itself():
    plan = make_plan(spec_from_dict({"name": "t", "roles": {"worker": {
        "instances": 4, "command": "x", "resources": {"memory": "1 GiB", "vcores": 1, "gpus": 1}}}}))
    rm = LineRM(used_gpus=4, waiting=2)
    asked: List[bool] = []
    ship = Stewardship("application_1_0002", steward_of(rm, "application_1_0002"), find=lambda n, c: None)
    ship.verdict = lambda spread: asked.append(spread)  # type: ignore[method-assign]
    am = YarnContainers(FakeApp([]), plan, user="alice", rm=rm, app_id="application_1_0002",  # type: ignore[arg-type]
                        submitted_at=1.0, stewardship=ship)
    am.admit(plan.tasks, Placement.PACK)
    am.admit(plan.tasks[:2], Placement.PACK)  # not the gang its tag says: not the steward's to decide
    assert asked == []
    am.admit(plan.tasks, Placement.SPREAD)
    assert asked == [True]
