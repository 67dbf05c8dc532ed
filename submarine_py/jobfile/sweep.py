"""The job file's ``sweep`` section: its validating walk (the spec's dataclasses are in
``model.py``: :class:`SweepSpec`, :class:`ParamSpec`, :class:`EarlyStopSpec`).

Called by ``validate.Builder.job`` with the builder, so that a sweep's problems are reported
with the rest of the job file's, each with its path (``sweep.params.lr.low: ...``).
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, Mapping, Optional

from ..executor import protocol
from .fields import show
from .model import EarlyStopSpec, JobSpec, ParamSpec, RoleSpec, SweepSpec
from .reader import FieldReader


SWEEP_FIELDS = ("metric", "goal", "algorithm", "trials", "parallel", "seed", "early_stop", "params",
                "max_failed_trials")
GOALS = ("minimize", "maximize")
ALGORITHMS = ("grid", "random", "tpe")
EARLY_STOP_RULES = ("median",)
#: A parameter's name: its variable is ``SUBM_PARAM_`` + the name in upper case.
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
#: A metric's name as a trial prints it (``val_loss=0.42``): see ``submarine_py.metrics``.
METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]{0,127}\Z")
MAX_TRIALS, MAX_PARALLEL, MAX_CHOICES = 100_000, 1000, 1000
DEFAULT_MAX_FAILED_TRIALS = 3
#: The prefix of a parameter's variable in a trial's environment.
PARAM_PREFIX = protocol.PARAM_PREFIX


def param_variable(name: str) -> str:
    """The environment variable that carries parameter ``name`` to a trial (``lr`` -> ``SUBM_PARAM_LR``)."""
    return PARAM_PREFIX + name.upper()


def grid_size(params: Mapping[str, ParamSpec]) -> int:
    return math.prod(len(p.choices) for p in params.values())


def sweep(b: FieldReader, value: Any) -> Optional[SweepSpec]:
    """``sweep``: validated into a :class:`SweepSpec` (None without the field)."""
    if value is None:
        return None
    d = b.mapping(value, "sweep", SWEEP_FIELDS)
    if not d:
        if not isinstance(value, dict) or not value:
            b.fail("sweep", "expected a mapping with at least metric, params and trials")
        return None
    metric = b.string(d.get("metric"), "sweep.metric", required=True) or ""
    if metric and not METRIC_NAME.match(metric):
        b.fail("sweep.metric", f"expected a name a trial prints as NAME=value (a letter or '_', then letters, "
                               f"digits, '_', '.', '-' or '/'), got {metric!r}")
    goal = b.choice(d.get("goal"), "sweep.goal", GOALS, "minimize")
    algorithm = b.choice(d.get("algorithm"), "sweep.algorithm", ALGORITHMS, "tpe")
    params = _params(b, d.get("params"))
    trials_raw = d.get("trials")
    if algorithm == "grid":
        ranges = [n for n, p in params.items() if p.is_range]
        for name in ranges:
            b.fail(f"sweep.params.{name}", "algorithm grid takes lists of values; this is a range "
                                           "(use random or tpe, or list the values)")
        size = grid_size(params) if params and not ranges else 0
        trials = b.integer(trials_raw, "sweep.trials", 1, size or 1, maximum=MAX_TRIALS)
        if size and trials > size:
            b.fail("sweep.trials", f"the grid has {size} point(s); expected at most {size}, got {trials}")
    else:
        if trials_raw is None:
            b.fail("sweep.trials", f"is required with algorithm {algorithm}: how many trials to run")
        trials = b.integer(trials_raw, "sweep.trials", 1, 1, maximum=MAX_TRIALS)
    parallel = b.integer(d.get("parallel"), "sweep.parallel", 1, 1, maximum=MAX_PARALLEL)
    seed_raw = d.get("seed")
    seed = None if seed_raw is None else b.integer(seed_raw, "sweep.seed", 0, 0, maximum=2 ** 32 - 1)
    max_failed = b.integer(d.get("max_failed_trials"), "sweep.max_failed_trials", 0,
                           DEFAULT_MAX_FAILED_TRIALS, maximum=MAX_TRIALS)
    early = _early_stop(b, d.get("early_stop")) if "early_stop" in d else None
    return SweepSpec(metric=metric, params=params, trials=trials, goal=goal, algorithm=algorithm,
                     parallel=parallel, seed=seed, early_stop=early, max_failed_trials=max_failed)


def _early_stop(b: FieldReader, value: Any) -> Optional[EarlyStopSpec]:
    if value is None:
        return EarlyStopSpec()
    d = b.mapping(value, "sweep.early_stop", ("rule", "warmup_steps", "startup_trials"))
    rule = b.choice(d.get("rule"), "sweep.early_stop.rule", EARLY_STOP_RULES, "median")
    warmup = b.integer(d.get("warmup_steps"), "sweep.early_stop.warmup_steps", 0, 0, maximum=10 ** 9)
    startup = b.integer(d.get("startup_trials"), "sweep.early_stop.startup_trials", 0, 5, maximum=MAX_TRIALS)
    return EarlyStopSpec(rule=rule, warmup_steps=warmup, startup_trials=startup)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _params(b: FieldReader, value: Any) -> Dict[str, ParamSpec]:
    if not isinstance(value, dict) or not value:
        b.fail("sweep.params", f"expected a mapping of name: range or list (e.g. lr: {{low: 0.001, high: 0.1, "
                               f"log: true}}, layers: [1, 2, 3]), got {show(value)}")
        return {}
    out: Dict[str, ParamSpec] = {}
    variables: Dict[str, str] = {}
    for name, raw in value.items():
        path = f"sweep.params.{name}"
        if not isinstance(name, str) or not PARAM_NAME.match(name):
            b.fail(path, f"a parameter's name is a letter or '_' then letters, digits or '_' (its variable "
                         f"is SUBM_PARAM_<NAME>), got {show(name)}")
            continue
        var = param_variable(name)
        if var in variables:
            b.fail(path, f"has the same variable ({var}) as parameter '{variables[var]}'; names must differ "
                         "in more than case")
            continue
        variables[var] = name
        param = _param(b, raw, path)
        if param is not None:
            out[name] = param
    return out


def _param(b: FieldReader, raw: Any, path: str) -> Optional[ParamSpec]:
    if isinstance(raw, list):
        if not raw or len(raw) > MAX_CHOICES:
            b.fail(path, f"expected a list of 1 to {MAX_CHOICES} values, got {len(raw)}")
            return None
        ok = True
        for i, v in enumerate(raw):
            if not isinstance(v, (str, int, float)) or (isinstance(v, float) and not math.isfinite(v)):
                b.fail(f"{path}[{i}]", f"expected a string, number or true/false, got {show(v)}")
                ok = False
            elif isinstance(v, str) and "\x00" in v:
                b.fail(f"{path}[{i}]", "must not contain a NUL character")
                ok = False
        if ok and len({(type(v), v) for v in raw}) != len(raw):
            b.fail(path, "lists a value more than once")
            ok = False
        return ParamSpec(choices=tuple(raw)) if ok else None
    if not isinstance(raw, dict):
        b.fail(path, f"expected a range {{low: ..., high: ..., log: true|false}} or a list of values, got {show(raw)}")
        return None
    d = b.mapping(raw, path, ("low", "high", "log"))
    low, high, log = d.get("low"), d.get("high"), d.get("log", False)
    ok = True
    for key, v in (("low", low), ("high", high)):
        if not _number(v):
            b.fail(f"{path}.{key}", f"expected a number, got {show(v)}")
            ok = False
    if not isinstance(log, bool):
        b.fail(f"{path}.log", f"expected true or false, got {show(log)}")
        ok = False
    if not ok:
        return None
    if not low < high:
        b.fail(path, f"expected low < high, got low {low!r} and high {high!r}")
        return None
    if log and low <= 0:
        b.fail(f"{path}.low", f"a log range must be above 0, got {low!r}")
        return None
    return ParamSpec(low=low, high=high, log=log)


def task_problem(roles: Mapping[str, RoleSpec], spec: JobSpec) -> Optional[str]:
    """Why the job's tasks cannot be a sweep's trial (None: they can): each trial runs the job's
    tasks (one, or a gang of several) on containers that take trial after trial."""
    if spec.tensorboard is not None:
        return "a sweep runs no TensorBoard task; remove the tensorboard field (trials may still write logs)"
    return None
