"""Registration: executors register, each is given a task, and once every task has an executor the
whole gang is told to run with the cluster spec of this attempt.

A gang that is not complete within ``timeouts.gang_seconds`` of its start (or restart) fails
the job, naming what is missing (:func:`.diagnostics.gang_missing`).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Optional

from ..executor import protocol
from ..states import JobState, Phase, TaskState
from .containers import Containers
from .diagnostics import gang_missing
from .elastic import Elasticity
from .job import JobRun
from .records import Executor, Task, shown

log = logging.getLogger("subm.am")


#: How long past gang_seconds the gang may wait for containers YARN is still localizing.
LOCALIZING_MOST_SECONDS = 1800.0
#: How often the NodeManagers are asked, once past gang_seconds.
LOCALIZING_CHECK_SECONDS = 5.0


class Registration:
    """Registration and the gang's start. ``save_state`` keeps the job's attempts where a later
    AM can read them (called when the gang is ready)."""

    def __init__(self, job: JobRun, containers: Containers, *, shared_dir: Optional[str],
                 heartbeat_seconds: float, gpu_sample_seconds: float, save_state: Callable[[], None],
                 elasticity: Optional[Elasticity] = None):
        self.job = job
        self.containers = containers
        #: Which registered tasks make up an attempt's world (every task, unless a role is elastic).
        self.elasticity = elasticity or Elasticity(job, resize=lambda why: None)
        #: SUBM_SHARED_DIR of every task (the backend created it), or None.
        self.shared_dir = shared_dir
        self.heartbeat_seconds = heartbeat_seconds
        self.gpu_sample_seconds = gpu_sample_seconds
        self.save_state = save_state
        self._localizing_checked = float("-inf")
        #: When a missing task's container was last seen being localized (its clock's start then).
        self._localized_at = float("-inf")

    def register(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """An executor says where it listens (``POST /v1/register``); the reply names its task."""
        job = self.job
        with job.lock:
            ex_id, role = str(body["executor"]), str(body["role"])
            ex = job.executors.get(ex_id)
            if ex is None:
                ex = job.executors[ex_id] = Executor(ex_id, role, alive=not self.containers.given_back(ex_id))
            ex.info.update({k: body.get(k) for k in ("pid", "container", "node_http", "log_dirs", "host")})
            self.containers.registered(ex_id, ex.info)
            ex.last_seen = time.monotonic()
            if job.finishing or ex.lost or not ex.alive:  # (not alive: its container was given back)
                job.send(ex, "exit", code=0)
                return {"index": body.get("index")}
            ts = job.tasks.get(ex.task) if ex.task else None
            if ts is None:
                ts = self._assign(ex, body.get("index"))
            if ts is None:
                job.decide("executor %s of role %s has no task to run; telling it to leave", ex_id, role)
                job.send(ex, "exit", code=0)
                return {"index": None}
            ts.address = f"{body['host']}:{int(body['port'])}"
            ts.state = TaskState.REGISTERED
            ts.registered_at = time.monotonic()
            ts.failed_launches = 0
            ex.attempt, ex.registered = ts.attempt, True
            ts.log = self.containers.log_location(ts.plan, ex_id)
            log.info("%s registered at %s (attempt %d, executor %s)", ts.plan.id, ts.address, shown(ts.attempt), ex_id)
            self.maybe_run()
            return {"index": ts.plan.index, "attempt": ts.attempt, "heartbeat": self.heartbeat_seconds}

    def _assign(self, ex: Executor, hint: Any) -> Optional[Task]:
        """A task of the executor's role without a live executor, the one it asks for first."""
        job = self.job
        candidates = [ts for ts in job.tasks.values()
                      if ts.plan.role == ex.role and job.live_executor(ts) is None]
        try:
            wanted = int(hint) if hint is not None else None
        except ValueError:
            wanted = None
        candidates.sort(key=lambda ts: (ts.plan.index != wanted, ts.plan.index))
        if not candidates:
            return None
        ts = candidates[0]
        ts.executor, ex.task = ex.id, ts.key
        if ts.key in job.to_launch:  # an executor we did not launch for it (e.g. YARN instances)
            job.to_launch.remove(ts.key)
        return ts

    def maybe_run(self) -> None:
        """Start every registered task of the world whose peers are all registered: the gang
        once its world is up (every task, or an elastic role's world: :mod:`.elastic`), or a
        task restarted alone under a gang that runs. Also called each round (an elastic world
        may start once ``timeouts.settle_seconds`` have passed)."""
        job = self.job
        # No task runs while the gang waits for admission (QUEUED): a container asked for with
        # the application can register before the AM has admitted its gang (YarnContainers).
        if job.finishing or job.phase == Phase.QUEUED:
            return
        if job.phase == Phase.STARTING:
            world = self.elasticity.start_world()
            if world is None:
                return
            # The first time: seconds since submission, the number the report's timings (and the
            # summary line) carry; after a restart: seconds since that restart.
            if job.gang_ready_seconds is None:
                job.gang_ready_seconds = round(time.time() - job.submitted_at, 3)
                since = f"{job.gang_ready_seconds:.1f} s after submission"
            else:
                since = f"{time.monotonic() - job.gang_started:.1f} s after the restart"
            if self.elasticity.on:
                job.decide("gang ready: a world of %d task(s) of at most %d registered (attempt %d), %s",
                           len(world), len(job.tasks), shown(job.attempt), since)
            else:
                job.decide("gang ready: all %d tasks registered (attempt %d), %s",
                           len(job.tasks), shown(job.attempt), since)
            job.phase = Phase.RUNNING
            job.world, job.world_since = world, time.monotonic()
            job.min_up_since = None  # (the next attempt's settling starts afresh)
            job.world_sizes.append(len(world))
            job.spans.append(len({job.tasks[k].host for k in world if job.tasks[k].host}))
            self.save_state()
        waiting = [job.tasks[k] for k in job.world if job.tasks[k].state == TaskState.REGISTERED]
        if not waiting:
            return
        plan = job.plan
        job.cluster = plan.cluster_spec({k: job.tasks[k].address for k in job.world})
        hold = plan.framework.reuses_port
        for ts in waiting:
            ex = job.live_executor(ts)
            if ex is None:
                continue
            envs = plan.process_envs(ts.plan, job.cluster, job.job_id, ts.attempt, self.shared_dir,
                                     index=plan.world_index(ts.plan, job.world))
            header = (f"[subm] job={job.job_id} role={ts.plan.role} index={ts.plan.index} "
                      f"attempt={shown(ts.attempt)} host={ts.host} container={ex.info.get('container') or ex.id} "
                      f"command: {ts.plan.command}")
            ts.state = TaskState.RUNNING
            if job.is_tensorboard(ts):
                job.decide("%s starts TensorBoard at %s, reading %s", ts.plan.id, job.tensorboard_url,
                           envs[0].get(protocol.TENSORBOARD_DIR) or "no log folder (the job has no shared folder)")
            # One process per environment, in local-rank order (``env``: the first, and all
            # that one process needs); the executor treats them as one task.
            more = {"envs": envs} if len(envs) > 1 else {}
            job.send(ex, "run", attempt=ts.attempt, command=ts.plan.command, env=envs[0], **more,
                     hold_port=hold, header=header, gpus=ts.plan.resources.gpus,
                     gpu_sample_seconds=self.gpu_sample_seconds)

    def check_timeout(self) -> None:
        """Fail the job if the gang is not complete within ``timeouts.gang_seconds`` of its start,
        or of the last moment the cluster was seen localizing a missing task's container
        (:meth:`_localizing`)."""
        job = self.job
        limit = job.plan.job.timeouts.gang_seconds
        now = time.monotonic()
        if job.phase != Phase.STARTING or now - max(job.gang_started, self._localized_at) <= limit:
            return
        if not self._localizing(now, limit):
            job.finish(JobState.FAILED, gang_missing(job.tasks.values(), self.containers, limit, job.attempt))

    def _localizing(self, now: float, limit: float) -> bool:
        """Whether a missing task's container is still being localized, or its launch still
        unpacks the environment's layers: the first job on a node fetches and unpacks the
        environment that travels (gigabytes take a minute or more), which is not the gang failing
        to assemble. The gang then gets
        gang_seconds from the last moment one was seen localizing, for at most
        LOCALIZING_MOST_SECONDS past its start; the NodeManagers are asked every few seconds."""
        job = self.job
        if now - job.gang_started > limit + LOCALIZING_MOST_SECONDS:
            return False
        if now < self._localizing_checked + LOCALIZING_CHECK_SECONDS:
            return self._localized_at == self._localizing_checked  # asked a moment ago: its answer
        self._localizing_checked = now
        missing = [ts.executor for ts in job.tasks.values()
                   if ts.executor and ts.state not in (TaskState.REGISTERED, TaskState.RUNNING)]
        words = self.containers.localizing(missing) if missing else []
        if not words:
            return False
        if self._localized_at < job.gang_started:  # once per gang
            job.decide("past timeouts.gang_seconds (%s s), but %s: the gang's clock waits while the job's "
                       "environment reaches that node (once per node)", limit, "; ".join(words))
        self._localized_at = now
        return True
