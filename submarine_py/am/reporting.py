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
from typing import Any, Dict, Optional

from ..plan import Plan
from ..report import JobReport, TaskReport, Timings, replace
from ..states import JobState, Phase, TaskState
from .allocation import Allocation
from .containers import Containers
from .job import JobRun
from .records import shown

log = logging.getLogger("subm.am")

#: How often a running AM rewrites its report file, so that a job whose AM is killed or
#: lost still has a final report with its tasks.
SNAPSHOT_SECONDS = 2.0

REDACTED = "<hidden>"


def spec_without_secrets(plan: Plan) -> Dict[str, Any]:
    """The job spec as a dict, with the values of the roles' variables hidden (they may be
    secrets; their names stay)."""
    spec = plan.job.to_dict()
    for role in spec.get("roles", {}).values():
        if role.get("env"):
            role["env"] = {name: REDACTED for name in role["env"]}
    return spec


def build_report(job: JobRun, containers: Containers, *, user: Optional[str], url: str,
                 gpu_idle_seconds: float, allocation: Optional[Allocation] = None) -> JobReport:
    """What the AM knows of the job now (call under the job's lock)."""
    end = job.finished_at or time.time()
    now = time.monotonic()
    tasks = tuple(TaskReport(
        role=ts.plan.role, index=ts.plan.index, state=ts.state, exit_code=ts.exit_code,
        restarts=ts.restarts, attempt=shown(ts.attempt), host=ts.host, address=ts.address,
        tracked=ts.plan.tracked, log=ts.log, executor=ts.executor, command=ts.plan.command,
        gpu=ts.gpu.summary(gpu_idle_seconds), cause=ts.cause,
        restarts_by_cause={c.value: n for c, n in ts.restarts_by_cause.items()},
        quiet_seconds=_rounded(ts.quiet_for(job.live_executor(ts), now)), **containers.details(ts.executor),
    ) for ts in job.tasks.values())
    return JobReport(
        app_id=job.job_id,
        name=job.plan.job.name,
        framework=job.plan.job.framework,
        backend=containers.name,
        user=user,
        queue=job.plan.job.queue if containers.name == "yarn" else None,
        submitted_at=round(job.submitted_at, 3),
        started_at=round(job.started_at, 3),
        finished_at=round(job.finished_at, 3) if job.finished_at else None,
        state=job.state if job.finishing else JobState.RUNNING,
        phase=job.phase,
        attempts=job.attempts,
        diagnostics=job.diagnostics,
        running=sum(1 for ts in job.tasks.values() if ts.state == TaskState.RUNNING),
        total=len(job.tasks),
        tasks=tasks,
        cluster_spec=job.cluster,
        timings=Timings(gang_ready_seconds=job.gang_ready_seconds,
                        total_seconds=round(end - job.submitted_at, 3),
                        queued_seconds=round(allocation.queued_seconds(), 3)
                        if allocation is not None and allocation.queued_seconds() else None),
        status_url=url,
        tensorboard_url=job.tensorboard_url,
        events=tuple(job.events),
        final=job.phase == Phase.DONE,
        restarts_by_cause={c.value: n for c, n in job.restarts_by_cause.items()},
        hang_seconds=job.plan.job.timeouts.hang_seconds,
        job_seconds=job.plan.job.timeouts.job_seconds,
        waiting_for=(allocation.waiting_for() or None) if allocation is not None and not job.finishing else None,
        held_containers=allocation.held if allocation is not None and allocation.waiting_for() and not job.finishing
        else None,
        nodes_spanned=tuple(job.spans),
        world_sizes=tuple(job.world_sizes) if job.plan.job.elastic else (),
    )


def _rounded(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds, 1)


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
