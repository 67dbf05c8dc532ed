"""Each progress line of ``subm run`` carries the time of what it shows, in seconds since
submission: an AM decision its own time, a state the time the AM reported it (an ended job: its
end), never the moment the client happened to poll. So the lines agree with each other and with
the AM's own figures ("gang ready: ... 7.2 s after submission" is at [   7.2s])."""
import re

import pytest

from conftest import subm, write_job
from submarine_py.output import format_events, format_progress
from submarine_py.report import Event, JobReport, TaskReport, Timings
from submarine_py.states import JobState, Phase, TaskState

SUBMITTED = 1_800_000_000.0


def running(**kw):
    tasks = (TaskReport("worker", 0, state=TaskState.RUNNING), TaskReport("worker", 1, state=TaskState.RUNNING))
    return JobReport(app_id="application_1_1", state=JobState.RUNNING, phase=Phase.RUNNING, submitted_at=SUBMITTED,
                     running=2, total=2, tasks=tasks, **kw)


@pytest.mark.unit
def test_a_state_is_timed_when_the_am_reported_it_not_when_the_client_saw_it():
    # The AM made the report 7.0 s after submission; a slow poll read it at 9.4 s.
    report = running(timings=Timings(gang_ready_seconds=6.8, total_seconds=7.0))
    assert format_progress(report, 9.4) == "[   7.0s] attempt 1: 2/2 tasks running, 0 succeeded"


@pytest.mark.unit
def test_an_ended_job_is_timed_at_its_end():
    tasks = (TaskReport("worker", 0, state=TaskState.STOPPED), TaskReport("worker", 1, state=TaskState.FAILED,
                                                                          exit_code=3))
    ended = JobReport(app_id="application_1_1", state=JobState.FAILED, phase=Phase.DONE, submitted_at=SUBMITTED,
                      finished_at=SUBMITTED + 12.5, total=2, tasks=tasks, final=True,
                      timings=Timings(total_seconds=12.5))
    # Read 30 s after submission (the client was away): still the end's time.
    assert format_progress(ended, 30.0) == ("[  12.5s] attempt 1: 0/2 tasks running, 0 succeeded, "
                                            "failed: worker:1 (exit 3); job FAILED, stopping")


@pytest.mark.unit
def test_before_the_am_answers_the_client_counts_itself():
    waiting = JobReport(app_id="application_1_1", state=JobState.ACCEPTED)
    assert format_progress(waiting, 1.3) == "[   1.3s] ACCEPTED: waiting for the ApplicationMaster"


@pytest.mark.unit
def test_decisions_are_timed_from_the_submission_the_report_names():
    events = [Event(SUBMITTED + 7.24, "gang ready: all 2 tasks registered (attempt 1), 7.2 s after submission"),
              Event(SUBMITTED + 9.0, "worker:1 failed with exit code 3 (attempt 1)")]
    assert format_events(events, SUBMITTED) == [
        "[   7.2s] AM: gang ready: all 2 tasks registered (attempt 1), 7.2 s after submission",
        "[   9.0s] AM: worker:1 failed with exit code 3 (attempt 1)"]


# worker:1 fails in the first attempt, after both have run a while; the second attempt succeeds.
FAILS_ONCE = """\
import os, sys, time
time.sleep(1.0)
sys.exit(3 if os.environ["SUBM_ATTEMPT"] == "0" and os.environ["SUBM_INDEX"] == "1" else 0)
"""
LINE = re.compile(r"^\[ *([\d.]+)s\] (.*)$")


def tenths(seconds: float) -> int:
    """A line's time in the tenths of a second it shows (2.6 - 2.5 is 0.10000000000000009 in floats)."""
    return round(seconds * 10)


@pytest.mark.local
def test_a_jobs_progress_lines_agree_with_the_am(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: timed
        restart: {policy: gang, max_restarts: 1}
        roles:
          worker: {instances: 2, command: python task.py}
        files: {task.py: task.py}
    """, {"task.py": FAILS_ONCE})
    rc, out, err = subm("run", str(job), "--backend", "local")
    no_leftovers.append(re.search(r"(local_\S+)\)", out).group(1))
    assert rc == 0, err
    lines = [(float(m.group(1)), m.group(2)) for m in map(LINE.match, err.splitlines()) if m]
    times = [t for t, _ in lines]
    # In the order printed, time never goes back (0.1 s: the lines' rounding).
    assert all(tenths(b) >= tenths(a) - 1 for a, b in zip(times, times[1:])), err
    # The gang-ready decision sits at the time it states.
    ready, what = next((t, w) for t, w in lines if w.startswith("AM: gang ready") and "after submission" in w)
    assert abs(tenths(ready) - tenths(float(re.search(r"([\d.]+) s after submission", what).group(1)))) <= 1, err
    # The failure and the restart come after the first attempt ran its second; the last state
    # line is the job's end, when the AM decided it.
    failed = next(t for t, w in lines if w.startswith("AM: worker:1 failed"))
    assert failed >= ready + 0.9, err
    end = next(t for t, w in lines if w == "AM: job SUCCEEDED")
    assert lines[-1][1].endswith("job SUCCEEDED, stopping") and abs(tenths(lines[-1][0]) - tenths(end)) <= 1, err
