"""The plan: a job spec turned into concrete tasks and, once their addresses
are known, each task's environment. Pure functions only; backends and the
ApplicationMaster call into this.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from .frameworks import Framework, get_framework
from .jobfile.model import DockerSpec, JobSpec, Resources
from .units import split_address

Address = str  # "host:port"
#: Variables whose values depend on which tasks share a host.
LOCALITY_KEYS = frozenset({"LOCAL_RANK", "LOCAL_WORLD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                           "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE"})


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

    def cluster_spec(self, addresses: Mapping[Tuple[str, int], Address]) -> Dict[str, List[Address]]:
        """role -> addresses in index order, from ``{(role, index): 'host:port'}``."""
        return {
            role: [addresses[(role, i)] for i in range(spec.instances)]
            for role, spec in self.job.roles.items()
        }

    def placeholder_cluster(self) -> Dict[str, List[Address]]:
        """The cluster spec with ``<role.index.host>:<role.index.port>`` placeholders."""
        return self.cluster_spec({
            (t.role, t.index): f"<{t.role}.{t.index}.host>:<{t.role}.{t.index}.port>" for t in self.tasks
        })

    @property
    def isolated(self) -> FrozenSet[Tuple[str, int]]:
        """Tasks that see only their own GPUs (every task with ``gpus`` > 0, on both backends)."""
        return frozenset((t.role, t.index) for t in self.tasks if t.resources.gpus > 0)

    def executor_settings(self, role: str) -> Dict[str, str]:
        """What every executor of ``role`` reads from its environment, whoever starts it (the AM,
        or YARN for the containers requested with the application): the one route of the
        job's settings to the executor (``SUBM_STOP_GRACE``: timeouts.stop_grace_seconds)."""
        return {"SUBM_ROLE": role, "SUBM_STOP_GRACE": f"{self.job.timeouts.stop_grace_seconds:g}"}

    def task_env(self, task: TaskPlan, cluster: Mapping[str, Sequence[Address]], job_id: str,
                 attempt: int, shared_dir: Optional[str] = None) -> Dict[str, str]:
        """Everything a task's process gets on top of its inherited environment."""
        host, port = split_address(cluster[task.role][task.index])
        env = dict(task.env)
        env.update(self.framework.env(cluster, task.role, task.index, self.isolated))
        env.update({
            "SUBM_JOB_ID": job_id,
            "SUBM_JOB_NAME": self.job.name,
            "SUBM_FRAMEWORK": self.job.framework,
            "SUBM_ROLE": task.role,
            "SUBM_INDEX": str(task.index),
            "SUBM_ATTEMPT": str(attempt),
            "SUBM_HOST": host,
            "SUBM_PORT": port,
            "SUBM_NUM_TASKS": str(len(self.tasks)),
            "SUBM_CLUSTER_SPEC": json.dumps({r: list(a) for r, a in cluster.items()}, sort_keys=True),
        })
        if shared_dir:
            env["SUBM_SHARED_DIR"] = shared_dir
        return env

    def process_envs(self, task: TaskPlan, cluster: Mapping[str, Sequence[Address]], job_id: str,
                     attempt: int, shared_dir: Optional[str] = None) -> List[Dict[str, str]]:
        """The environment of each of the task's processes (``task.processes`` of them), in
        local-rank order: what the executor starts them with."""
        return [self.task_env(task, cluster, job_id, attempt, shared_dir)]

    def preview_envs(self, one_host: bool, shared_dir: Optional[str]) -> Dict[str, Dict[str, str]]:
        """Each task's environment as ``subm validate`` shows it: addresses as placeholders, and
        local ranks as tasks will get them: exact when every task shares one host (the local
        backend) or has GPUs of its own, else ``<by placement>`` (YARN decides the hosts)."""
        cluster = self.placeholder_cluster()
        envs = {t.id: self.task_env(t, cluster, "<app_id>", 0, shared_dir) for t in self.tasks}
        if one_host:
            same = {role: [f"<host>:{a.rsplit(':', 1)[1]}" for a in addrs] for role, addrs in cluster.items()}
            for t in self.tasks:
                fw_env = self.framework.env(same, t.role, t.index, self.isolated)
                envs[t.id].update({k: v for k, v in fw_env.items() if k in LOCALITY_KEYS})
        else:
            for t in self.tasks:
                if (t.role, t.index) not in self.isolated:
                    envs[t.id].update({k: "<by placement>" for k in envs[t.id] if k in LOCALITY_KEYS})
        return envs

    def to_dict(self) -> Dict:
        return {"job": self.job.to_dict(), "tasks": [
            {"id": t.id, "role": t.role, "index": t.index, "tracked": t.tracked,
             "resources": t.resources.to_dict(), "command": t.command,
             **({"docker": t.docker.to_dict()} if t.docker else {})}
            for t in self.tasks
        ]}


def make_plan(job: JobSpec) -> Plan:
    fw = get_framework(job.framework)
    tasks = []
    for role, spec in job.roles.items():
        for i in range(spec.instances):
            tasks.append(TaskPlan(
                role=role, index=i, command=spec.command, resources=spec.resources,
                tracked=fw.is_tracked(role, spec.tracked, list(job.roles)), env=dict(spec.env),
                docker=spec.docker, node_label=spec.node_label,
            ))
    return Plan(job=job, tasks=tuple(tasks))
