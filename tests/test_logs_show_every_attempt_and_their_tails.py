"""``subm logs``: every attempt of a task is in its logs, each begun by its header line;
``--attempt N`` keeps attempt N alone, ``--tail N`` the last N lines of each file (then, with
``--follow``, what comes). The selection itself (``backends/logs.py``) is the same for both
backends; the YARN side, every AM attempt's log, is in
``test_waiting_and_logs_of_every_attempt_on_yarn.py``."""
from __future__ import annotations

import io
import json
import time
from typing import List, Optional

import pytest

from conftest import cli, start_subm, wait_for, write_job
from submarine_py.backends.logs import LogFile, LogOutput, read_tail
from submarine_py.errors import JobNotFoundError


def header(attempt: int, index: int = 0) -> str:
    return (f"[subm] job=local_x role=worker index={index} attempt={attempt} host=127.0.0.1 "
            f"container=worker-{index}-e1 command: python train.py\n")


def show(text: str, attempt: Optional[int] = None, tail: Optional[int] = None, pieces: int = 7,
         done: bool = True) -> str:
    """What a LogFile shows of ``text`` fed in ``pieces`` bytes at a time (as reads cut it)."""
    out = io.StringIO()
    view = LogFile(LogOutput(out), "logs/worker-0.stdout", attempt=attempt, tail=tail)
    data = text.encode()
    for at in range(0, len(data), pieces):
        view.feed(data[at:at + pieces])
    view.read_done()
    if done:
        view.close()
    return out.getvalue()


LOG = header(1) + "loading\nepoch 1\n" + header(2) + "resuming\nepoch 2\ndone\n"


# -- the selection (unit) ---------------------------------------------------------------------

@pytest.mark.unit
def test_a_whole_log_is_shown_titled_whatever_the_pieces_it_is_read_in():
    for pieces in (1, 3, 1000):
        assert show(LOG, pieces=pieces) == "==> logs/worker-0.stdout <==\n" + LOG


@pytest.mark.unit
def test_an_attempt_runs_from_its_header_to_the_next():
    assert show(LOG, attempt=1) == "==> logs/worker-0.stdout <==\n" + header(1) + "loading\nepoch 1\n"
    assert show(LOG, attempt=2) == "==> logs/worker-0.stdout <==\n" + header(2) + "resuming\nepoch 2\ndone\n"
    assert show(LOG, attempt=3) == ""  # no title for a file without it


@pytest.mark.unit
def test_what_the_executor_says_after_an_attempt_belongs_to_it_and_nothing_before_the_first_header_does():
    text = "[subm-executor 10:00:00] registered\n" + header(1) + "x\n[subm-executor 10:00:01] the task exited\n" \
        + header(2) + "y\n"
    shown = show(text, attempt=1)
    assert "registered" not in shown and "the task exited" in shown and "\ny\n" not in shown


@pytest.mark.unit
def test_a_user_line_mentioning_an_attempt_is_no_header():
    text = header(1) + "[subm] attempt=2 is what I print\n" + "job=x attempt=2\n"
    assert show(text, attempt=1).count("\n") == 4


@pytest.mark.unit
def test_tail_keeps_the_last_lines_of_what_is_selected():
    assert show(LOG, tail=2) == "==> logs/worker-0.stdout <==\nepoch 2\ndone\n"
    assert show(LOG, attempt=1, tail=1) == "==> logs/worker-0.stdout <==\nepoch 1\n"
    assert show(LOG, tail=0) == ""
    assert show(LOG, tail=100) == "==> logs/worker-0.stdout <==\n" + LOG
    # An unfinished last line is a line too, as tail(1) counts it.
    assert show("a\nb\nc", tail=2) == "==> logs/worker-0.stdout <==\nb\nc"


@pytest.mark.unit
def test_an_unfinished_line_of_an_attempt_waits_for_its_end_unless_nothing_more_comes():
    assert show(header(1) + "partial", attempt=1, done=False) == "==> logs/worker-0.stdout <==\n" + header(1)
    assert show(header(1) + "partial", attempt=1).endswith(header(1) + "partial")


@pytest.mark.unit
def test_a_title_is_written_again_only_when_the_output_turns_to_another_file():
    out = io.StringIO()
    output = LogOutput(out)
    a, b = LogFile(output, "a"), LogFile(output, "b")
    for view, data in ((a, b"1\n"), (a, b"2\n"), (b, b"x\n"), (a, b"3\n")):
        view.feed(data)
    assert out.getvalue() == "==> a <==\n1\n2\n==> b <==\nx\n==> a <==\n3\n"


@pytest.mark.unit
@pytest.mark.parametrize("lines, size", [(3, 10), (3, 100_000), (2_000, 100_000), (1, 1)])
def test_read_tail_reads_from_the_end_only_what_the_lines_need(lines, size):
    data = b"".join(b"line %d\n" % i for i in range(size))
    reads: List[int] = []

    def read(start: int, end: int) -> bytes:
        reads.append(end - start)
        return data[start:end]

    got, reached = read_tail(len(data), lines, read)
    assert got == b"".join(b"line %d\n" % i for i in range(max(0, size - lines), size))
    assert reached == len(data)
    assert sum(reads) <= max(len(data), 4 * 1024 * 1024)
    if size * 12 > 1 << 16 and lines < 100:
        assert reads == [1 << 16]  # one window from the end was enough


@pytest.mark.unit
def test_read_tail_of_a_line_longer_than_its_window():
    data = b"x" * 300_000 + b"\nlast\n"
    got, _ = read_tail(len(data), 2, lambda s, e: data[s:e])
    assert got == data


@pytest.mark.unit
@pytest.mark.parametrize("args", [["--attempt", "0"], ["--tail", "-1"], ["--attempt", "one"]])
def test_bad_attempt_and_tail_values_are_bad_input(args):
    rc, _, err = cli("logs", "local_20260101-120000_ab12", *args)
    assert rc == 2 and "Error" in err


# -- a real job (local) --------------------------------------------------------------------------

JOB = """\
    name: attempts
    restart: {policy: gang, max_restarts: 2}
    roles:
      worker:
        instances: 2
        command: >-
          for i in 1 2 3 4 5; do echo "worker $SUBM_INDEX attempt $SUBM_ATTEMPT line $i"; done;
          echo "worker $SUBM_INDEX attempt $SUBM_ATTEMPT on stderr" >&2;
          [ "$SUBM_ATTEMPT" -lt 2 ] && [ "$SUBM_INDEX" = 1 ] && exit 3; exit 0
"""


@pytest.fixture
def restarted_job(tmp_path, no_leftovers) -> str:
    """A finished job whose worker 1 failed twice: three attempts of each task in its logs."""
    rc, out, err = cli("run", str(write_job(tmp_path, JOB)), "--backend", "local", "--output", "json", "--quiet")
    report = json.loads(out)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["attempts"] == 3, err
    return report["app_id"]


def lines_of(out: str, marker: str) -> List[str]:
    return [line for line in out.splitlines() if marker in line]


def printed(out: str) -> List[str]:
    """The lines the tasks' command printed to stdout (not the headers, which quote it)."""
    return [line for line in out.splitlines() if line.startswith("worker ") and " line " in line]


@pytest.mark.local
def test_logs_show_every_attempt_and_attempt_n_alone(restarted_job):
    rc, out, err = cli("logs", restarted_job, "--role", "worker", "--index", "1")
    assert rc == 0, err
    assert [line.split(" attempt=")[1][0] for line in lines_of(out, "[subm] job=")] == ["1", "2", "3"] * 2
    assert "worker 1 attempt 0 line 1" in out and "worker 1 attempt 2 line 5" in out

    rc, out, err = cli("logs", restarted_job, "--role", "worker", "--attempt", "2")
    assert rc == 0, err
    for index in (0, 1):
        for name in ("stdout", "stderr"):
            assert f"==> logs/worker-{index}.{name} <==" in out
    assert len(lines_of(out, "[subm] job=")) == 4 and all("attempt=2 " in h for h in lines_of(out, "[subm] job="))
    assert printed(out) == [f"worker {i} attempt 1 line {n}" for i in (0, 1) for n in range(1, 6)]
    assert "attempt 1 on stderr" in out and "attempt 0" not in out and "attempt 2" not in out


@pytest.mark.local
def test_attempt_n_keeps_the_ams_log_whole(restarted_job):
    rc, out, err = cli("logs", restarted_job, "--attempt", "3")
    assert rc == 0, err
    assert out.startswith("==> am.log <==\n")
    assert "restarting the gang: attempt 2" in out and "restarting the gang: attempt 3" in out
    assert "worker 1 attempt 2 line 1" in out and "worker 1 attempt 1 line 1" not in out


@pytest.mark.local
def test_an_attempt_no_log_holds_is_an_error_naming_those_there_are(restarted_job):
    rc, out, err = cli("logs", restarted_job, "--role", "worker", "--attempt", "4")
    assert rc == 1 and out == ""
    assert err == f"Error: no attempt 4 in the task logs of {restarted_job}; they hold attempts 1, 2, 3\n"


@pytest.mark.local
def test_tail_shows_the_last_lines_of_each_file(restarted_job):
    rc, out, err = cli("logs", restarted_job, "--role", "worker", "--tail", "2")
    assert rc == 0, err
    for i in (0, 1):
        assert f"==> logs/worker-{i}.stdout <==\nworker {i} attempt 2 line 4\nworker {i} attempt 2 line 5\n" in out
        # (what the executor adds after a stopped task may end stderr: only its titles are sure)
        assert f"==> logs/worker-{i}.stderr <==\n" in out
    assert len(out.splitlines()) == 4 + 2 * 2 + 2 * 2

    rc, out, err = cli("logs", restarted_job, "--role", "worker", "--index", "0", "--attempt", "1", "--tail", "1")
    assert rc == 0, err
    assert "==> logs/worker-0.stdout <==\nworker 0 attempt 0 line 5\n" in out
    assert len(out.splitlines()) == 4

    rc, out, err = cli("logs", restarted_job, "--tail", "1")  # the AM's log too: its last line
    assert rc == 0, err
    assert out.startswith("==> am.log <==\n") and len(lines_of(out, "INFO")) == 1


@pytest.mark.local
def test_tail_with_follow_prints_the_last_lines_then_what_comes(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path, """\
        name: follow-tail
        roles:
          worker:
            command: >-
              for i in $(seq 100); do echo "early $i"; done;
              while [ ! -e go ]; do sleep 0.1; done; echo late; sleep 0.5
    """)
    rc, out, err = cli("run", str(job), "--backend", "local", "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    log = subm_home / "local" / app_id / "logs" / "worker-0.stdout"
    wait_for(lambda: log.exists() and "early 100" in log.read_text(), timeout=60, what="the early lines")
    follower = start_subm("logs", app_id, "--role", "worker", "--tail", "3", "--follow")
    time.sleep(1.5)
    (subm_home / "local" / app_id / "tasks" / "worker-0" / "go").touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    shown = [line for line in out.splitlines() if line.startswith(("early", "late"))]
    assert shown == ["early 98", "early 99", "early 100", "late"], out


# -- the YARN side, its ResourceManager and NodeManagers stood in for (unit) ------------------------

class FakeYarn:
    """An application whose AM attempt 1 was lost: attempt 2 restarted the gang in new
    containers. Files live in ``files[(container, name)]``; the RM lists both AM attempts."""

    def __init__(self):
        from submarine_py.report import JobReport, TaskReport

        self.files = {
            ("am_1", "application.driver.log"): b"gang ready: all 1 tasks registered (attempt 1)\n",
            ("am_2", "application.driver.log"): b"the ApplicationMaster was lost\ngang ready (attempt 2)\n",
            ("w0_old", "stdout"): (header(1) + "old 1\nold 2\n").encode(),
            ("w0_old", "stderr"): header(1).encode(),
            ("w0_new", "stdout"): (header(2) + "new 1\nnew 2\nnew 3\n").encode(),
            ("w0_new", "stderr"): header(2).encode(),
        }
        saved = JobReport(app_id="application_1_1", tasks=(
            TaskReport(role="worker", index=0, container_id="w0_old", node_http="nm1:8042"),))
        self.files[("am_1", "subm-report.json")] = json.dumps(saved.to_dict()).encode()
        self.report = JobReport(app_id="application_1_1", final=True, tasks=(
            TaskReport(role="worker", index=0, attempt=2, container_id="w0_new", node_http="nm2:8042"),))
        self.rm = self
        self.reads = []

    def status(self, app_id):
        return self.report

    def app_attempts(self, app_id):
        return [{"id": 1, "containerId": "am_1", "nodeHttpAddress": "nm1:8042"},
                {"id": 2, "containerId": "am_2", "nodeHttpAddress": "nm2:8042"}]

    def install(self, monkeypatch):
        from submarine_py.backends.yarn.client import app_logs

        def sizes(node, cid, timeout=10.0):
            return {name: len(data) for (c, name), data in self.files.items() if c == cid} or None

        def stream(node, cid, name, offset, write, known_size=None, timeout=10.0):
            data = self.files.get((cid, name))
            if data is None:
                return None
            self.reads.append((cid, name, offset))
            if data[offset:]:
                write(data[offset:])
            return len(data)

        def node_log(node, cid, name, timeout=10.0):
            return self.files.get((cid, name))

        monkeypatch.setattr(app_logs, "node_log_sizes", sizes)
        monkeypatch.setattr(app_logs, "stream_node_log", stream)
        monkeypatch.setattr(app_logs, "node_log", node_log)


def yarn_logs(monkeypatch, **options) -> str:
    from submarine_py.backends.yarn.client.app_logs import write_app_logs

    yarn = FakeYarn()
    yarn.install(monkeypatch)
    out = io.StringIO()
    write_app_logs(yarn, "application_1_1", out, **options)
    return out.getvalue()


@pytest.mark.unit
def test_on_yarn_every_am_attempts_log_comes_first_then_each_tasks_containers_oldest_first(monkeypatch):
    out = yarn_logs(monkeypatch)
    assert [line for line in out.splitlines() if line.startswith("==> ")] == [
        "==> ApplicationMaster attempt 1 (am_1) <==", "==> ApplicationMaster attempt 2 (am_2) <==",
        "==> worker:0 stdout (w0_old) <==", "==> worker:0 stderr (w0_old) <==",
        "==> worker:0 stdout (w0_new) <==", "==> worker:0 stderr (w0_new) <=="]
    assert "the ApplicationMaster was lost" in out and "old 2" in out and "new 3" in out


@pytest.mark.unit
def test_on_yarn_attempt_n_reads_the_lost_attempts_containers(monkeypatch):
    out = yarn_logs(monkeypatch, role="worker", attempt=1)
    assert "==> worker:0 stdout (w0_old) <==" in out and "old 2" in out
    assert "w0_new" not in out and "new 1" not in out and "ApplicationMaster" not in out
    with pytest.raises(JobNotFoundError, match="no attempt 3 in the task logs of application_1_1; "
                                               "they hold attempts 1, 2"):
        yarn_logs(monkeypatch, role="worker", attempt=3)


@pytest.mark.unit
def test_on_yarn_tail_reads_each_files_end(monkeypatch):
    out = yarn_logs(monkeypatch, index=0, tail=1)
    assert "==> worker:0 stdout (w0_old) <==\nold 2\n" in out
    assert "==> worker:0 stdout (w0_new) <==\nnew 3\n" in out
    assert "==> worker:0 stderr (w0_new) <==\n" + header(2) in out
    assert "ApplicationMaster" not in out  # an index given: tasks only
