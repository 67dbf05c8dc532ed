"""A waiting gang knows its place and its ETA (issue 44): the line shown is admission's own
order, the forecast names its basis (history, a declared limit, or unknown), and ``subm queue``
prints the line as text, JSON and Prometheus' text format."""
from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from click.testing import CliRunner

from submarine_py import cli, client
from submarine_py.admission import Gang, Need, Room, admit, line
from submarine_py.backends.yarn.client.line import view_of
from submarine_py.forecast import (FREE_NOW, Expected, Holder, Waiter, expected, expected_end, forecast,
                                   run_seconds, runs_by_job)
from submarine_py.output import format_report
from submarine_py.queue_view import QueueView, Running, Waiting, format_queue, place_of, queue_json, queue_prometheus
from submarine_py.report import JobReport, Timings
from submarine_py.states import JobState

pytestmark = pytest.mark.unit

GPU = Need(1024, 1, 1)


def gang(job: str, at: float, gpus: int = 2, priority: int = 0, asked: bool = False, queue: str = "teama") -> Gang:
    return Gang(job=job, queue=queue, submitted_at=at, needs=(GPU,) * gpus, priority=priority, asked=asked)


# -- the line -----------------------------------------------------------------------------------

def test_the_line_is_asked_gangs_first_then_priority_then_age_then_id():
    gangs = [gang("young", 30), gang("old", 10), gang("urgent", 40, priority=5), gang("arriving", 50, asked=True),
             gang("b-twin", 20), gang("a-twin", 20)]
    assert [g.job for g in line(gangs)] == ["arriving", "urgent", "old", "a-twin", "b-twin", "young"]


def test_admission_takes_gangs_in_the_order_the_line_shows():
    # Two gangs ahead fit one after the other in 4 free GPUs: the one the line puts first is
    # the one admission names first, and then there is no room left for me.
    room = Room(nodes={"h1": Need(8192, 8, 4)}, others=(gang("second", 20), gang("first", 10)))
    verdict = admit(gang("me", 30), room, now=31)
    assert not verdict.fits and "(first, second) first" in verdict.why
    assert [g.job for g in line(room.others)] == ["first", "second"]


# -- the forecast --------------------------------------------------------------------------------

def row(name: str, user: str, total: float, ready: float, state: str = "SUCCEEDED") -> dict:
    return {"name": name, "user": user, "state": state, "total_seconds": total, "gang_ready_seconds": ready}


def test_a_run_lasts_from_its_gang_ready_to_its_end_else_from_its_start():
    assert run_seconds(row("a", "u", 100, 30)) == 70
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    assert run_seconds({"started_at": t0, "finished_at": t0 + dt.timedelta(seconds=42)}) == 42
    assert run_seconds({}) is None


def test_the_expected_run_is_the_median_of_earlier_successful_runs_of_the_same_name_and_user():
    runs = runs_by_job([row("train", "ann", 110, 10), row("train", "ann", 310, 10), row("train", "ann", 1010, 10),
                        row("train", "ann", 5000, 10, state="FAILED"), row("train", "bob", 10, 5)])
    got = expected("train", "ann", runs, job_seconds=3600)
    assert got.seconds == 300 and got.basis == "history: median of 3 earlier runs of train by ann"
    declared = expected("train", "cid", runs, job_seconds=3600)
    assert declared.seconds == 3600 and declared.declared and declared.basis == "declared: timeouts.job_seconds"
    unknown = expected("train", "cid", runs, job_seconds=None)
    assert unknown.seconds is None and unknown.basis.startswith("unknown")


def test_a_running_jobs_end_counts_a_run_from_its_gang_and_a_limit_from_its_start():
    measured = Expected(300, "history: ...")
    assert expected_end(measured, started_at=1000, ready_at=1060, now=1100) == (1360, "history: ...")
    limit = Expected(600, "declared: timeouts.job_seconds", declared=True)
    assert expected_end(limit, started_at=1000, ready_at=1060, now=1100)[0] == 1600
    assert expected_end(measured, started_at=1000, ready_at=1060, now=2000)[0] == 2000  # overdue: any moment
    assert expected_end(Expected(None, "unknown: x"), started_at=1000, ready_at=None, now=1100) == (None, "unknown: x")


def test_gangs_start_in_line_order_as_the_running_jobs_give_their_gpus_back():
    holders = [Holder("hist", 2, 200, "history: median of 3 earlier runs of a by ann"),
               Holder("decl", 2, 500, "declared: timeouts.job_seconds")]
    line_ = [Waiter("one", 3, Expected(100, "history: b")), Waiter("two", 2, Expected(None, "unknown: c")),
             Waiter("three", 4, Expected(50, "declared: timeouts.job_seconds"))]
    etas = forecast(line_, holders, free_gpus=1, now=100)
    # one: 1 free + 2 at 200 = 3; two: 0 left + 2 at 500; three: one's 3 at 300 and... two's end is unknown.
    assert (etas[0].start, etas[0].basis) == (200, "history: median of 3 earlier runs of a by ann")
    assert (etas[1].start, etas[1].basis) == (300, "history: b")
    assert etas[2].start is None and etas[2].basis.startswith("unknown: two's end")


def test_a_gang_that_fits_in_the_free_gpus_is_expected_now_and_one_asking_no_gpu_is_unknown():
    etas = forecast([Waiter("small", 1, Expected(10, "x")), Waiter("cpu", 0, Expected(10, "x"))], [], 2, now=5)
    assert (etas[0].start, etas[0].basis) == (5, FREE_NOW)
    assert etas[1].start is None and "asks no GPU" in etas[1].basis


def test_an_end_without_basis_makes_every_later_start_unknown():
    etas = forecast([Waiter("a", 2, Expected(10, "x")), Waiter("b", 1, Expected(10, "x"))],
                    [Holder("h", 4, None, "unknown: no earlier run of h by u in the history")], 0, now=0)
    assert all(e.start is None and e.basis.startswith("unknown: h's end") for e in etas)
    assert forecast([Waiter("a", 1, Expected(1, "x"))], [], None, now=0)[0].basis.startswith("unknown")


# -- the line read from the ResourceManager ------------------------------------------------------

def app(app_id: str, gpus: int, progress: float, started: float, user: str = "ann", queue: str = "root.teama",
        **kw) -> dict:
    return dict({"id": app_id, "name": f"job-{app_id}", "user": user, "queue": queue, "state": "RUNNING",
                 "progress": progress, "startedTime": int(started * 1000),
                 "applicationTags": f"submarine,subm-gang:{gpus}x1024m1c1g"}, **kw)


def report(app_id: str, **kw) -> JobReport:
    return JobReport(app_id=app_id, state=JobState.RUNNING, **kw)


def the_view() -> QueueView:
    apps = [app("holder", 4, 50.0, 1000), app("first", 4, 1.0, 1100), app("second", 4, 1.0, 1200, user="bob"),
            app("other", 2, 1.0, 1150, queue="root.teamb")]
    reports = {"holder": report("holder", submitted_at=1000.0, started_at=1002.0, job_seconds=600,
                                timings=Timings(gang_ready_seconds=20.0)),
               "first": report("first", waiting_for="waiting for 4 GPUs: 2 free in the cluster"),
               "second": report("second")}
    totals = {"h1": Need(8192, 8, 2), "h2": Need(8192, 8, 2), "h3": Need(8192, 8, 2)}
    return view_of(apps, reports, totals, free_gpus=2, runs={("job-first", "ann"): [100.0]}, now=1300.0)


def test_the_line_read_from_the_rm_is_admissions_with_positions_per_queue_and_expected_starts():
    view = the_view()
    assert [(w.app_id, w.queue, w.position) for w in view.waiting] == \
        [("first", "teama", 1), ("other", "teamb", 1), ("second", "teama", 2)]
    assert [(r.app_id, r.gpus, r.expected_end) for r in view.running] == [("holder", 4, 1602.0)]
    first, other, second = view.waiting
    assert (first.gpus, first.containers, first.nodes) == (4, 4, 2)
    assert first.expected_start == 1602.0 and first.basis == "declared: timeouts.job_seconds"
    assert other.expected_start == 1602.0  # 2 GPUs left after first
    assert second.expected_start == 1702.0 and second.basis == "history: median of 1 earlier run of job-first by ann"


def test_a_waiting_job_is_placed_behind_those_ahead_in_its_own_queue():
    place = place_of(the_view(), "second")
    assert place.queue == "teama" and place.position == 2 and [a.app_id for a in place.ahead] == ["first"]
    assert place.ahead[0].user == "ann" and place.ahead[0].gpus == 4 and place.free_gpus == 2
    assert place_of(the_view(), "holder") is None
    again = JobReport.from_dict(json.loads(json.dumps(report("second", waiting_for="x", place=place).to_dict())))
    assert again.place == place
    text = format_report(report("second", waiting_for="waiting for 4 GPUs", place=place))
    assert "Line: position 2 in queue teama; it needs 4 GPUs in 4 container(s) on at least 2 nodes, 2 free now" in text
    assert "ahead: first of ann, 4 GPUs" in text and "basis: history: median of 1 earlier run" in text


# -- rendered ------------------------------------------------------------------------------------

def test_the_queue_as_text_shows_each_queues_line_and_the_jobs_holding_gpus():
    text = format_queue(the_view())
    assert "GPUs free in the cluster: 2" in text
    assert text.index("Queue teama: 2 waiting, 1 running") < text.index("Queue teamb: 1 waiting, 0 running")
    assert re.search(r"^\s+1\s+first\s+ann\s+job-first\s+4\s", text, re.M)
    assert "first: waiting for 4 GPUs: 2 free in the cluster" in text
    assert re.search(r"^\s+holder\s+ann\s+job-holder\s+4\s", text, re.M)


def test_the_queue_as_json_keeps_the_order_per_queue():
    data = json.loads(json.dumps(queue_json(the_view().of_queue("teama"))))
    assert list(data["queues"]) == ["teama"]
    assert [w["app_id"] for w in data["queues"]["teama"]["waiting"]] == ["first", "second"]
    assert data["queues"]["teama"]["waiting"][0]["basis"] == "declared: timeouts.job_seconds"
    assert data["free_gpus"] == 2


def test_the_queue_in_prometheus_text_format_is_valid_and_says_the_figures():
    view = the_view()
    partial = Waiting(position=1, app_id="arriving", user="u", name="n", queue='odd"q', gpus=4, containers=4,
                      nodes=2, waiting_since=1290.0, asked=True, held_gpus=3, waiting_for=None,
                      expected_start=None, basis="unknown")
    view = QueueView(view.at, view.free_gpus, view.waiting + (partial,), view.running)
    text = queue_prometheus(view, ["empty"])
    sample = re.compile(r'^[a-z_]+(\{queue="(?:[^"\\]|\\.)*"\})? -?[0-9.]+$')
    for ln in text.splitlines():
        assert ln.startswith("# HELP subm_") or ln.startswith("# TYPE subm_") or sample.match(ln), ln
    assert text.endswith("\n")
    assert 'subm_waiting_gangs{queue="teama"} 2' in text and 'subm_waiting_gpus{queue="teama"} 8' in text
    assert 'subm_oldest_wait_seconds{queue="teama"} 200' in text
    assert 'subm_partial_gang_gpus{queue="odd\\"q"} 3' in text and 'subm_waiting_gangs{queue="empty"} 0' in text
    assert 'subm_running_gpus{queue="teama"} 4' in text and "subm_free_gpus 2" in text
    types = [ln for ln in text.splitlines() if ln.startswith("# TYPE")]
    assert len(types) == len(set(types)) and all(ln.endswith(" gauge") for ln in types)


# -- the commands --------------------------------------------------------------------------------

def test_subm_queue_prints_a_queues_line_in_each_format(monkeypatch):
    asked = []
    monkeypatch.setattr(client, "queue", lambda q=None, backend=None: asked.append(q) or the_view().of_queue(q))
    runner = CliRunner()
    out = runner.invoke(cli.main, ["queue", "teama", "--output", "json"])
    assert out.exit_code == 0, out.output
    assert [w["app_id"] for w in json.loads(out.output)["queues"]["teama"]["waiting"]] == ["first", "second"]
    out = runner.invoke(cli.main, ["queue", "teama", "-o", "prometheus"])
    assert out.exit_code == 0 and 'subm_waiting_gangs{queue="teama"} 2' in out.output
    out = runner.invoke(cli.main, ["queue"])
    assert out.exit_code == 0 and "Queue teamb" in out.output and asked == ["teama", "teama", None]


def test_the_local_backend_says_it_keeps_no_shared_line():
    out = CliRunner().invoke(cli.main, ["queue", "--backend", "local"])
    assert out.exit_code == 2 and "Error: --backend: the local backend keeps no line shared" in out.output


def test_status_places_a_waiting_job_and_reads_no_line_for_a_running_one(monkeypatch):
    class Fake:
        lines = 0

        def __init__(self, waiting):
            self.waiting = waiting

        def status(self, app_id):
            return report(app_id, waiting_for="waiting for 4 GPUs" if self.waiting else None)

        def line(self):
            Fake.lines += 1
            return the_view()

    monkeypatch.setattr(client, "_backend_for", lambda app_id: Fake(True))
    assert client.status("second").place.position == 2 and Fake.lines == 1
    monkeypatch.setattr(client, "_backend_for", lambda app_id: Fake(False))
    assert client.status("second").place is None and Fake.lines == 1
    monkeypatch.setattr(client, "_backend_for", lambda app_id: Fake(True))
    out = CliRunner().invoke(cli.main, ["status", "second", "--output", "json"])
    assert json.loads(out.output)["place"]["ahead"][0]["app_id"] == "first"
