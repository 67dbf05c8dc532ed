"""The job history: finished jobs' reports as a Parquet dataset, one file per job.

Unit tests write real Parquet files with pyarrow into a temporary directory;
the local tests run real jobs (attached and detached) and read them back with
``subm history``.
"""
import datetime as dt
import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from submarine_py.cli import main
from submarine_py.errors import SpecError
from submarine_py.history import History, collect, history_location, parse_since, record_of, remember
from submarine_py.report import JobReport

from conftest import job_dirs, run_json, subm, wait_for, write_job

UTC = dt.timezone.utc


def report(app_id, name="train", state="SUCCEEDED", submitted=1_790_000_000.0, gpu=None, **kw):
    """A finished job's report, as a backend returns it (read from the AM's JSON)."""
    return JobReport.from_dict(dict({
        "app_id": app_id, "name": name, "state": state, "backend": "local", "framework": "pytorch",
        "user": "ann", "queue": None, "attempts": 2, "submitted_at": submitted, "started_at": submitted + 1,
        "finished_at": submitted + 30, "diagnostics": "" if state == "SUCCEEDED" else "worker:0 failed",
        "timings": {"gang_ready_seconds": 2.5, "total_seconds": 30.0},
        "tasks": [{"role": "worker", "index": 0, "host": "h1", "state": "SUCCEEDED", "exit_code": 0,
                   "restarts": 1, "tracked": True, "gpu": gpu, "log": "/x"}],
        "spec": {"name": name, "roles": {"worker": {"command": "python train.py"}}},
        "final": True,
    }, **kw))


# ------------------------------------------------------------------------- unit
@pytest.mark.unit
def test_a_finished_job_is_one_row_with_its_tasks_gpu_summary_and_spec(tmp_path):
    gpu = {"devices": ["0"], "samples": 12, "mean_utilization": 71.5, "peak_utilization": 98,
           "peak_memory_mb": 9000, "memory_total_mb": 16000, "idle_seconds": 0.0, "idle_now_seconds": 0.0,
           "idle": False}
    h = History(str(tmp_path / "hist"))
    assert h.add(record_of(report("local_a", gpu=gpu)))
    (row,) = h.rows()
    assert row["app_id"] == "local_a" and row["user"] == "ann" and row["attempts"] == 2
    assert row["submitted_at"] == dt.datetime.fromtimestamp(1_790_000_000, UTC)
    assert row["finished_at"] - row["submitted_at"] == dt.timedelta(seconds=30)
    assert row["gang_ready_seconds"] == 2.5
    task = row["tasks"][0]
    assert (task["role"], task["index"], task["host"], task["exit_code"], task["restarts"]) == ("worker", 0, "h1", 0, 1)
    assert task["gpu"]["mean_utilization"] == 71.5 and task["gpu"]["peak_memory_mb"] == 9000
    assert json.loads(row["spec"])["roles"]["worker"]["command"] == "python train.py"
    # A plain Parquet file, one per job, readable by any Parquet reader.
    assert pq.read_table(tmp_path / "hist" / "local_a.parquet").num_rows == 1


@pytest.mark.unit
def test_a_job_is_kept_once_and_running_jobs_not_at_all(tmp_path):
    h = History(str(tmp_path))
    assert h.add(record_of(report("local_a")))
    assert not h.add(record_of(report("local_a", state="FAILED")))
    assert not h.add(record_of(report("local_b", state="RUNNING")))
    assert [r["state"] for r in h.rows()] == ["SUCCEEDED"]
    assert not remember(report("local_c", final=False), h)
    assert h.held() == {"local_a"}


@pytest.mark.unit
def test_filters_by_name_glob_state_and_submission_time(tmp_path):
    h = History(str(tmp_path))
    day = 86400.0
    h.add(record_of(report("local_1", name="mnist-a", submitted=1_790_000_000)))
    h.add(record_of(report("local_2", name="mnist-b", state="FAILED", submitted=1_790_000_000 + day)))
    h.add(record_of(report("local_3", name="bert", state="KILLED", submitted=1_790_000_000 + 2 * day)))
    ids = lambda **kw: [r["app_id"] for r in h.rows(**kw)]  # noqa: E731
    assert ids() == ["local_1", "local_2", "local_3"]
    assert ids(name="bert") == ["local_3"]
    assert ids(name="mnist-*") == ["local_1", "local_2"]
    assert ids(state="failed") == ["local_2"]
    assert ids(since=dt.datetime.fromtimestamp(1_790_000_000 + day, UTC)) == ["local_2", "local_3"]
    assert ids(name="mnist-*", state="KILLED") == []
    assert ids(app_id="local_2") == ["local_2"] and ids(app_id="local_9") == []


@pytest.mark.unit
def test_an_unreadable_file_is_skipped_not_fatal(tmp_path):
    h = History(str(tmp_path))
    h.add(record_of(report("local_good")))
    (tmp_path / "local_bad.parquet").write_text("not parquet")
    assert [r["app_id"] for r in h.rows()] == ["local_good"]
    assert len(h.problems) == 1 and "local_bad.parquet" in h.problems[0]


@pytest.mark.unit
def test_compaction_merges_one_job_files_and_parts_keeping_every_job_once(tmp_path):
    h = History(str(tmp_path))
    for i in range(5):
        h.add(record_of(report(f"local_{i}", submitted=1_790_000_000 + i)))
    assert h.compact(at_least=6) == 0  # not yet
    assert h.compact(at_least=5) == 5
    assert sorted(p.name[:5] for p in tmp_path.glob("*.parquet")) == ["part-"]
    h.add(record_of(report("local_5", submitted=1_790_000_005)))
    assert not h.add(record_of(report("local_2")))  # held, in the part
    assert h.held() == {f"local_{i}" for i in range(6)}
    assert [r["app_id"] for r in h.rows()] == [f"local_{i}" for i in range(6)]
    assert [r["app_id"] for r in h.rows(app_id="local_3")] == ["local_3"]
    assert [r["app_id"] for r in h.rows(app_id="local_5")] == ["local_5"]
    # A second part, then both merged into one.
    h.compact(at_least=1)
    assert len(list(tmp_path.glob("part-*.parquet"))) == 2
    assert h.compact(at_least=100, max_parts=2) == 6
    assert len(list(tmp_path.glob("*.parquet"))) == 1
    assert [r["app_id"] for r in h.rows(state="SUCCEEDED")] == [f"local_{i}" for i in range(6)]


@pytest.mark.unit
def test_since_takes_durations_and_dates():
    now = dt.datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert parse_since("7d", now) == now - dt.timedelta(days=7)
    assert parse_since("12h", now) == now - dt.timedelta(hours=12)
    assert parse_since("2w", now) == now - dt.timedelta(weeks=2)
    assert parse_since("2026-11-01", now) == dt.datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_since("2026-11-01T08:30+01:00", now) == dt.datetime(2026, 11, 1, 7, 30, tzinfo=UTC)
    with pytest.raises(SpecError, match="--since"):
        parse_since("last week", now)


@pytest.mark.unit
def test_the_location_is_subm_history_else_under_subm_home(monkeypatch, subm_home):
    monkeypatch.delenv("SUBM_HISTORY", raising=False)
    assert history_location() == str(subm_home / "history")
    monkeypatch.setenv("SUBM_HISTORY", "file:///srv/history")
    assert history_location() == "file:///srv/history"


@pytest.mark.unit
def test_a_filesystem_uri_works_like_a_path(tmp_path):
    h = History(f"file://{tmp_path}/uri-hist")
    h.add(record_of(report("local_u")))
    assert (tmp_path / "uri-hist" / "local_u.parquet").is_file()
    assert [r["app_id"] for r in History(str(tmp_path / "uri-hist")).rows()] == ["local_u"]


@pytest.mark.unit
def test_an_unusable_location_is_one_clear_error(tmp_path):
    from submarine_py.errors import BackendError

    with pytest.raises(BackendError, match="SUBM_HISTORY"):
        History("nosuchscheme://x/y")


@pytest.mark.unit
def test_collect_adds_what_backends_report_and_survives_a_backend_that_is_down(tmp_path):
    class Finished:
        def finished_reports(self, known):
            return iter([report(a) for a in ("application_1_0001", "application_1_0002") if a not in known])

    class Down:
        def finished_reports(self, known):
            raise ConnectionError("RM unreachable")

    h = History(str(tmp_path))
    added, problems = collect(h, [("yarn", Finished()), ("other", Down())])
    assert added == 2 and problems == ["other: RM unreachable"]
    assert collect(h, [("yarn", Finished())]) == (0, [])
    assert len(h.rows()) == 2


@pytest.mark.unit
def test_cli_history_lists_and_shows_one_job(monkeypatch, tmp_path):
    monkeypatch.setenv("SUBM_HISTORY", str(tmp_path / "h"))
    History().add(record_of(report("local_x", name="mnist")))
    runner = CliRunner()
    listed = runner.invoke(main, ["history", "--no-collect"])
    assert listed.exit_code == 0 and "local_x" in listed.output and "mnist" in listed.output
    one = runner.invoke(main, ["history", "local_x", "--output", "json"])
    assert one.exit_code == 0
    data = json.loads(one.output)
    assert data["app_id"] == "local_x" and data["spec"]["name"] == "mnist"
    assert data["submitted_at"].endswith("+00:00")
    missing = runner.invoke(main, ["history", "local_nope"])
    assert missing.exit_code == 1 and "holds no job local_nope" in missing.output
    bad = runner.invoke(main, ["history", "--since", "yesterday"])
    assert bad.exit_code == 2 and "--since" in bad.output and "Traceback" not in bad.output


# ------------------------------------------------------------------------ local
QUICK = """
    name: {name}
    roles:
      worker:
        instances: 2
        command: python -c "import sys, time; time.sleep({sleep}); sys.exit({code} if int('$SUBM_INDEX') == 1 else 0)"
"""


@pytest.mark.local
def test_every_finished_local_job_appears_once_detached_ones_included(tmp_path, subm_home, no_leftovers):
    ok = write_job(tmp_path / "ok", QUICK.format(name="hist-ok", sleep=0, code=0))
    bad = write_job(tmp_path / "bad", QUICK.format(name="hist-bad", sleep=0, code=3))
    rc, waited, _ = run_json("run", str(ok), "--backend", "local")
    assert rc == 0
    # Seen to end by the client: in the history at once, without any collection.
    assert History().held() == {waited["app_id"]}
    rc, detached, _ = run_json("run", str(bad), "--backend", "local", "--detach")
    no_leftovers += [waited["app_id"], detached["app_id"]]
    wait_for(lambda: (subm_home / "local" / detached["app_id"] / "report.json").exists(), 60,
             "the detached job to end")
    rc, rows, err = run_json("history")
    assert rc == 0, err
    assert [r["app_id"] for r in rows] == [waited["app_id"], detached["app_id"]]
    assert [r["state"] for r in rows] == ["SUCCEEDED", "FAILED"]
    assert "worker:1 failed with exit code 3" in rows[1]["diagnostics"]
    assert rows[1]["tasks"][1]["exit_code"] == 3
    # Asked again (and after `subm status`): still once each.
    assert subm("status", detached["app_id"])[0] == 0
    rc, again, _ = run_json("history")
    assert [r["app_id"] for r in again] == [r["app_id"] for r in rows]
    assert len(list((subm_home / "history").glob("*.parquet"))) == 2
    rc, failed, _ = run_json("history", "--state", "FAILED", "--name", "hist-*", "--since", "1h")
    assert [r["app_id"] for r in failed] == [detached["app_id"]]
    rc, none, _ = run_json("history", "--since", "2999-01-01")
    assert none == []
    rc, one, _ = run_json("history", detached["app_id"])
    assert one["spec"]["name"] == "hist-bad" and one["backend"] == "local" and one["user"]
    rc, out, _ = subm("history", "--name", "hist-ok")
    assert rc == 0 and waited["app_id"] in out and detached["app_id"] not in out
    assert len(job_dirs(subm_home)) == 2


@pytest.mark.local
def test_a_killed_detached_job_is_remembered_as_killed(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path, QUICK.format(name="hist-long", sleep=300, code=0))
    rc, started, _ = run_json("run", str(job), "--backend", "local", "--detach")
    no_leftovers.append(started["app_id"])
    wait_for(lambda: run_json("status", started["app_id"])[1].get("state") == "RUNNING", 60, "the job to run")
    rc, rows, _ = run_json("history")
    assert rows == []  # running jobs are not history
    rc, killed, _ = run_json("kill", started["app_id"])
    assert killed["state"] == "KILLED"
    rc, rows, _ = run_json("history", "--state", "killed")
    assert [r["app_id"] for r in rows] == [started["app_id"]]
