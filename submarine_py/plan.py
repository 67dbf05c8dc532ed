"""The plan: a job spec turned into concrete tasks and, once their addresses
are known, each task's environment. Pure functions only; backends and the
ApplicationMaster call into this.
"""
from __future__ import annotations

import functools
import json
import posixpath
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .executor import protocol
from .frameworks import Framework, TaskRun, get_framework
from .jobfile.model import TENSORBOARD_ROLE, DockerSpec, JobSpec, Resources
from .units import split_address

Address = str  # "host:port"

#: How the job's TensorBoard runs (the ``tensorboard`` field), unless ``roles.tensorboard``
#: gives a command of its own: the job's ``python3`` (the interpreter its tasks get, so a
#: missing TensorBoard is the job's environment's, as for any task), serving on the port the
#: task registered (its executor holds it with SO_REUSEADDR until then, which TensorBoard's
#: HTTP server sets too) on every interface, so that its URL, ``http://<task's host>:<port>/``,
#: answers from other machines.
TENSORBOARD_COMMAND = 'python3 -m tensorboard.main --logdir "$SUBM_TENSORBOARD_DIR" --port "$SUBM_PORT" --bind_all'
#: The job's TensorBoard log folder in its shared folder, unless ``tensorboard.logdir`` names one.
TENSORBOARD_SUBDIR = "tensorboard"


@dataclass(frozen=True)
class TaskPlan:
    role: str
    index: int
    command: str
    resources: Resources
    tracked: bool
    env: Mapping[str, str] = field(default_factory=dict)
    docker: Optional[DockerSpec] = None
    node_label: Optional[str] = None
    #: Processes the executor starts for this task (torchrun's nproc_per_node): one task is
    #: one node in torchrun's terms, each process with its LOCAL_RANK.
    processes: int = 1

    @property
    def id(self) -> str:
        return f"{self.role}:{self.index}"


@dataclass(frozen=True)
class Plan:
    job: JobSpec
    tasks: Tuple[TaskPlan, ...]

    @property
    def framework(self) -> Framework:
        return get_framework(self.job.framework)

    def task(self, role: str, index: int) -> TaskPlan:
        for t in self.tasks:
            if t.role == role and t.index == index:
                return t
        raise KeyError(f"{role}:{index}")

    @functools.cached_property  # the AM asks for each task it starts and each report
    def tensorboard_task(self) -> Optional[TaskPlan]:
        """The task that runs the job's TensorBoard (the ``tensorboard`` field), or None."""
        if self.job.tensorboard is None:
            return None
        return next((t for t in self.tasks if t.role == TENSORBOARD_ROLE), None)

    def tensorboard_dir(self, shared_dir: Optional[str]) -> Optional[str]:
        """The log folder TensorBoard reads, every task's ``SUBM_TENSORBOARD_DIR``: the job's
        ``tensorboard.logdir``, else ``tensorboard/`` in the job's shared folder (``shared_dir``:
        the backend's, for this job); None without the ``tensorboard`` field, or without either
        (YARN refuses such a job before submitting it)."""
        tb = self.job.tensorboard
        if tb is None:
            return None
        if tb.logdir:
            return tb.logdir
        return posixpath.join(shared_dir, TENSORBOARD_SUBDIR) if shared_dir else None

    def cluster_spec(self, addresses: Mapping[Tuple[str, int], Address]) -> Dict[str, List[Address]]:
        """role -> addresses in index order, from ``{(role, index): 'host:port'}``: the tasks of
        this attempt's world. A role of fixed size has every task in it; an elastic role those of
        its tasks ``addresses`` names (its world this attempt: ``am/elastic.py`` decides), each
        at its place among them (:meth:`world_index`)."""
        out: Dict[str, List[Address]] = {}
        for role, spec in self.job.roles.items():
            if spec.elastic:
                out[role] = [addresses[k] for k in sorted(k for k in addresses if k[0] == role)]
            else:
                out[role] = [addresses[(role, i)] for i in range(spec.instances)]
        return out

    @staticmethod
    def world_index(task: "TaskPlan", members: Sequence[Tuple[str, int]]) -> int:
        """``task``'s index in a world of ``members`` (task keys): its place among the members
        of its role, in index order. Equal to ``task.index`` where every task of the role is a
        member (a role of fixed size); an elastic role's world numbers its members 0..n-1, so
        that ranks leave no gap where a task is missing."""
        return sorted(i for r, i in members if r == task.role).index(task.index)

    def elastic_roles(self) -> Dict[str, Tuple[int, int]]:
        """Each elastic role's (min, max) tasks."""
        return {role: (spec.fewest, spec.instances) for role, spec in self.job.roles.items() if spec.elastic}

    def placeholder_cluster(self) -> Dict[str, List[Address]]:
        """The cluster spec with ``<role.index.host>:<role.index.port>`` placeholders."""
        return self.cluster_spec({
            (t.role, t.index): f"<{t.role}.{t.index}.host>:<{t.role}.{t.index}.port>" for t in self.tasks
        })

    def executor_settings(self, role: str) -> Dict[str, str]:
        """What every executor of ``role`` reads from its environment, whoever starts it (the AM,
        or YARN for the containers requested with the application): the one route of the
        job's settings to the executor (``SUBM_STOP_GRACE``: timeouts.stop_grace_seconds)."""
        return {protocol.ROLE: role, protocol.STOP_GRACE: f"{self.job.timeouts.stop_grace_seconds:g}"}

    @property
    def processes_by_role(self) -> Dict[str, int]:
        """role -> processes per task of that role."""
        return {t.role: t.processes for t in self.tasks}

    def process_envs(self, task: TaskPlan, cluster: Mapping[str, Sequence[Address]], job_id: str,
                     attempt: int, shared_dir: Optional[str] = None,
                     index: Optional[int] = None) -> List[Dict[str, str]]:
        """The environment of each of the task's processes (``task.processes`` of them), in
        local-rank order: what the executor starts them with, on top of what they inherit.
        ``cluster``: this attempt's world; ``index``: the task's place in it
        (:meth:`world_index`; None: ``task.index``, as in a role of fixed size).

        Each is, by precedence: the framework's defaults (``OMP_NUM_THREADS`` ...), then the
        role's ``env``, then the framework's variables (ranks, addresses), then subm's own
        ``SUBM_*``: a role's ``env`` can tune a default but never change a rank.
        """
        index = task.index if index is None else index
        host, port = split_address(cluster[task.role][index])
        fw = self.framework
        run = TaskRun(job_id=job_id, attempt=attempt, max_restarts=self.job.restart.max_restarts)
        subm = {
            protocol.JOB_ID: job_id,
            protocol.JOB_NAME: self.job.name,
            protocol.FRAMEWORK: self.job.framework,
            protocol.ROLE: task.role,
            protocol.INDEX: str(index),
            protocol.ATTEMPT: str(attempt),
            protocol.HOST: host,
            protocol.PORT: port,
            protocol.NUM_TASKS: str(sum(len(a) for a in cluster.values())),
            protocol.CLUSTER_SPEC: json.dumps({r: list(a) for r, a in cluster.items()}, sort_keys=True),
            protocol.LOCAL_WORLD_SIZE: str(task.processes),
        }
        if shared_dir:
            subm[protocol.SHARED_DIR] = shared_dir
        tensorboard_dir = self.tensorboard_dir(shared_dir)
        if tensorboard_dir:
            subm[protocol.TENSORBOARD_DIR] = tensorboard_dir
        envs = []
        for local_rank in range(task.processes):
            env = fw.defaults(task.role, task.processes)
            env.update(task.env)
            env.update(fw.env(cluster, task.role, index, local_rank, self.processes_by_role, run))
            env.update(subm)
            env[protocol.LOCAL_RANK] = str(local_rank)
            envs.append(env)
        return envs

    def preview_envs(self, shared_dir: Optional[str]) -> Dict[str, List[Dict[str, str]]]:
        """Each task's processes' environments as ``subm validate`` shows them (task id -> one
        per process): addresses as placeholders, everything else exact (ranks, local ranks
        included: one task is one node, wherever it runs)."""
        cluster = self.placeholder_cluster()
        return {t.id: self.process_envs(t, cluster, "<app_id>", 0, shared_dir) for t in self.tasks}

    def to_dict(self) -> Dict:
        return {"job": self.job.to_dict(), "tasks": [
            {"id": t.id, "role": t.role, "index": t.index, "tracked": t.tracked,
             "resources": t.resources.to_dict(), "processes": t.processes, "command": t.command,
             **({"docker": t.docker.to_dict()} if t.docker else {})}
            for t in self.tasks
        ]}


def make_plan(job: JobSpec) -> Plan:
    fw = get_framework(job.framework)
    tasks = []
    for role, spec in job.roles.items():
        command = spec.command
        if not command and job.tensorboard is not None and role == TENSORBOARD_ROLE:
            command = TENSORBOARD_COMMAND
        for i in range(spec.instances):
            tasks.append(TaskPlan(
                role=role, index=i, command=command, resources=spec.resources,
                tracked=fw.is_tracked(role, spec.tracked, list(job.roles)), env=dict(spec.env),
                docker=spec.docker, node_label=spec.node_label, processes=spec.process_count,
            ))
    return Plan(job=job, tasks=tuple(tasks))
