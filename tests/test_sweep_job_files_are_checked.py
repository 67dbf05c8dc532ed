"""A job file's ``sweep`` section: what it may hold, how a mistake is named, and that it
reads back unchanged (docs/sweeps.md)."""
import pytest

from conftest import cli, write_job
from submarine_py.errors import SpecError
from submarine_py.jobfile.validate import spec_from_dict

pytestmark = pytest.mark.unit

ROLES = {"worker": {"command": "python3 train.py --lr $SUBM_PARAM_LR"}}
ISSUE_EXAMPLE = {
    "metric": "val_loss", "goal": "minimize", "algorithm": "tpe", "trials": 50, "parallel": 4, "seed": 1,
    "early_stop": {"rule": "median", "warmup_steps": 2},
    "params": {"lr": {"low": 1.0e-4, "high": 0.1, "log": True}, "layers": [1, 2, 3]},
}


def spec(sweep, roles=None, **more):
    return spec_from_dict({"name": "s", "roles": roles or ROLES, "sweep": sweep, **more})


def problems(sweep, roles=None, **more):
    with pytest.raises(SpecError) as exc:
        spec(sweep, roles, **more)
    return dict(exc.value.problems)


def test_the_issues_example_is_a_valid_sweep_and_reads_back_unchanged():
    s = spec(ISSUE_EXAMPLE)
    sw = s.sweep
    assert (sw.metric, sw.goal, sw.algorithm, sw.trials, sw.parallel, sw.seed) == ("val_loss", "minimize", "tpe", 50, 4, 1)
    assert sw.params["lr"].log and sw.params["lr"].low == 1.0e-4 and not sw.params["lr"].whole
    assert sw.params["layers"].choices == (1, 2, 3)
    assert sw.early_stop.warmup_steps == 2 and sw.max_failed_trials == 3
    assert spec_from_dict(s.to_dict()) == s


def test_defaults_minimize_with_tpe_one_trial_at_a_time_and_no_early_stopping():
    sw = spec({"metric": "loss", "trials": 3, "params": {"n": {"low": 1, "high": 9}}}).sweep
    assert (sw.goal, sw.algorithm, sw.parallel, sw.seed, sw.early_stop) == ("minimize", "tpe", 1, None, None)
    assert sw.params["n"].whole  # both ends whole numbers: a range of whole numbers


def test_each_mistake_is_named_by_its_field():
    found = problems({"metric": "val loss", "goal": "minimise", "trials": 0, "parallel": 0, "seed": -1,
                      "early_stop": {"rule": "mean"}, "max_failed_trials": -1, "colour": 1,
                      "params": {"lr": {"low": 0.1, "high": 0.01}, "LR": [1], "m": {"low": 0, "high": 1, "log": True},
                                 "k": [], "d": [1, 1], "1x": [1]}})
    assert set(found) >= {"sweep.metric", "sweep.goal", "sweep.trials", "sweep.parallel", "sweep.seed",
                          "sweep.early_stop.rule", "sweep.max_failed_trials", "sweep.colour", "sweep.params.lr",
                          "sweep.params.LR", "sweep.params.m.low", "sweep.params.k", "sweep.params.d", "sweep.params.1x"}
    assert "SUBM_PARAM_LR" in found["sweep.params.LR"]
    assert "low < high" in found["sweep.params.lr"]


def test_random_and_tpe_need_a_number_of_trials():
    assert "is required" in problems({"metric": "m", "algorithm": "random", "params": {"a": [1, 2]}})["sweep.trials"]


def test_a_grid_takes_lists_and_runs_each_point_once_by_default():
    sw = spec({"metric": "m", "algorithm": "grid", "params": {"a": [1, 2, 3], "b": ["x", "y"]}}).sweep
    assert sw.trials == 6
    assert "range" in problems({"metric": "m", "algorithm": "grid", "params": {"a": {"low": 0, "high": 1}}})["sweep.params.a"]
    assert "6 point" in problems({"metric": "m", "algorithm": "grid", "trials": 7,
                                  "params": {"a": [1, 2, 3], "b": ["x", "y"]}})["sweep.trials"]


def test_a_trial_may_be_a_gang_of_several_tasks_but_runs_no_tensorboard():
    s = spec({"metric": "m", "trials": 2, "params": {"a": [1, 2]}}, roles={"worker": {"command": "x", "instances": 2}})
    assert s.roles["worker"].instances == 2
    found = problems({"metric": "m", "trials": 2, "params": {"a": [1, 2]}}, tensorboard={})
    assert "TensorBoard" in found["sweep"]


def test_subm_validate_refuses_a_bad_sweep_with_exit_2_naming_the_field(tmp_path):
    job = write_job(tmp_path, """\
        name: s
        roles: {worker: {command: "python3 t.py"}}
        sweep: {metric: loss, trials: 4, params: {lr: {low: 1, high: 0}}}
        """)
    code, out, err = cli("validate", str(job))
    assert code == 2 and "sweep.params.lr: expected low < high" in err


def test_subm_validate_says_what_each_trial_gets(tmp_path):
    job = write_job(tmp_path, """\
        name: s
        roles: {worker: {command: "python3 t.py --lr $SUBM_PARAM_LR"}}
        sweep: {metric: loss, trials: 4, parallel: 2, params: {lr: {low: 0.001, high: 0.1, log: true}, n: [1, 2]}}
        """)
    code, out, err = cli("validate", str(job))
    assert code == 0, err
    assert "Sweep: 4 trials, 2 at a time, tpe" in out
    assert "SUBM_TRIAL and SUBM_PARAM_LR (0.001..0.1 (log)), SUBM_PARAM_N ([1, 2])" in out
