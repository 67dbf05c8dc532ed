"""Typed, frozen job-spec dataclasses.

``validate.spec_from_dict`` validates a dict (``validate.py`` collects every problem with its
path, ``roles.worker.resources.gpus: ...``, and raises one :class:`SpecError`);
``JobSpec.to_dict`` gives a dict that ``spec_from_dict`` reads back unchanged. The field-level
rules and limits live in ``fields.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..states import Placement, RestartPolicy
from ..units import format_memory

FRAMEWORKS = ("pytorch", "tensorflow", "horovod", "mxnet", "custom")
RESTART_POLICIES = tuple(p.value for p in RestartPolicy)
#: A role's fields in the job file, in the order ``RoleSpec.to_dict`` writes them.
ROLE_FIELDS = ("instances", "processes", "resources", "command", "env", "docker", "node_label", "tracked")
#: ``processes: gpus``: one process per GPU of the role's tasks.
PER_GPU = "gpus"
#: The job file's top-level fields.
JOB_FIELDS = ("name", "framework", "queue", "restart", "timeouts", "roles", "files", "docker",
              "environment", "tags", "shared_dir", "tensorboard", "placement", "sweep", "acls", "kerberos")
#: The role of the task that runs the job's TensorBoard (the ``tensorboard`` field); every
#: framework knows it and leaves it untracked.
TENSORBOARD_ROLE = "tensorboard"
NETWORKS = ("host", "bridge", "none")
#: 3 s: enough for a task to flush logs and close files on SIGTERM, short enough that a
#: framework that ignores SIGTERM adds little to each gang restart (YARN's own SIGTERM-SIGKILL
#: delay is 250 ms). Jobs that checkpoint on SIGTERM raise it.
DEFAULT_STOP_GRACE_SECONDS = 3.0
#: 20 s: YARN grants a fitting gang within a few node heartbeats (1 s each), Docker images and
#: a loaded RM included; a gang not complete by then is competing for the room it saw.
DEFAULT_HOLD_SECONDS = 20.0
MIN_HOLD_SECONDS, MAX_HOLD_SECONDS = 2.0, 600.0
#: Three missed heartbeats (one every 2 s): well within the 10 s a dead machine may go unnoticed.
DEFAULT_LOST_AFTER_SECONDS = 6.0
#: Restarts for the program's failures when the job file gives none: a failure fails the job.
DEFAULT_MAX_RESTARTS = 0
#: Restarts for the cluster's faults (preemption, a lost node) unless the job file says: more than
#: a program's failures get by default (none), since the program did nothing wrong, yet bounded,
#: since a job preempted over and over on a full cluster is better failed than churning.
DEFAULT_MAX_CLUSTER_RESTARTS = 10
#: 10 s: an elastic gang whose ``min`` tasks are up waits this long for more on their way before
#: it starts, and lets this long pass between two changes of its size (each one is a gang restart
#: that reloads the checkpoint, so growing by every container as it arrives would cost more than
#: it gains).
DEFAULT_SETTLE_SECONDS = 10.0
MAX_SETTLE_SECONDS = 600.0


#: A role's resources where its job file says none (``Resources()`` is none at all).
DEFAULT_MEMORY_MB, DEFAULT_VCORES = 2048, 1


@dataclass(frozen=True)
class Resources:
    """Resources of one container: a role's (the job file's ``resources``), and what admission
    weighs them against (``submarine_py/admission.py``, which calls them ``Need``): what is free
    on a node, left in a queue."""

    memory_mb: int = 0
    vcores: int = 0
    gpus: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"memory": format_memory(self.memory_mb), "vcores": self.vcores, "gpus": self.gpus}

    def fits_in(self, room: "Resources") -> bool:
        return self.memory_mb <= room.memory_mb and self.vcores <= room.vcores and self.gpus <= room.gpus

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(self.memory_mb + other.memory_mb, self.vcores + other.vcores, self.gpus + other.gpus)

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(self.memory_mb - other.memory_mb, self.vcores - other.vcores, self.gpus - other.gpus)


@dataclass(frozen=True)
class DockerSpec:
    image: str
    mounts: Tuple[str, ...] = ()
    network: str = "host"

    def to_dict(self) -> Dict[str, Any]:
        return {"image": self.image, "mounts": list(self.mounts), "network": self.network}


@dataclass(frozen=True)
class RestartSpec:
    """The job file's ``restart`` section."""

    policy: RestartPolicy = RestartPolicy.GANG
    #: Restarts for the program's failures (its command failed, it hung).
    max_restarts: int = DEFAULT_MAX_RESTARTS
    #: Restarts for the cluster's faults (its container preempted, its node lost): they spend
    #: none of ``max_restarts`` (see ``restarts.py``).
    max_cluster_restarts: int = DEFAULT_MAX_CLUSTER_RESTARTS


@dataclass(frozen=True)
class Timeouts:
    #: Every task up and registered within this many seconds, or the job fails.
    gang_seconds: int = 300
    #: The whole job must end within this many seconds (None: no limit).
    job_seconds: Optional[int] = None
    #: How long a task may take to exit after SIGTERM (job end, gang restart, kill) before
    #: SIGKILL. A task that exits sooner is not waited for. The trade-off: time to write a
    #: checkpoint on SIGTERM against time added to every restart by a task that never exits
    #: on SIGTERM (TensorFlow's MultiWorkerMirroredStrategy catches it once made, and trains
    #: on unless the program uses PreemptionCheckpointHandler: docs/restarts.md).
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    #: An executor silent this long is declared lost (a machine that dies closes no connection):
    #: its container is released and replaced, a failure under the restart policy. Executors
    #: call the AM every third of it (at most every 2 s). The trade-off: how soon a dead node is
    #: noticed against a busy or briefly unreachable node mistaken for a dead one.
    lost_after_seconds: float = DEFAULT_LOST_AFTER_SECONDS
    #: A tracked task that prints nothing (stdout and stderr) for this long, and uses none of its
    #: GPUs where they are sampled, has hung: it is stopped and fails, under the restart policy
    #: (None: off). The trade-off: how long a hung gang holds its GPUs against a quiet phase of a
    #: healthy program (a long evaluation, a checkpoint written without a word) taken for a hang.
    hang_seconds: Optional[int] = None
    #: How long the job may wait for room for its gang (queued, holding no task container)
    #: before it fails (None: as long as it takes; waiting for capacity is no failure).
    queue_seconds: Optional[int] = None
    #: Admission is a forecast: a gang asked for and not all granted within this many seconds
    #: is given back whole, and the job waits again (no part of a gang held idle for longer).
    #: The trade-off: a busy cluster's slow grants against GPUs held idle in a partial gang.
    hold_seconds: float = DEFAULT_HOLD_SECONDS
    #: Elastic roles (``instances: {min, max}``): how long a gang with its ``min`` up waits for
    #: tasks on their way before it starts, and the least time between two changes of its size
    #: (``docs/elastic.md``).
    settle_seconds: float = DEFAULT_SETTLE_SECONDS


@dataclass(frozen=True)
class EnvironmentSpec:
    """How Python reaches YARN containers.

    ``python``: an interpreter path present on every node (default: the
    submitting interpreter). ``archive``: a conda-pack/venv-pack ``.tar.gz`` or
    ``.zip``, unpacked once per node into ``cache_dir`` (default
    ``/tmp/subm-envs-<uid>``) and reused by later containers and jobs with the
    same content; tasks find its ``bin`` first on PATH.
    """

    python: Optional[str] = None
    archive: Optional[str] = None
    cache_dir: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in (("python", self.python), ("archive", self.archive),
                                  ("cache_dir", self.cache_dir)) if v}


@dataclass(frozen=True)
class TensorBoardSpec:
    """The job file's ``tensorboard`` section: TensorBoard runs beside the job as the task
    ``tensorboard:0``, reading ``logdir``, which every task finds in ``SUBM_TENSORBOARD_DIR``.

    ``logdir``: an absolute path every task can write to, or a URI TensorBoard reads
    (``hdfs://...``, ``gs://...``); None: ``tensorboard/`` in the job's shared folder."""

    logdir: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"logdir": self.logdir} if self.logdir else {}


#: An ``acls`` entry that names a group rather than a user.
GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class AclSpec:
    """The job file's ``acls``: who besides the job's owner (and the cluster's admins, YARN's
    ``yarn.admin.acl``) may view the job (``view``: its status, logs, the AM's page) and who
    may modify it (``modify``: kill it). Entries are user names, ``group:NAME`` for a group,
    or ``*`` for everyone; with ``acls`` given, everyone else is refused."""

    view: Tuple[str, ...] = ()
    modify: Tuple[str, ...] = ()

    def users(self, which: str) -> Tuple[str, ...]:
        return tuple(x for x in getattr(self, which) if not x.startswith(GROUP_PREFIX))

    def groups(self, which: str) -> Tuple[str, ...]:
        return tuple(x[len(GROUP_PREFIX):] for x in getattr(self, which) if x.startswith(GROUP_PREFIX))

    def to_dict(self) -> Dict[str, Any]:
        return {"view": list(self.view), "modify": list(self.modify)}


@dataclass(frozen=True)
class KerberosSpec:
    """The job file's ``kerberos``: the principal and keytab to submit with on a secure
    cluster (``--principal/--keytab`` and ``SUBM_PRINCIPAL/SUBM_KEYTAB`` come first); without
    it, the ticket cache of ``kinit``."""

    principal: str
    keytab: str

    def to_dict(self) -> Dict[str, Any]:
        return {"principal": self.principal, "keytab": self.keytab}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a sweep: a range (``low``..``high``, on a log scale if ``log``; whole
    numbers when both ends are) or a list of ``choices``."""

    low: Optional[Union[int, float]] = None
    high: Optional[Union[int, float]] = None
    log: bool = False
    choices: Tuple[Any, ...] = ()

    @property
    def is_range(self) -> bool:
        return not self.choices

    @property
    def whole(self) -> bool:
        """A range of whole numbers (both ends written as integers)."""
        return self.is_range and isinstance(self.low, int) and isinstance(self.high, int)

    def to_dict(self) -> Any:
        if self.choices:
            return list(self.choices)
        d: Dict[str, Any] = {"low": self.low, "high": self.high}
        if self.log:
            d["log"] = True
        return d


@dataclass(frozen=True)
class EarlyStopSpec:
    """``sweep.early_stop``: stop a trial whose intermediate value is worse than the median of
    earlier trials' at the same step (Optuna's MedianPruner), after ``warmup_steps`` steps of
    the trial and once ``startup_trials`` trials have finished."""

    rule: str = "median"
    warmup_steps: int = 0
    startup_trials: int = 5

    def to_dict(self) -> Dict[str, Any]:
        return {"rule": self.rule, "warmup_steps": self.warmup_steps, "startup_trials": self.startup_trials}


@dataclass(frozen=True)
class SweepSpec:
    """The job file's ``sweep`` section: the whole sweep runs as one job, each trial the job's
    task with its parameters in ``SUBM_PARAM_<NAME>`` (see docs/sweeps.md)."""

    metric: str
    params: Mapping[str, ParamSpec]
    trials: int
    goal: str = "minimize"
    algorithm: str = "tpe"
    parallel: int = 1
    seed: Optional[int] = None
    early_stop: Optional[EarlyStopSpec] = None
    #: Trials that may fail before the sweep fails (a failed trial is recorded, the sweep goes on).
    max_failed_trials: int = 3

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"metric": self.metric, "goal": self.goal, "algorithm": self.algorithm,
                             "trials": self.trials, "parallel": self.parallel,
                             "max_failed_trials": self.max_failed_trials,
                             "params": {k: p.to_dict() for k, p in self.params.items()}}
        if self.seed is not None:
            d["seed"] = self.seed
        if self.early_stop is not None:
            d["early_stop"] = self.early_stop.to_dict()
        return d


@dataclass(frozen=True)
class RoleSpec:
    name: str
    command: str
    #: Tasks of the role; for an elastic role, the most (``instances.max``).
    instances: int = 1
    resources: Resources = field(default_factory=lambda: Resources(DEFAULT_MEMORY_MB, DEFAULT_VCORES))
    env: Mapping[str, str] = field(default_factory=dict)
    docker: Optional[DockerSpec] = None
    node_label: Optional[str] = None
    #: None: the framework decides (e.g. TensorFlow ``ps`` is untracked).
    tracked: Optional[bool] = None
    #: Processes each task starts, as the job file gives it: a number, or ``PER_GPU`` (one per
    #: GPU of ``resources.gpus``). ``process_count`` is the number.
    processes: Union[int, str] = 1
    #: An elastic role (``instances: {min: 2, max: 8}``): the fewest of its tasks the job runs
    #: with; None: the role always runs ``instances`` tasks.
    min_instances: Optional[int] = None

    @property
    def elastic(self) -> bool:
        """Whether the role's size may change while the job runs (``docs/elastic.md``)."""
        return self.min_instances is not None

    @property
    def fewest(self) -> int:
        """The fewest tasks of the role the job runs with (``instances`` unless elastic)."""
        return self.instances if self.min_instances is None else self.min_instances

    @property
    def process_count(self) -> int:
        """How many processes each of the role's tasks starts (torchrun's ``nproc_per_node``)."""
        return self.resources.gpus if self.processes == PER_GPU else int(self.processes)

    def to_dict(self) -> Dict[str, Any]:
        values: Dict[str, Any] = {
            "instances": {"min": self.min_instances, "max": self.instances} if self.elastic else self.instances,
            "processes": None if self.processes == 1 else self.processes,
            "resources": self.resources.to_dict(),
            "command": self.command or None,  # none: the job's TensorBoard (see TensorBoardSpec)
            "env": dict(self.env),
            "docker": self.docker.to_dict() if self.docker else None,
            "node_label": self.node_label or None,
            "tracked": self.tracked,
        }
        return {k: values[k] for k in ROLE_FIELDS if values[k] is not None}


@dataclass(frozen=True)
class JobSpec:
    name: str
    roles: Mapping[str, RoleSpec]
    framework: str = "custom"
    queue: str = "default"
    restart: RestartSpec = field(default_factory=RestartSpec)
    timeouts: Timeouts = field(default_factory=Timeouts)
    #: destination in each task's working directory -> absolute source path
    files: Mapping[str, str] = field(default_factory=dict)
    docker: Optional[DockerSpec] = None
    environment: EnvironmentSpec = field(default_factory=EnvironmentSpec)
    tags: Tuple[str, ...] = ()
    #: YARN: an absolute path every node mounts (NFS...); each job gets a subfolder there,
    #: its tasks' SUBM_SHARED_DIR. The local backend always has one (in the job's folder).
    shared_dir: Optional[str] = None
    #: TensorBoard beside the job (None: none). Its task is the role TENSORBOARD_ROLE, in
    #: ``roles`` like any other (spelled out in the job file, or added with the defaults).
    tensorboard: Optional[TensorBoardSpec] = None
    #: Where a gang's tasks go: on as few nodes as the free GPUs allow (``pack``), or one per
    #: node where possible (``spread``).
    placement: Placement = Placement.PACK
    #: A hyperparameter sweep run as this one job (None: an ordinary job).
    sweep: Optional[SweepSpec] = None
    #: Who may view and modify (kill) the job besides its owner (None: YARN's defaults).
    acls: Optional[AclSpec] = None
    #: The principal and keytab to submit with on a secure cluster (None: the ticket cache).
    kerberos: Optional[KerberosSpec] = None

    @property
    def elastic(self) -> bool:
        """Whether a role of the job is elastic (its size may change while it runs)."""
        return any(role.elastic for role in self.roles.values())

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "name": self.name,
            "framework": self.framework,
            "queue": self.queue,
            "restart": {"policy": self.restart.policy.value, "max_restarts": self.restart.max_restarts,
                        "max_cluster_restarts": self.restart.max_cluster_restarts},
            "timeouts": {"gang_seconds": self.timeouts.gang_seconds,
                         "stop_grace_seconds": self.timeouts.stop_grace_seconds,
                         "lost_after_seconds": self.timeouts.lost_after_seconds},
            "roles": {name: role.to_dict() for name, role in self.roles.items()},
            "files": dict(self.files),
        }
        if self.timeouts.job_seconds is not None:
            d["timeouts"]["job_seconds"] = self.timeouts.job_seconds
        if self.timeouts.hang_seconds is not None:
            d["timeouts"]["hang_seconds"] = self.timeouts.hang_seconds
        if self.timeouts.queue_seconds is not None:
            d["timeouts"]["queue_seconds"] = self.timeouts.queue_seconds
        if self.timeouts.hold_seconds != DEFAULT_HOLD_SECONDS:
            d["timeouts"]["hold_seconds"] = self.timeouts.hold_seconds
        if self.timeouts.settle_seconds != DEFAULT_SETTLE_SECONDS:
            d["timeouts"]["settle_seconds"] = self.timeouts.settle_seconds
        if self.placement != Placement.PACK:
            d["placement"] = self.placement.value
        if self.docker:
            d["docker"] = self.docker.to_dict()
        if self.environment.to_dict():
            d["environment"] = self.environment.to_dict()
        if self.tags:
            d["tags"] = list(self.tags)
        if self.shared_dir:
            d["shared_dir"] = self.shared_dir
        if self.tensorboard:
            d["tensorboard"] = self.tensorboard.to_dict()
        if self.sweep:
            d["sweep"] = self.sweep.to_dict()
        if self.acls:
            d["acls"] = self.acls.to_dict()
        if self.kerberos:
            d["kerberos"] = self.kerberos.to_dict()
        return d

