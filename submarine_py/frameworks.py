"""What each framework needs: which roles it accepts, which it tracks, which may run several
processes per task, and the environment each process reads to find the others.

Every function here is pure: the cluster spec goes in (role -> list of ``host:port``, in
index order), one process's environment comes out.

**One task is one node**, in torchrun's terms and in Horovod's: the task's processes
(``roles.R.processes``, P of them) are that node's local ranks 0 to P - 1, whatever the
placement. Two one-process tasks that land on the same machine are two nodes of one process
each (local rank 0 of 1), as two ``torchrun --nproc_per_node=1`` on one machine would be, so
every rank is known before placement. A local rank indexes into the GPUs its task sees.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from .units import split_address

Cluster = Mapping[str, Sequence[str]]
Problem = Tuple[str, str]


@dataclass(frozen=True)
class TaskRun:
    """What a process's environment says of the job run beyond the cluster: the application
    id, the task's attempt (``SUBM_ATTEMPT``, from 0) and the job's ``restart.max_restarts``."""

    job_id: str = ""
    attempt: int = 0
    max_restarts: int = 0


NO_TASK_RUN = TaskRun()


class Framework:
    name = "custom"
    #: Roles the framework knows; None: any role name.
    roles: Tuple[str, ...] = ()
    #: Roles whose tasks never finish by themselves; the job does not wait for them.
    untracked: Tuple[str, ...] = ("tensorboard",)
    #: Whether the framework binds its port with SO_REUSEADDR, so the executor can keep
    #: holding the reserved port while the framework process takes it (no port race).
    reuses_port = False
    #: Roles whose tasks may start several processes (``processes`` > 1); None: every role.
    multi_process_roles: Optional[Tuple[str, ...]] = None
    #: Why the other roles run one process per task: a refusal of ``processes`` > 1 says it.
    one_process_why = "this role runs one process per task"

    def check(self, spec) -> List[Problem]:
        problems: List[Problem] = []
        if self.roles:
            for role in spec.roles:
                if role not in self.roles:
                    problems.append((f"roles.{role}", f"{self.name} knows the roles {', '.join(self.roles)}"))
        for role in spec.roles.values():
            count = role.process_count
            if count > 1 and self.multi_process_roles is not None and role.name not in self.multi_process_roles:
                shown = f"{role.processes!r} ({count})" if role.processes != count else str(count)
                problems.append((f"roles.{role.name}.processes", f"{self.one_process_why}: at most 1, got {shown}"))
        fixed = self.fixed_size_why(spec)
        for role in spec.roles.values():
            if role.elastic and fixed:
                problems.append((f"roles.{role.name}.instances", f"{fixed}; give a number of instances"))
        roles = list(spec.roles)
        if not any(self.is_tracked(r.name, r.tracked, roles) for r in spec.roles.values()):
            problems.append(("roles", "no role is tracked, so the job could never finish; "
                                      f"add a role other than {', '.join(self.untracked_roles(roles))}"))
        return problems

    def untracked_roles(self, roles: Collection[str] = ()) -> Tuple[str, ...]:
        """Roles the job does not wait for by default, given the job's ``roles``."""
        return self.untracked

    def fixed_size_why(self, spec) -> Optional[str]:
        """Why the job's programs cannot change size while they run, so that a range of
        ``instances`` (an elastic role) is refused; None: they can, restarted with the new world
        from their checkpoint (``docs/elastic.md``)."""
        return None

    def is_tracked(self, role: str, override: Optional[bool] = None, roles: Collection[str] = ()) -> bool:
        return override if override is not None else role not in self.untracked_roles(roles)

    def env(self, cluster: Cluster, role: str, index: int, local_rank: int = 0,
            processes_by_role: Optional[Mapping[str, int]] = None, run: TaskRun = NO_TASK_RUN) -> Dict[str, str]:
        """The framework's own variables for process ``local_rank`` of task ``role:index``;
        ``processes_by_role``: role -> processes per task (a role not named has 1)."""
        return {}

    def defaults(self, role: str, processes: int) -> Dict[str, str]:
        """Variables a task of ``role`` with ``processes`` processes gets unless its role's
        ``env`` sets them (as torchrun keeps what its own environment sets)."""
        return {}


def _host(addr: str) -> str:
    return split_address(addr)[0]


def _port(addr: str) -> str:
    return split_address(addr)[1]


def _single(spec, role: str, problems: List[Problem], why: str) -> None:
    r = spec.roles.get(role)
    if r is not None and r.instances > 1:
        problems.append((f"roles.{role}.instances", f"{why}: at most 1, got {r.instances}"))


class PyTorch(Framework):
    """``torch.distributed`` with the env:// rendezvous, and exactly the variables
    ``torchrun --nnodes=N --node_rank=g --nproc_per_node=P`` gives its workers.

    Nodes (torchrun's groups) are the ``master`` (or ``chief``) first, then the ``worker``
    tasks in index order; a node's processes take the next global ranks, local rank order.
    ``tests/test_pytorch_tasks_get_torchruns_environment.py`` compares these with a real
    torchrun's.

    What torchrun sets that we do not copy, and why:

    - ``TORCHELASTIC_USE_AGENT_STORE``: torchrun's agent on node 0 hosts the TCPStore and sets
      it ``True`` so that every worker's env:// rendezvous connects as a client. There is no
      agent here: rank 0 itself must host the store, which env:// does only when the variable
      is not ``True``. We set ``False``, so a ``True`` inherited from the environment (subm run
      inside a torchrun worker) cannot make every rank wait for a store nobody hosts.
    - ``TORCHELASTIC_ERROR_FILE``: where ``@record`` writes a failed worker's error for the
      agent to read. No agent reads it here; the executor quotes the task's stderr.
    - ``TORCHELASTIC_SIGNALS_TO_HANDLE``: the agent's own setting (which signals it forwards to
      its workers), left in its environment; workers do not read it.
    """

    name = "pytorch"
    roles = ("master", "chief", "worker", "tensorboard")
    reuses_port = True  # c10d's TCPStore sets SO_REUSEADDR
    multi_process_roles = ("master", "chief", "worker")
    one_process_why = "tensorboard is outside PyTorch's world and runs one process per task"
    #: torchrun's default ``--role``: every node of the job has it, so ROLE_RANK is RANK.
    role_name = "default"

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        for role in ("master", "chief"):
            _single(spec, role, problems, "PyTorch has one rank 0")
        if "master" in spec.roles and "chief" in spec.roles:
            problems.append(("roles", "give 'master' or 'chief', not both: each names rank 0"))
        if not ({"master", "chief", "worker"} & set(spec.roles)):
            problems.append(("roles", "PyTorch needs a 'master', 'chief' or 'worker' role"))
        return problems

    @staticmethod
    def world(cluster: Cluster) -> List[Tuple[str, int, str]]:
        """The nodes (tasks) in group-rank order: ``(role, index, address)``."""
        out = []
        for role in ("master", "chief", "worker"):
            for i, addr in enumerate(cluster.get(role, ())):
                out.append((role, i, addr))
        return out

    def env(self, cluster: Cluster, role: str, index: int, local_rank: int = 0,
            processes_by_role: Optional[Mapping[str, int]] = None, run: TaskRun = NO_TASK_RUN) -> Dict[str, str]:
        world = self.world(cluster)
        nodes = [(r, i) for r, i, _ in world]
        if (role, index) not in nodes:
            return {}
        per_node = [(processes_by_role or {}).get(r, 1) for r, _ in nodes]
        group_rank = nodes.index((role, index))
        rank = sum(per_node[:group_rank]) + local_rank  # torchrun: the nodes before, then local rank
        world_size = sum(per_node)
        master = world[0][2]
        return {
            "MASTER_ADDR": _host(master),
            "MASTER_PORT": _port(master),
            "WORLD_SIZE": str(world_size),
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(per_node[group_rank]),
            "GROUP_RANK": str(group_rank),
            "GROUP_WORLD_SIZE": str(len(nodes)),
            "NODE_RANK": str(group_rank),  # not torchrun's: Lightning's name for GROUP_RANK
            "ROLE_NAME": self.role_name,
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(world_size),
            "TORCHELASTIC_RESTART_COUNT": str(run.attempt),
            "TORCHELASTIC_MAX_RESTARTS": str(run.max_restarts),
            "TORCHELASTIC_RUN_ID": run.job_id,
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        }

    def defaults(self, role: str, processes: int) -> Dict[str, str]:
        """torchrun's: with several processes per node, one OpenMP thread each (torchrun's guard
        against oversubscribing the machine). Not its TORCH_NCCL_ASYNC_ERROR_HANDLING=1: with it,
        torch 2.13 gloo ranks that had finished aborted at exit under load ("terminate called
        without an active exception": 3 of 22 runs of examples/pytorch-ddp, 0 of 28 without);
        a role's env sets it where NCCL jobs want it."""
        if role not in self.multi_process_roles or processes <= 1:
            return {}
        return {"OMP_NUM_THREADS": "1"}


class TensorFlow(Framework):
    """``TF_CONFIG`` for ``tf.distribute`` and estimators."""

    name = "tensorflow"
    roles = ("chief", "worker", "ps", "evaluator", "tensorboard")
    untracked = ("ps", "tensorboard")
    reuses_port = True  # gRPC servers set SO_REUSEADDR and SO_REUSEPORT
    cluster_roles = ("chief", "worker", "ps")
    multi_process_roles = ()
    one_process_why = ("TensorFlow runs one process per task (TF_CONFIG names one server per task; "
                       "give the role more instances instead)")

    def untracked_roles(self, roles: Collection[str] = ()) -> Tuple[str, ...]:
        """With a ``ps`` and a ``chief`` (ParameterServerStrategy), workers serve like ps until
        stopped (``server.join()``): the chief, the coordinator, decides the end."""
        if "ps" in roles and "chief" in roles:
            return ("worker",) + self.untracked
        return self.untracked

    def fixed_size_why(self, spec) -> Optional[str]:
        if "ps" not in spec.roles:
            return None  # MultiWorkerMirroredStrategy: a restart with a new TF_CONFIG is a new world
        return ("TensorFlow with parameter servers cannot change size: ParameterServerStrategy spreads "
                "the variables over the ps tasks it started with, and its coordinator schedules on the "
                "workers it found when it started")

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        _single(spec, "chief", problems, "TensorFlow has one chief")
        _single(spec, "evaluator", problems, "TensorFlow has one evaluator")
        if not ({"chief", "worker"} & set(spec.roles)):
            problems.append(("roles", "TensorFlow needs a 'chief' or a 'worker' role"))
        return problems

    def env(self, cluster: Cluster, role: str, index: int, local_rank: int = 0,
            processes_by_role: Optional[Mapping[str, int]] = None, run: TaskRun = NO_TASK_RUN) -> Dict[str, str]:
        if role == "tensorboard":
            return {}
        tf_cluster = {r: list(cluster[r]) for r in self.cluster_roles if cluster.get(r)}
        if role == "evaluator":
            tf_cluster["evaluator"] = list(cluster.get("evaluator", ()))
        config = {"cluster": tf_cluster, "task": {"type": role, "index": index}, "environment": "cloud"}
        return {"TF_CONFIG": json.dumps(config, sort_keys=True)}


class Horovod(Framework):
    """Horovod over Gloo: ranks, sizes and the rendezvous address (rank 0's port).

    One worker task is one host of ``horovodrun -H host0:P,host1:P,...``: process i of
    task t (N tasks of P processes) is rank t*P + i of N*P, local rank i of P, cross rank t
    of N (the tasks' processes of local rank i, in task order), as horovodrun's host
    assignment gives them.
    """

    name = "horovod"
    roles = ("worker", "tensorboard")
    reuses_port = True
    multi_process_roles = ("worker",)
    one_process_why = "tensorboard is outside Horovod's ranks and runs one process per task"

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        if "worker" not in spec.roles:
            problems.append(("roles.worker", "Horovod needs a 'worker' role (its ranks); it has none"))
        return problems

    def env(self, cluster: Cluster, role: str, index: int, local_rank: int = 0,
            processes_by_role: Optional[Mapping[str, int]] = None, run: TaskRun = NO_TASK_RUN) -> Dict[str, str]:
        workers = list(cluster.get("worker", ()))
        if role != "worker" or index >= len(workers):
            return {}
        per_task = (processes_by_role or {}).get("worker", 1)
        return {
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": _host(workers[0]),
            "HOROVOD_GLOO_RENDEZVOUS_PORT": _port(workers[0]),
            # Gloo meets the processes of one "host" under a key made of this name (its local
            # communicator), and each local rank's processes across hosts under another (its
            # cross communicator). Two tasks on one machine are two hosts here: with the
            # machine's name alone, their local ranks 0 would meet as one. The task makes it unique.
            "HOROVOD_HOSTNAME": f"{_host(workers[index])}-worker-{index}",
            "HOROVOD_RANK": str(index * per_task + local_rank),
            "HOROVOD_SIZE": str(len(workers) * per_task),
            "HOROVOD_LOCAL_RANK": str(local_rank),
            "HOROVOD_LOCAL_SIZE": str(per_task),
            "HOROVOD_CROSS_RANK": str(index),
            "HOROVOD_CROSS_SIZE": str(len(workers)),
        }


class MXNet(Framework):
    """MXNet's parameter server (ps-lite): ``DMLC_*`` variables."""

    name = "mxnet"
    roles = ("scheduler", "server", "worker", "tensorboard")
    untracked = ("scheduler", "server", "tensorboard")
    reuses_port = True
    multi_process_roles = ()
    one_process_why = ("MXNet runs one process per task (ps-lite has no local ranks; give the role "
                       "more instances instead)")

    def fixed_size_why(self, spec) -> Optional[str]:
        return ("MXNet cannot change size: ps-lite's scheduler waits for exactly DMLC_NUM_WORKER workers "
                "and DMLC_NUM_SERVER servers, and the keys are split over the servers it started with")

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        sched = spec.roles.get("scheduler")
        if sched is None or sched.instances != 1:
            problems.append(("roles.scheduler", "MXNet needs exactly one scheduler, got "
                                                f"{sched.instances if sched else 'none'}"))
        for role, what in (("server", "the parameter servers"), ("worker", "the training processes")):
            if role not in spec.roles:
                problems.append((f"roles.{role}", f"MXNet needs at least one {role} ({what}); it has none"))
        return problems

    def env(self, cluster: Cluster, role: str, index: int, local_rank: int = 0,
            processes_by_role: Optional[Mapping[str, int]] = None, run: TaskRun = NO_TASK_RUN) -> Dict[str, str]:
        if role == "tensorboard" or not cluster.get("scheduler"):
            return {}
        sched = cluster["scheduler"][0]
        env = {
            "DMLC_ROLE": role,
            "DMLC_PS_ROOT_URI": _host(sched),
            "DMLC_PS_ROOT_PORT": _port(sched),
            "DMLC_NUM_SERVER": str(len(cluster.get("server", ()))),
            "DMLC_NUM_WORKER": str(len(cluster.get("worker", ()))),
        }
        if role in ("server", "worker"):
            env["DMLC_NODE_HOST"] = _host(cluster[role][index])
        return env


_FRAMEWORKS: Dict[str, Framework] = {f.name: f for f in (Framework(), PyTorch(), TensorFlow(), Horovod(), MXNet())}


def get_framework(name: str) -> Framework:
    return _FRAMEWORKS[name]
