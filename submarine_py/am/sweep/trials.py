"""A sweep's trials on its containers (``sweep/master.py``): a group's next trial, its
intermediate values and early stopping, its tasks' ends and its verdict, a container gone
mid-trial, and the sweep's verdict.

Functions of the sweep's AM (:class:`~.records.SweepAM`: ``master.py``'s ``SweepMaster``), called
under its lock, its state theirs to change.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Dict, List, Optional

from ...states import Cause, JobState, Phase, TrialState
from ..diagnostics import quote_stderr
from .search import trial_env, value_of
from .records import Group, Slot, SweepAM
from . import pool


log = logging.getLogger("subm.am")

#: Containers in a row that end before their executor registers: the sweep cannot run.
MAX_FAILED_LAUNCHES = 3


def next_trial(am: SweepAM, group: Group) -> None:
    """Give ``group`` the next trial once all its containers registered, or give it back if
    there is none (under the lock)."""
    slots = [am.slots[x] for x in group.members.values()]
    if am.finishing or am.search is None or group.released or group.trial is not None \
            or not all(s.registered for s in slots):
        return
    if am.search.remaining() <= 0:
        pool.release(am, group, "has no trial left to run: it goes back to the cluster")
        return
    first = am.slots[group.members[(am.task.role, am.task.index)]]
    rec = am.search.ask(first.container or first.id, first.host)
    group.trial, group.pruning, group.failing = rec.number, None, ""
    am.phase = Phase.RUNNING
    cluster = am.plan.cluster_spec({key: am.slots[x].address for key, x in group.members.items()})
    shown = " ".join(f"{k}={v}" for k, v in rec.params.items())
    for key, ex_id in group.members.items():
        slot = am.slots[ex_id]
        task = am.plan.task(*key)
        envs = am.plan.process_envs(task, cluster, am.job_id, 0, am.shared_dir)
        envs = [dict(e, **trial_env(rec.number, dict(rec.params))) for e in envs]
        header = (f"[subm] job={am.job_id} trial={rec.number} {shown} task={task.id} container={slot.id} "
                  f"command: {task.command}")
        more = {"envs": envs} if len(envs) > 1 else {}
        slot.trial = rec.number
        slot.trials_run += 1
        am.send(slot, "run", attempt=rec.number, command=task.command, env=envs[0], **more,
                hold_port=am.plan.framework.reuses_port, header=header, gpus=task.resources.gpus,
                metric=am.spec.metric)
    log.info("trial %d (%s) starts in %s", rec.number, shown, ", ".join(group.members.values()))
    am.save_study()


def record_intermediate(am: SweepAM, group: Group, number: int, lines: List[str], may_stop: bool = True) -> None:
    """Record a running trial's values: the last one is its result so far, whether or not it
    came with a step (a result printed without one may be read here, before the trial ends:
    issue 31); stop it early where the rule says so for one with a step (``may_stop``: not for
    the last lines of a task that has ended)."""
    last, values = value_of(lines, am.spec.metric)
    for value, step in values:
        if step is None or group.pruning == number:
            continue
        if am.search.report(number, value, step) and may_stop and not group.failing:
            group.pruning = number
            am.decide("trial %d stops early at step %d: %s=%g is worse than the median of earlier "
                      "trials at that step", number, step, am.spec.metric, value)
            stop_running(am, group, number)
            return  # its value: the step it stopped at
    if last is not None and group.pruning != number and number in am.search.trials:
        am.search.trials[number] = replace(am.search.trials[number], value=last)


def stop_running(am: SweepAM, group: Group, number: int, untracked_only: bool = False) -> None:
    for ex_id in group.members.values():
        slot = am.slots[ex_id]
        if slot.trial == number and (not untracked_only or not slot.plan.tracked):
            am.send(slot, "stop", attempt=number)


def task_ended(am: SweepAM, slot: Slot, number: int, body: Dict[str, Any]) -> None:
    """A task of the running trial ``number`` ended (its executor's ``/v1/exit``, under the lock):
    its last metric lines, its failure stopping the rest of its gang; once all of them have
    ended, the trial's verdict and the group's next trial."""
    group = am.groups[slot.group]
    slot.trial = None
    lines = [str(x) for x in body.get("metric_lines") or ()]
    record_intermediate(am, group, number, lines, may_stop=False)  # its last value: its result
    code, stopped = int(body["exit_code"]), bool(body.get("stopped"))
    if code != 0 and not stopped and not group.failing and group.pruning != number:
        tail = body.get("stderr_tail")
        if not isinstance(tail, str):
            tail = am.containers.stderr_tail(slot.plan, slot.id)
        where = am.containers.stderr_location(slot.plan, slot.id) or str(body.get("stderr_log") or "")
        said = quote_stderr(tail).summary() if isinstance(tail, str) and tail else ""
        who = f"{slot.plan.role}:{slot.key[1]} " if len(group.members) > 1 else ""
        group.failing = "; ".join(x for x in (f"{who}exit code {code}", said,
                                              f"its stderr: {where}" if where else "") if x)
        stop_running(am, group, number)  # the rest of its gang
    elif code == 0 and not stopped and slot.plan.tracked:
        tracked_left = [x for x in group.members.values()
                        if am.slots[x].plan.tracked and am.slots[x].trial == number]
        if not tracked_left:
            stop_running(am, group, number, untracked_only=True)
    if any(am.slots[x].trial == number for x in group.members.values()):
        return  # the rest of the trial's tasks are still ending
    trial_ended(am, group, number, slot.id)


def trial_ended(am: SweepAM, group: Group, number: int, where: str) -> None:
    """Every task of the group's trial has ended: its verdict, then the next trial."""
    record = am.search.trials[number]
    group.trial = None
    if group.pruning == number:
        rec = am.search.finish(number, TrialState.PRUNED, record.value, f"stopped early at step {record.step}")
    elif group.failing:
        rec = am.search.finish(number, TrialState.FAILED, record.value, group.failing)
    elif record.value is not None:
        rec = am.search.finish(number, TrialState.SUCCEEDED, record.value)
    else:
        rec = am.search.finish(number, TrialState.FAILED, None,
                               f"it exited with code 0 but printed no {am.spec.metric}=... line on its "
                               f"stdout (see docs/sweeps.md)")
    group.failing = ""
    am.decide("trial %d %s%s in %.1f s on %s%s", number, rec.state,
              f" ({am.spec.metric}={rec.value:g})" if rec.value is not None else "",
              rec.duration_seconds or 0, where,
              f": {rec.diagnostics}" if rec.state == TrialState.FAILED else "")
    am.save_study()
    if not check_done(am):
        next_trial(am, group)


def check_done(am: SweepAM) -> bool:
    """The verdict once too many trials failed, or every trial has ended (under the lock)."""
    search = am.search
    if am.finishing or search is None:
        return am.finishing
    failed = search.failed()
    if failed > am.spec.max_failed_trials:
        last = max((t for t in search.trials.values() if t.state == TrialState.FAILED), key=lambda t: t.number)
        am.finish(JobState.FAILED, f"{failed} trials failed, more than sweep.max_failed_trials "
                                   f"({am.spec.max_failed_trials}); the last, trial {last.number}: "
                                   f"{last.diagnostics}")
        return True
    running = any(g.trial is not None for g in am.groups.values())
    if search.remaining() > 0 or running:
        return False
    best = search.best()
    counts = ", ".join(f"{n} {s.value.lower()}" for s, n in search.counts().items() if n)
    if best is None:
        am.finish(JobState.FAILED, f"no trial succeeded ({counts})")
    else:
        am.decide("sweep done (%s); best: trial %d, %s=%g with %s", counts, best.number, am.spec.metric,
                  best.value, dict(best.params))
        am.finish(JobState.SUCCEEDED, "")
    return True


def container_ended(am: SweepAM, ex_id: str, code: Optional[int], diagnostics: str,
                    cause: Optional[Cause]) -> None:
    """A trial container is gone (its end polled, or its executor silent): its group is
    given back whole (a new one is asked for), its trial, if any, failed."""
    with am.lock:
        slot = am.slots.get(ex_id)
        if slot is None or not slot.alive:
            return
        slot.alive = False
        am.changed.notify_all()
        group = am.groups.get(slot.group)
        if group is None or slot.released or group.released or am.finishing:
            return
        said = "; ".join(x for x in (f"exit code {code}" if code is not None else "", diagnostics) if x)
        if not slot.registered:
            am.failed_launches += 1
            am.decide("trial container %s ended before its executor registered (%s)", ex_id, said,
                      level=logging.WARNING)
            if am.failed_launches >= MAX_FAILED_LAUNCHES:
                am.finish(JobState.FAILED, f"{am.failed_launches} trial containers in a row ended before "
                                           f"their executor registered; the last: {said}")
                return
        number = group.trial
        pool.release(am, group, f"went back: {ex_id} is gone")
        if number is not None and am.search is not None:
            group.trial = None
            taken = cause is not None and cause.is_cluster
            rec = am.search.finish(number, TrialState.FAILED,
                                   diagnostics=f"its container {ex_id} ended ({said or 'exit code unknown'})",
                                   requeue=taken)
            am.decide("trial %d failed: %s%s", rec.number, rec.diagnostics,
                      "; its parameters run again" if taken else "", level=logging.WARNING)
            am.save_study()
            check_done(am)
