"""A sweep's search (``am/sweep/search.py``, Optuna's ask/tell): the parameters each trial gets, early
stopping, failures, the best so far, and a study resumed by a new ApplicationMaster; and the
``name=value`` lines trials print (``submarine_py.metrics``)."""
import pytest

from submarine_py.am.sweep.search import Search, load_trials, save_trials, trial_env
from submarine_py.jobfile.validate import spec_from_dict
from submarine_py.metrics import parse_line, report_metric, values_of
from submarine_py.states import TrialState

pytestmark = pytest.mark.unit


def sweep(**kw):
    raw = {"metric": "loss", "trials": 6, "seed": 7, "params": {"x": {"low": -5.0, "high": 5.0}, "n": [1, 2, 3]}}
    raw.update(kw)
    return spec_from_dict({"name": "s", "roles": {"w": {"command": "c"}}, "sweep": raw}).sweep


def run(search, objective, steps=0):
    """Run every trial the search gives, reporting ``steps`` intermediate values; returns them."""
    while search.remaining():
        t = search.ask("c1", "h")
        stopped = False
        for step in range(steps):
            if search.report(t.number, objective(t.params) + 1 / (step + 1), step):
                search.finish(t.number, TrialState.PRUNED, diagnostics="stopped early")
                stopped = True
                break
        if not stopped:
            search.finish(t.number, TrialState.SUCCEEDED, objective(t.params))
    return search.report_of()


def quadratic(p):
    return (p["x"] - 2) ** 2 + (p["n"] - 2) ** 2


def test_the_same_seed_gives_the_same_trials():
    a, b = run(Search(sweep()), quadratic), run(Search(sweep()), quadratic)
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    assert len(a.trials) == 6 and all(t.state == TrialState.SUCCEEDED for t in a.trials)


def test_the_best_is_the_lowest_value_to_minimize_and_the_highest_to_maximize():
    low = run(Search(sweep()), quadratic)
    assert low.best.value == min(t.value for t in low.trials)
    high = run(Search(sweep(goal="maximize")), quadratic)
    assert high.best.value == max(t.value for t in high.trials)


def test_a_grid_runs_every_point_once():
    s = sweep(algorithm="grid", trials=None, params={"a": [1, 2], "b": ["u", "v", "w"]})
    report = run(Search(s), lambda p: p["a"])
    assert sorted((t.params["a"], t.params["b"]) for t in report.trials) == [
        (a, b) for a in (1, 2) for b in ("u", "v", "w")]


def test_early_stopping_stops_trials_worse_than_the_median_and_keeps_the_best():
    s = sweep(algorithm="random", trials=30, early_stop={"warmup_steps": 1, "startup_trials": 3})
    stopped = run(Search(s), quadratic, steps=6)
    full = run(Search(sweep(algorithm="random", trials=30)), quadratic, steps=6)
    pruned = [t for t in stopped.trials if t.state == TrialState.PRUNED]
    assert pruned and all(t.step is not None and t.step < 5 for t in pruned)
    assert not any(t.state == TrialState.PRUNED for t in full.trials)
    assert stopped.best.value == full.best.value  # same seed, same trials: the best was never stopped


def test_failures_are_counted_and_a_lost_containers_trial_runs_again():
    search = Search(sweep())
    t = search.ask("c1", "h")
    search.finish(t.number, TrialState.FAILED, diagnostics="exit code 1")
    u = search.ask("c1", "h")
    search.finish(u.number, TrialState.FAILED, diagnostics="its container ended", requeue=True)
    assert search.failed() == 1  # the lost container's trial is not the program's failure
    again = search.ask("c2", "h")
    assert again.params == u.params and search.remaining() == 6 - 2


def test_a_new_am_resumes_the_study_without_losing_finished_trials(tmp_path):
    first = Search(sweep())
    done = first.ask("c1", "h")
    first.finish(done.number, TrialState.SUCCEEDED, 3.0)
    running = first.ask("c2", "h")
    path = str(tmp_path / "trials.json")
    save_trials(path, list(first.report_of().trials))
    second = Search(sweep(), load_trials(path))
    assert second.trials[done.number].value == 3.0
    assert running.number not in second.trials  # it was running: it runs again
    again = second.ask("c3", "h")
    assert again.params == running.params and again.number == running.number + 1
    assert second.remaining() == 6 - 2


def test_a_trial_gets_its_number_and_parameters_in_its_environment():
    assert trial_env(4, {"lr": 0.01, "layers": 2, "adam": True}) == {
        "SUBM_TRIAL": "4", "SUBM_PARAM_LR": "0.01", "SUBM_PARAM_LAYERS": "2", "SUBM_PARAM_ADAM": "true"}


def test_trials_report_name_value_lines_with_an_optional_step(capsys):
    report_metric("val_loss", 0.5, step=3)
    report_metric("acc", 1)
    out = capsys.readouterr().out.splitlines()
    assert out == ["val_loss=0.5 step=3", "acc=1.0"]
    assert parse_line("epoch 3: step=3 val_loss=0.42, acc=0.9 note=fine") == ({"val_loss": 0.42, "acc": 0.9}, 3)
    assert values_of("val_loss", out + ["val_loss=0.1"]) == [(0.5, 3), (0.1, None)]
