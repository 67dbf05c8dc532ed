"""The AM's report of a job (:class:`JobReport`) from its live state, and the report file.

The file is written atomically, with the spec (values of the roles' variables hidden), so that
history keeps the job as submitted; on YARN it lies in the AM container's log directory, which
the NodeManager serves to anyone.
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Dict

from ..plan import Plan
from ..report import JobReport, TaskReport, Timings, replace
from ..states import JobState, Phase, TaskState
from .records import shown

if TYPE_CHECKING:
    from .master import ApplicationMaster

log = logging.getLogger("subm.am")

REDACTED = "<hidden>"


def spec_without_secrets(plan: Plan) -> Dict[str, Any]:
    """The job spec as a dict, with the values of the roles' variables hidden (they may be
    secrets; their names stay)."""
    spec = plan.job.to_dict()
    for role in spec.get("roles", {}).values():
        if role.get("env"):
            role["env"] = {name: REDACTED for name in role["env"]}
    return spec


def build_report(am: "ApplicationMaster") -> JobReport:
    """What the AM knows of the job now (call under its lock)."""
    end = am.finished_at or time.time()
    tasks = tuple(TaskReport(
        role=ts.plan.role, index=ts.plan.index, state=ts.state, exit_code=ts.exit_code,
        restarts=ts.restarts, attempt=shown(ts.attempt), host=ts.host, address=ts.address,
        tracked=ts.plan.tracked, log=ts.log, executor=ts.executor, command=ts.plan.command,
        gpu=ts.gpu.summary(am.gpu_idle_seconds), **am.containers.details(ts.executor),
    ) for ts in am.tasks.values())
    finishing = am.phase in (Phase.FINISHING, Phase.DONE)
    return JobReport(
        app_id=am.job_id,
        name=am.plan.job.name,
        framework=am.plan.job.framework,
        backend=am.containers.name,
        user=am.user,
        queue=am.plan.job.queue if am.containers.name == "yarn" else None,
        submitted_at=round(am.submitted_at, 3),
        started_at=round(am.started_at, 3),
        finished_at=round(am.finished_at, 3) if am.finished_at else None,
        state=am.state if finishing else JobState.RUNNING,
        phase=am.phase,
        attempts=1 + max(am.gang_restarts, max((t.restarts for t in am.tasks.values()), default=0)),
        diagnostics=am.diagnostics,
        running=sum(1 for ts in am.tasks.values() if ts.state == TaskState.RUNNING),
        total=len(am.tasks),
        tasks=tasks,
        cluster_spec=am.cluster,
        timings=Timings(gang_ready_seconds=am.gang_ready_seconds,
                        total_seconds=round(end - am.submitted_at, 3)),
        status_url=am.url,
        events=tuple(am.events),
        final=am.phase == Phase.DONE,
    )


def write_json(path: str, data: Dict[str, Any]) -> None:
    """Write a report file atomically: readers (the client, a later AM) never see half of it."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def write_report(path: str, report: JobReport, plan: Plan) -> None:
    """Write the report file atomically (a snapshot until the job is done), with the spec."""
    try:
        write_json(path, replace(report, spec=spec_without_secrets(plan)).to_dict())
    except OSError as exc:
        log.warning("could not write the report %s: %s", path, exc)
