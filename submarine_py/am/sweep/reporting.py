"""A sweep's :class:`JobReport` from its AM's live state (``sweep/master.py``): its containers as
tasks (``worker:0``, ``worker:1``, ...: one per container the sweep held), its trials and the
best so far (:class:`SweepReport`)."""
from __future__ import annotations

import time

from ...report import JobReport, TaskReport, Timings
from ...states import GateState, JobState, Phase, TaskState
from .records import Slot, SweepAM



def sweep_report(am: SweepAM) -> JobReport:
    """What the sweep's AM knows now (call under its lock)."""
    end = am.finished_at or time.time()
    queued = am.gate.queued_seconds + am.gate.waited(time.monotonic())
    tasks = tuple(TaskReport(
        role=s.plan.role, index=s.plan.index, state=slot_state(am, s), host=s.host, address=s.address,
        tracked=True, log=s.log, executor=s.id, command=am.task.command,
        attempt=max(1, s.trials_run), **am.containers.details(s.id),
    ) for s in am.slots.values())
    return JobReport(
        app_id=am.job_id, name=am.plan.job.name, framework=am.plan.job.framework,
        backend=am.containers.name, user=am.user,
        queue=am.plan.job.queue if am.containers.name == "yarn" else None,
        submitted_at=round(am.submitted_at, 3), started_at=round(am.started_at, 3),
        finished_at=round(am.finished_at, 3) if am.finished_at else None,
        state=am.state if am.finishing else JobState.RUNNING, phase=am.phase, attempts=1,
        diagnostics=am.diagnostics,
        running=sum(1 for s in am.slots.values() if s.trial is not None), total=len(tasks), tasks=tasks,
        timings=Timings(total_seconds=round(end - am.submitted_at, 3),
                        queued_seconds=round(queued, 3) if queued else None), status_url=am.url,
        events=tuple(am.events), final=am.phase == Phase.DONE,
        waiting_for=(am.gate.why or None) if am.gate.state == GateState.QUEUED and not am.finishing else None,
        sweep=am.search.report_of() if am.search is not None else None)


def slot_state(am: SweepAM, s: Slot) -> TaskState:
    """A container's state as a task's: running a trial, given back (done), or gone."""
    if s.trial is not None:
        return TaskState.RUNNING
    if s.released and not s.registered:
        return TaskState.STOPPED
    if s.released or (am.state == JobState.SUCCEEDED and s.registered):
        return TaskState.SUCCEEDED
    if not s.alive:
        return TaskState.STOPPED if am.finishing else TaskState.FAILED
    return TaskState.REGISTERED if s.registered else TaskState.PENDING
