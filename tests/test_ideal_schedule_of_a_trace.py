"""bench/sharing.py's offline yardsticks (bench/sharing_figures.py): the ideal schedule of a trace (the better of FIFO and
FIFO with EASY backfilling on the cluster's GPUs, no start-up cost) and the GPU-seconds held in
partial gangs, from the RM's samples and the tasks' own start and end times."""
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_spec = importlib.util.spec_from_file_location(
    "sharing_figures", Path(__file__).resolve().parent.parent / "bench" / "sharing_figures.py")
sharing = sys.modules.setdefault("sharing_figures", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(sharing)


def job(name, arrival, gpus, duration, fail_after=None):
    return sharing.TraceJob(name=name, team="teama", arrival=arrival, gpus=gpus, duration=duration,
                            fail_after=fail_after, framework="custom")


def starts(schedule):
    return {s.name: s.start for s in schedule}


def test_fifo_starts_no_job_before_an_earlier_one():
    jobs = [job("a", 0, 4, 10), job("b", 1, 4, 10), job("c", 2, 2, 5)]
    fifo = sharing._list_schedule(jobs, 6, backfill=False)
    # c fits beside a at t=2, but b arrived first and waits for a: c waits behind b
    assert starts(fifo) == {"a": 0, "b": 10, "c": 10}


def test_backfilling_starts_a_small_job_that_does_not_delay_the_head():
    jobs = [job("a", 0, 4, 10), job("b", 1, 4, 10), job("c", 2, 2, 5)]
    easy = sharing._list_schedule(jobs, 6, backfill=True)
    assert starts(easy) == {"a": 0, "b": 10, "c": 2}  # c ends at 7, before b's reservation at 10
    ideal = sharing.ideal_schedule(jobs, 6)
    assert (ideal["fifo"], ideal["backfill"], ideal["makespan"]) == (20, 20, 20)


def test_backfilling_never_delays_the_first_waiting_job():
    # b (6 GPUs) is reserved at t=10 when a ends; c would fit now but run past 10 on b's GPUs
    jobs = [job("a", 0, 4, 10), job("b", 1, 6, 10), job("c", 2, 2, 30)]
    easy = sharing._list_schedule(jobs, 6, backfill=True)
    assert starts(easy) == {"a": 0, "b": 10, "c": 20}


def test_the_better_of_the_two_is_the_ideal():
    # FIFO: a 0-10, b 10-15, c 15-23; backfilling runs c 2-10 beside a, before b's reservation
    jobs = [job("a", 0, 4, 10), job("b", 1, 6, 5), job("c", 2, 2, 8)]
    ideal = sharing.ideal_schedule(jobs, 6)
    assert (ideal["fifo"], ideal["backfill"]) == (23, 15)
    assert ideal["policy"] == "backfill" and ideal["makespan"] == 15
    # a tie goes to FIFO
    jobs = [job("a", 0, 6, 10), job("b", 1, 4, 10), job("c", 1, 2, 10)]
    ideal = sharing.ideal_schedule(jobs, 6)
    assert ideal["makespan"] == 20 and ideal["policy"] == "fifo"


def test_a_restarting_gang_runs_its_failed_attempt_and_then_its_whole_run():
    jobs = [job("a", 5, 2, 20, fail_after=3)]
    ideal = sharing.ideal_schedule(jobs, 6)
    assert ideal["makespan"] == 23  # from the first arrival: no start-up cost, no idle time


def test_idle_gpus_wait_for_the_next_arrival():
    jobs = [job("a", 0, 6, 10), job("b", 50, 1, 10)]
    assert sharing.ideal_schedule(jobs, 6)["makespan"] == 60


def test_a_gang_larger_than_the_cluster_is_refused():
    with pytest.raises(ValueError, match="needs 8 GPUs"):
        sharing.ideal_schedule([job("a", 0, 8, 10)], 6)


def test_the_trace_is_seeded_and_shaped_as_asked():
    a, b = sharing.make_trace(seed=7), sharing.make_trace(seed=7)
    assert a == b and len(a) == 24
    assert {j.team for j in a} == {"teama", "teamb"}
    assert {j.gpus for j in a} <= {1, 2, 4, 6}
    assert all(10 <= j.duration <= 60 for j in a)
    assert max(j.arrival for j in a) <= 300 and a[0].arrival == 0
    assert any(j.fail_after for j in a) and all(j.gpus > 1 for j in a if j.fail_after)
    small = sharing.make_trace(seed=7, jobs=6, time_scale=0.5)
    assert len(small) == 6 and all(j.duration <= 30 for j in small)


def test_partial_gang_seconds_count_incomplete_gangs_and_whole_gangs_not_running():
    # a 4-GPU gang: 2 GPUs held 0-10 s, all 4 held 10-40 s, its tasks all running 15-35 s
    samples = [(0, 2), (10, 4), (40, 0)]
    held = sharing.held_gpu_seconds(samples, 4, [(15, 35)])
    assert held == {"allocated": 2 * 10 + 4 * 30, "incomplete": 20, "idle_complete": 4 * 10}


def test_a_gang_runs_between_its_last_start_and_its_first_end_per_attempt():
    stamps = {(0, 0): (10.0, 13.0), (1, 0): (11.0, None),  # attempt 0: worker 0 fails at 13
              (0, 1): (20.0, 50.0), (1, 1): (22.0, 51.0)}
    assert sharing.gang_running_intervals(stamps, 2, app_end=60) == [(11.0, 13.0), (22.0, 50.0)]
    # a gang whose second task never started never ran
    assert sharing.gang_running_intervals({(0, 0): (10.0, 20.0)}, 2, app_end=60) == []


def test_figures_of_a_recorded_replay():
    a, b = job("a", 0, 2, 10), job("b", 5, 4, 10, fail_after=3)
    t0 = 1000.0
    raw = {
        "args": {}, "trace": [dataclasses.asdict(a), dataclasses.asdict(b)], "t0": t0,
        "app_ids": {"a": "app_1", "b": "app_2"}, "submitted": {"a": t0, "b": t0 + 5},
        "samples": {"app_1": [(t0 + 1, 0), (t0 + 2, 2), (t0 + 14, 0)],
                    # b: 2 of 4 GPUs for 4 s, then all 4 for 20 s
                    "app_2": [(t0 + 6, 2), (t0 + 10, 4), (t0 + 30, 0)]},
        "states": [(t0 + 1, 1, 0), (t0 + 6, 0, 2)],
        "final": {"app_1": {"finishedTime": (t0 + 14) * 1000}, "app_2": {"finishedTime": (t0 + 30) * 1000}},
        "stamps": {"app_1": {"0.0": [t0 + 3, t0 + 13], "1.0": [t0 + 3, t0 + 13]},
                   "app_2": {"0.0": [t0 + 11, t0 + 14], "1.0": [t0 + 11, None], "2.0": [t0 + 12, None],
                             "3.0": [t0 + 12, None], "0.1": [t0 + 16, t0 + 26], "1.1": [t0 + 16, t0 + 26],
                             "2.1": [t0 + 16, t0 + 26], "3.1": [t0 + 16, t0 + 26]}},
        "reports": {"app_1": {"state": "SUCCEEDED", "attempts": 1, "tasks": [{"host": "n1"}, {"host": "n2"}]},
                    "app_2": {"state": "FAILED", "attempts": 2, "diagnostics": "worker:0 failed",
                              "tasks": [{"host": "n1"}, {"host": "n2"}, {"host": "n3"}, {"host": "n3"}]}},
        "history": {"app_2": {"started_at": "1970-01-01T00:16:47Z"}},
        "gpus": 6, "gpus_per_node": 2,
    }
    f = sharing.figures(sharing.Recorded(raw))
    assert f["failed"] == 1 and f["failed_jobs"][0]["name"] == "b"
    assert f["gpu_seconds_allocated"] == 24 + 8 + 80
    assert f["gpu_seconds_incomplete_gang"] == 8
    # a: 2 GPUs held 2-14 s, running 3-13: 4 GPU-s; b: 4 held 10-30, running 12-14 and 16-26: 32
    assert f["gpu_seconds_idle_complete_gang"] == 4 + 32
    assert (f["queueing_delay_mean"], f["queueing_delay_max"]) == (5, 7)  # a: 3 s, b: 12 - 5 = 7 s
    assert f["makespan"] == 30 and f["ideal_makespan"] == 18  # b: 5 + 3 + 10
    assert (f["nodes_spanned"], f["nodes_min"], f["gangs_on_more_nodes_than_needed"]) == (5, 3, 2)  # both ran
    assert f["am_wait_seconds"] == [None, 2]  # b's AM started 1007, 2 s after its submission
    assert (f["ams_running_max"], f["ams_waiting_max"]) == (2, 1)
