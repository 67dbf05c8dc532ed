"""A trial's metric printed in its first milliseconds is its result (issue 31, point 4).

The executor reads a trial's stdout every quarter of a second and sends the lines naming the
metric to the AM (``POST /v1/metric``); at the trial's end it sends what it had not read yet
with the exit (``POST /v1/exit``). A result printed without a step, read by a scan before the
executor saw the trial exit, was sent as an intermediate value, which the AM kept only with a
step: the exit then carried no line, and the trial FAILED with "it exited with code 0 but
printed no score=... line" though its stdout held it. On a loaded node a trial that prints and
exits at once can be scanned between the two; a trial that prints and then takes a moment to
end always is, which makes the race deterministic here.
"""
from pathlib import Path

import pytest

from conftest import run_json, write_job

SCORE = "import os; print('score=%s' % os.environ['SUBM_PARAM_X'], flush=True)"


def sweep(tmp_path: Path, command: str, xs=(1, 2, 3, 4, 5, 6)) -> dict:
    job = write_job(tmp_path, f"""\
        name: metric-at-once
        roles:
          worker:
            command: {command}
        sweep:
          metric: score
          goal: maximize
          algorithm: grid
          parallel: 2
          params:
            x: [{", ".join(str(x) for x in xs)}]
        """)
    code, report, err = run_json("run", str(job), timeout=240)
    assert code == 0 and report["state"] == "SUCCEEDED", (report.get("diagnostics"), err)
    return report


def assert_every_trial_kept_its_score(report: dict, xs) -> None:
    trials = sorted(report["trials"], key=lambda t: t["params"]["x"])
    assert [(t["state"], t["value"]) for t in trials] == [("SUCCEEDED", float(x)) for x in xs], trials


@pytest.mark.local
def test_trials_that_print_their_score_and_exit_at_once_each_keep_it(tmp_path):
    xs = (1, 2, 3, 4, 5, 6)
    report = sweep(tmp_path, f'python3 -c "{SCORE}"', xs)
    assert_every_trial_kept_its_score(report, xs)


@pytest.mark.local
def test_a_score_read_while_the_trial_still_runs_is_its_result(tmp_path):
    # Printed at once, then a moment before the end: the executor's scan reads the line first.
    xs = (1, 2, 3)
    report = sweep(tmp_path, f'python3 -c "{SCORE}; import time; time.sleep(0.8)"', xs)
    assert_every_trial_kept_its_score(report, xs)


@pytest.mark.unit
def test_lines_the_am_did_not_take_are_sent_again_with_the_exit(tmp_path):
    from submarine_py.executor.trial_metric import TrialMetric

    out = tmp_path / "stdout"
    out.write_bytes(b"[subm] header\n")
    metric = TrialMetric("score", str(out), out.stat().st_size)

    class BusyAM:
        calls = []

        def call(self, method, path, body, **kw):
            self.calls.append(body)
            raise ConnectionError("the AM is busy")

    said = []
    with out.open("ab") as f:
        f.write(b"score=0.5\n")
    metric.send(BusyAM(), "ex-1", 0, said.append)
    assert BusyAM.calls and BusyAM.calls[0]["lines"] == ["score=0.5"] and said
    assert metric.lines(final=True) == ["score=0.5"]  # what the exit carries
