"""What each framework needs: which roles it accepts, which it tracks, and the
environment its processes read to find each other.

Every function here is pure: the cluster spec goes in (role -> list of
``host:port``, in index order), the task's environment comes out.

Local ranks index into what a task sees. A task with GPUs sees only its own
(``CUDA_VISIBLE_DEVICES`` locally, YARN's GPU isolation, ``--gpus`` in Docker),
so for it ``LOCAL_RANK`` is 0 and ``LOCAL_WORLD_SIZE`` 1, and
``torch.cuda.set_device(LOCAL_RANK)`` names a device it can use. Tasks without
GPUs count the GPU-less tasks of their host (``isolated`` names the others).
"""
from __future__ import annotations

import json
from typing import AbstractSet, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from .units import split_address

Cluster = Mapping[str, Sequence[str]]
Problem = Tuple[str, str]
TaskKey = Tuple[str, int]


class Framework:
    name = "custom"
    #: Roles the framework knows; None: any role name.
    roles: Tuple[str, ...] = ()
    #: Roles whose tasks never finish by themselves; the job does not wait for them.
    untracked: Tuple[str, ...] = ("tensorboard",)
    #: Whether the framework binds its port with SO_REUSEADDR, so the executor can keep
    #: holding the reserved port while the framework process takes it (no port race).
    reuses_port = False

    def check(self, spec) -> List[Problem]:
        problems: List[Problem] = []
        if self.roles:
            for role in spec.roles:
                if role not in self.roles:
                    problems.append((f"roles.{role}", f"{self.name} knows the roles {', '.join(self.roles)}"))
        roles = list(spec.roles)
        if not any(self.is_tracked(r.name, r.tracked, roles) for r in spec.roles.values()):
            problems.append(("roles", "no role is tracked, so the job could never finish; "
                                      f"add a role other than {', '.join(self.untracked_roles(roles))}"))
        return problems

    def untracked_roles(self, roles: Collection[str] = ()) -> Tuple[str, ...]:
        """Roles the job does not wait for by default, given the job's ``roles``."""
        return self.untracked

    def is_tracked(self, role: str, override: Optional[bool] = None, roles: Collection[str] = ()) -> bool:
        return override if override is not None else role not in self.untracked_roles(roles)

    def env(self, cluster: Cluster, role: str, index: int,
            isolated: AbstractSet[TaskKey] = frozenset()) -> Dict[str, str]:
        """The framework's own variables for task ``role:index``; ``isolated``: the tasks that
        see only their own GPUs."""
        return {}


def _host(addr: str) -> str:
    return split_address(addr)[0]


def _port(addr: str) -> str:
    return split_address(addr)[1]


def _local(world: Sequence[Tuple[str, int, str]], rank: int, isolated: AbstractSet[TaskKey]) -> Tuple[int, int]:
    """(local rank, local world size) of ``world[rank]``: 0 and 1 for a task with its own GPUs,
    else its place among the tasks of its host that have none."""
    role, index, addr = world[rank]
    if (role, index) in isolated:
        return 0, 1
    host = _host(addr)
    same = [n for n, (r, i, a) in enumerate(world) if _host(a) == host and (r, i) not in isolated]
    return same.index(rank), len(same)


def _single(spec, role: str, problems: List[Problem], why: str) -> None:
    r = spec.roles.get(role)
    if r is not None and r.instances > 1:
        problems.append((f"roles.{role}.instances", f"{why}: at most 1, got {r.instances}"))


class PyTorch(Framework):
    """``torch.distributed`` with the env:// rendezvous.

    Ranks: ``master`` (or ``chief``) first, then ``worker`` in index order.
    """

    name = "pytorch"
    roles = ("master", "chief", "worker", "tensorboard")
    reuses_port = True  # c10d's TCPStore sets SO_REUSEADDR

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
        out = []
        for role in ("master", "chief", "worker"):
            for i, addr in enumerate(cluster.get(role, ())):
                out.append((role, i, addr))
        return out

    def env(self, cluster: Cluster, role: str, index: int,
            isolated: AbstractSet[TaskKey] = frozenset()) -> Dict[str, str]:
        world = self.world(cluster)
        ranks = {(r, i): n for n, (r, i, _) in enumerate(world)}
        if (role, index) not in ranks:
            return {}
        rank = ranks[(role, index)]
        local_rank, local_size = _local(world, rank, isolated)
        master = world[0][2]
        return {
            "MASTER_ADDR": _host(master),
            "MASTER_PORT": _port(master),
            "WORLD_SIZE": str(len(world)),
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_size),
        }


class TensorFlow(Framework):
    """``TF_CONFIG`` for ``tf.distribute`` and estimators."""

    name = "tensorflow"
    roles = ("chief", "worker", "ps", "evaluator", "tensorboard")
    untracked = ("ps", "tensorboard")
    reuses_port = True  # gRPC servers set SO_REUSEADDR and SO_REUSEPORT
    cluster_roles = ("chief", "worker", "ps")

    def untracked_roles(self, roles: Collection[str] = ()) -> Tuple[str, ...]:
        """With a ``ps`` and a ``chief`` (ParameterServerStrategy), workers serve like ps until
        stopped (``server.join()``): the chief, the coordinator, decides the end."""
        if "ps" in roles and "chief" in roles:
            return ("worker",) + self.untracked
        return self.untracked

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        _single(spec, "chief", problems, "TensorFlow has one chief")
        _single(spec, "evaluator", problems, "TensorFlow has one evaluator")
        if not ({"chief", "worker"} & set(spec.roles)):
            problems.append(("roles", "TensorFlow needs a 'chief' or a 'worker' role"))
        return problems

    def env(self, cluster: Cluster, role: str, index: int,
            isolated: AbstractSet[TaskKey] = frozenset()) -> Dict[str, str]:
        if role == "tensorboard":
            return {}
        tf_cluster = {r: list(cluster[r]) for r in self.cluster_roles if cluster.get(r)}
        if role == "evaluator":
            tf_cluster["evaluator"] = list(cluster.get("evaluator", ()))
        config = {"cluster": tf_cluster, "task": {"type": role, "index": index}, "environment": "cloud"}
        return {"TF_CONFIG": json.dumps(config, sort_keys=True)}


class Horovod(Framework):
    """Horovod over Gloo: ranks, sizes and the rendezvous address (rank 0's port)."""

    name = "horovod"
    roles = ("worker", "tensorboard")
    reuses_port = True

    def check(self, spec) -> List[Problem]:
        problems = super().check(spec)
        if "worker" not in spec.roles:
            problems.append(("roles.worker", "Horovod needs a 'worker' role (its ranks); it has none"))
        return problems

    def env(self, cluster: Cluster, role: str, index: int,
            isolated: AbstractSet[TaskKey] = frozenset()) -> Dict[str, str]:
        workers = list(cluster.get("worker", ()))
        if role != "worker" or index >= len(workers):
            return {}
        host = _host(workers[index])
        # A worker with its own GPUs is alone on a "host" of its own, as it sees the machine.
        slots = [f"{_host(a)}#{i}" if ("worker", i) in isolated else _host(a) for i, a in enumerate(workers)]
        me = slots[index]
        hosts = list(dict.fromkeys(slots))
        local = [i for i, s in enumerate(slots) if s == me]
        local_rank = local.index(index)
        cross = [h for h in hosts if sum(s == h for s in slots) > local_rank]
        return {
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": _host(workers[0]),
            "HOROVOD_GLOO_RENDEZVOUS_PORT": _port(workers[0]),
            "HOROVOD_HOSTNAME": host,
            "HOROVOD_RANK": str(index),
            "HOROVOD_SIZE": str(len(workers)),
            "HOROVOD_LOCAL_RANK": str(local_rank),
            "HOROVOD_LOCAL_SIZE": str(len(local)),
            "HOROVOD_CROSS_RANK": str(cross.index(me)),
            "HOROVOD_CROSS_SIZE": str(len(cross)),
        }


class MXNet(Framework):
    """MXNet's parameter server (ps-lite): ``DMLC_*`` variables."""

    name = "mxnet"
    roles = ("scheduler", "server", "worker", "tensorboard")
    untracked = ("scheduler", "server", "tensorboard")
    reuses_port = True

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

    def env(self, cluster: Cluster, role: str, index: int,
            isolated: AbstractSet[TaskKey] = frozenset()) -> Dict[str, str]:
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
