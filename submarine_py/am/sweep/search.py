"""A sweep's search: which parameters the next trial gets, whether a running trial stops early,
and the trials so far (Optuna's ask/tell; see docs/sweeps.md).

Explicit inputs only (the job's :class:`SweepSpec` and the trials an earlier AM finished), no
containers and no clock of its own: the sweep's AM (``sweep/master.py``) asks it
:meth:`Search.ask` when a container is free, tells it each intermediate value
(:meth:`Search.report`, which answers whether to stop the trial) and each end
(:meth:`Search.finish`). Optuna is imported here only, when a sweep runs.
"""
from __future__ import annotations

import itertools
import json
import logging
import math
import os
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import SubmarineError
from ...executor import protocol
from ...jobfile.model import SweepSpec
from ...jobfile.sweep import param_variable
from ...report import SweepReport, TrialReport
from ...states import TrialState

log = logging.getLogger("subm.am")

#: The file in the job's shared folder holding the trials so far (what a new AM resumes from).
STUDY_FILE = "sweep-trials.json"


class OptunaMissing(SubmarineError, ImportError):
    """A sweep needs Optuna where its ApplicationMaster runs."""


def require_optuna() -> Any:
    """The ``optuna`` module, or a clear error saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise OptunaMissing("a job with a sweep section needs Optuna where its ApplicationMaster runs: "
                            "pip install 'submarine-py[sweep]' (or pip install optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def trial_env(number: int, params: Dict[str, Any]) -> Dict[str, str]:
    """What a trial finds in its environment: ``SUBM_TRIAL`` and ``SUBM_PARAM_<NAME>`` each."""
    env = {protocol.TRIAL: str(number)}
    for name, value in params.items():
        env[param_variable(name)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return env


class Search:
    """The study: Optuna's sampler and pruner over the sweep's parameters, and our trials."""

    def __init__(self, spec: SweepSpec, earlier: Sequence[TrialReport] = ()):
        optuna = self.optuna = require_optuna()
        self.spec = spec
        self.distributions = self._distributions()
        sampler: Any
        # The grid is ours: each point enqueued in order (Optuna's GridSampler stops the study
        # from inside its optimize loop, which ask/tell has not).
        if spec.algorithm in ("random", "grid"):
            sampler = optuna.samplers.RandomSampler(seed=spec.seed)
        else:
            sampler = optuna.samplers.TPESampler(seed=spec.seed)
        early = spec.early_stop
        pruner = (optuna.pruners.MedianPruner(n_startup_trials=early.startup_trials,
                                              n_warmup_steps=early.warmup_steps)
                  if early is not None else optuna.pruners.NopPruner())
        self.study = optuna.create_study(direction=spec.goal, sampler=sampler, pruner=pruner)
        #: Every trial so far by number (the report's), and Optuna's trial of each running one.
        self.trials: Dict[int, TrialReport] = {}
        self.live: Dict[int, Any] = {}
        self.next_number = 0
        for t in earlier:
            self._replay(t)
        if spec.algorithm == "grid":
            done = [dict(t.params) for t in self.trials.values()]
            for point in itertools.product(*(p.choices for p in spec.params.values())):
                params = dict(zip(spec.params, point))
                if params in done:
                    done.remove(params)
                else:
                    self.study.enqueue_trial(params, skip_if_exists=False)

    def _distributions(self) -> Dict[str, Any]:
        d = self.optuna.distributions
        out: Dict[str, Any] = {}
        for name, p in self.spec.params.items():
            if p.choices:
                out[name] = d.CategoricalDistribution(list(p.choices))
            elif p.whole:
                out[name] = d.IntDistribution(int(p.low), int(p.high), log=p.log)
            else:
                out[name] = d.FloatDistribution(float(p.low), float(p.high), log=p.log)
        return out

    def _replay(self, t: TrialReport) -> None:
        """A trial an earlier AM ran: a finished one goes back into the study as it ended; one
        that was running when that AM was lost runs again, with the same parameters."""
        self.next_number = max(self.next_number, t.number + 1)
        if t.state == TrialState.RUNNING or t.state == TrialState.STOPPED:
            if self.spec.algorithm != "grid":  # a grid enqueues every point not done
                self.study.enqueue_trial(dict(t.params), skip_if_exists=False)
            return
        state = {TrialState.SUCCEEDED: self.optuna.trial.TrialState.COMPLETE,
                 TrialState.PRUNED: self.optuna.trial.TrialState.PRUNED}.get(t.state, self.optuna.trial.TrialState.FAIL)
        try:
            self.study.add_trial(self.optuna.trial.create_trial(
                params=dict(t.params), distributions=self.distributions, state=state,
                value=t.value if state == self.optuna.trial.TrialState.COMPLETE else None,
                intermediate_values=dict(t.intermediate)))
        except ValueError as exc:  # the job file's params changed since: keep it in our record only
            log.warning("trial %d of the earlier attempt does not fit the study (%s): kept in the report only",
                        t.number, exc)
        self.trials[t.number] = t

    # -- what the AM asks -----------------------------------------------------------------------
    @property
    def started(self) -> int:
        """Trials that count towards ``sweep.trials``: all but those re-run for a lost container."""
        return sum(1 for t in self.trials.values() if not t.diagnostics.startswith(REQUEUED))

    def remaining(self) -> int:
        """Trials still to start (a re-run of a lost one among them: Optuna asks its parameters first)."""
        return max(0, self.spec.trials - self.started)

    def ask(self, container: str, host: Optional[str]) -> TrialReport:
        """The next trial, started now in ``container``."""
        trial = self.study.ask(self.distributions)
        number = self.next_number
        self.next_number += 1
        self.live[number] = trial
        record = TrialReport(number=number, params=dict(trial.params), container=container, host=host,
                             started_at=round(time.time(), 3))
        self.trials[number] = record
        return record

    def report(self, number: int, value: float, step: int) -> bool:
        """An intermediate value of a running trial; True: stop it early (the rule says so)."""
        trial, record = self.live.get(number), self.trials.get(number)
        if trial is None or record is None or not math.isfinite(value):
            return False
        if step not in record.intermediate:
            trial.report(value, step)
        self.trials[number] = replace(record, value=value, step=step,
                                      intermediate={**record.intermediate, step: value})
        return self.spec.early_stop is not None and trial.should_prune()

    def finish(self, number: int, state: TrialState, value: Optional[float] = None, diagnostics: str = "",
               requeue: bool = False) -> TrialReport:
        """A trial's end. ``requeue``: its container was lost by the cluster's doing: it is not
        counted, and a new trial runs its parameters again."""
        record = self.trials[number]
        trial = self.live.pop(number, None)
        ot = self.optuna.trial.TrialState
        if trial is not None:
            if state == TrialState.SUCCEEDED and value is not None and not math.isnan(value):
                self.study.tell(trial, value)
            elif state == TrialState.PRUNED:
                self.study.tell(trial, state=ot.PRUNED)
            else:
                self.study.tell(trial, state=ot.FAIL)
        if requeue:
            self.study.enqueue_trial(dict(record.params), skip_if_exists=False)
            diagnostics = f"{REQUEUED}: {diagnostics}"
        duration = round(time.time() - record.started_at, 3) if record.started_at else None
        record = replace(record, state=state, value=value if value is not None else record.value,
                         duration_seconds=duration, diagnostics=diagnostics)
        self.trials[number] = record
        return record

    # -- what the report shows ---------------------------------------------------------------------
    def counts(self) -> Dict[TrialState, int]:
        out: Dict[TrialState, int] = {s: 0 for s in TrialState}
        for t in self.trials.values():
            out[t.state] += 1
        return out

    def failed(self) -> int:
        """Failed trials that count against ``max_failed_trials`` (not those re-run)."""
        return sum(1 for t in self.trials.values()
                   if t.state == TrialState.FAILED and not t.diagnostics.startswith(REQUEUED))

    def best(self) -> Optional[TrialReport]:
        done = [t for t in self.trials.values()
                if t.state == TrialState.SUCCEEDED and t.value is not None and math.isfinite(t.value)]
        if not done:
            return None
        if self.spec.goal == "minimize":
            return min(done, key=lambda t: (t.value, t.number))
        return max(done, key=lambda t: (t.value, -t.number))

    def report_of(self) -> SweepReport:
        return SweepReport(metric=self.spec.metric, goal=self.spec.goal, planned=self.spec.trials,
                           trials=tuple(self.trials[n] for n in sorted(self.trials)), best=self.best())


#: How a trial re-run for a lost container begins its diagnostics.
REQUEUED = "re-run"


def save_trials(path: str, trials: Sequence[TrialReport]) -> None:
    """Write the trials so far atomically (what a new AM attempt resumes from)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"trials": [t.to_dict() for t in trials]}, f)
    os.replace(tmp, path)


def load_trials(path: str) -> List[TrialReport]:
    """The trials an earlier AM saved at ``path`` ([] if none)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    return [TrialReport.from_dict(t) for t in data.get("trials") or ()]


def value_of(lines: Sequence[str], metric: str) -> Tuple[Optional[float], List[Tuple[float, Optional[int]]]]:
    """The last value of ``metric`` in a trial's lines and every value with its step."""
    from ...metrics import values_of

    values = values_of(metric, list(lines))
    return (values[-1][0] if values else None), values
