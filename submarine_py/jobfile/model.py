"""Typed, frozen job-spec dataclasses, validated when built from a dict.

``JobSpec.from_dict`` collects every problem with its path
(``roles.worker.resources.gpus: ...``) and raises one :class:`SpecError`.
``JobSpec.to_dict`` gives a dict that ``from_dict`` reads back unchanged.
"""
from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import ProblemCollector, SpecError
from ..states import RestartPolicy
from .files import ENV_ARCHIVE_DIR, RESERVED_FILE_PREFIXES, RESERVED_FILES, destination, source_problem
from ..units import format_memory, parse_memory

FRAMEWORKS = ("pytorch", "tensorflow", "horovod", "mxnet", "custom")
RESTART_POLICIES = tuple(p.value for p in RestartPolicy)
#: A role's fields in the job file, in the order ``RoleSpec.to_dict`` writes them.
ROLE_FIELDS = ("instances", "resources", "command", "env", "docker", "node_label", "tracked")
#: The job file's top-level fields.
JOB_FIELDS = ("name", "framework", "queue", "restart", "timeouts", "roles", "files", "docker",
              "environment", "tags", "shared_dir")
NETWORKS = ("host", "bridge", "none")
ROLE_NAME = _NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,62}\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# [registry[:port]/]path[:tag][@digest], lower-case path components as Docker requires.
_IMAGE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?\Z"
)
RESERVED_ENV_PREFIX = "SUBM_"
#: 3 s: enough for a task to flush logs and close files on SIGTERM, short enough that a
#: framework that ignores SIGTERM adds little to each gang restart (YARN's own SIGTERM-SIGKILL
#: delay is 250 ms). Jobs that checkpoint on SIGTERM raise it.
DEFAULT_STOP_GRACE_SECONDS = 3.0
MAX_STOP_GRACE_SECONDS = 3600
#: A name YARN turns into a file of the container's directory (a ``files`` destination or a
#: source's base name): YARN's launch script writes it between double quotes, so no ``$``,
#: backquote, quote, backslash or control character may reach it; no ``:``/``#``/``%``/``?``
#: (URIs) and no leading ``-`` (an option to ``ln``).
_FILE_NAME = re.compile(r"^[A-Za-z0-9._+@=,~][A-Za-z0-9._+@=,~ -]*\Z")
#: A host or container path of a Docker mount (YARN separates mounts with ',' and fields with ':').
_MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._+@=~/-]*\Z")
#: A queue name or path (root.team.a): no spaces, no empty parts.
_QUEUE = re.compile(r"^[A-Za-z0-9_@+-]+(?:\.[A-Za-z0-9_@+-]+)*\Z")
#: YARN's node label names; Hadoop 3.1 takes one label per request.
_NODE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,254}\Z")
#: Linux: one argument or ``NAME=value`` string of a process (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 131072
#: What a task's own variables and command may take of the kernel's ARG_MAX (2 MiB with the
#: usual 8 MiB stack), leaving the rest to the container's inherited environment and subm's.
MAX_TASK_ARGS_BYTES = 1 << 20
#: Upper bounds: beyond them a number is a typo, and YARN's int32 fields would overflow.
MAX_INSTANCES = 1000
MAX_VCORES = 1024
MAX_GPUS = 64
MAX_GANG_SECONDS = 24 * 3600
MAX_JOB_SECONDS = 366 * 24 * 3600
#: YARN keeps at most 10 tags of at most 100 characters; submarine-py uses one itself.
MAX_TAGS = 9
MAX_TAG_CHARS = 100


@dataclass(frozen=True)
class Resources:
    memory_mb: int = 2048
    vcores: int = 1
    gpus: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"memory": format_memory(self.memory_mb), "vcores": self.vcores, "gpus": self.gpus}


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
    max_restarts: int = 0


@dataclass(frozen=True)
class Timeouts:
    #: Every task up and registered within this many seconds, or the job fails.
    gang_seconds: int = 300
    #: The whole job must end within this many seconds (None: no limit).
    job_seconds: Optional[int] = None
    #: How long a task may take to exit after SIGTERM (job end, gang restart, kill) before
    #: SIGKILL. A task that exits sooner is not waited for. The trade-off: time to write a
    #: checkpoint on SIGTERM against time added to every restart by a task that never exits
    #: on SIGTERM (TensorFlow catches it once its strategy is up).
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS


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
class RoleSpec:
    name: str
    command: str
    instances: int = 1
    resources: Resources = field(default_factory=Resources)
    env: Mapping[str, str] = field(default_factory=dict)
    docker: Optional[DockerSpec] = None
    node_label: Optional[str] = None
    #: None: the framework decides (e.g. TensorFlow ``ps`` is untracked).
    tracked: Optional[bool] = None

    def to_dict(self) -> Dict[str, Any]:
        values: Dict[str, Any] = {
            "instances": self.instances,
            "resources": self.resources.to_dict(),
            "command": self.command,
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

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "name": self.name,
            "framework": self.framework,
            "queue": self.queue,
            "restart": {"policy": self.restart.policy.value, "max_restarts": self.restart.max_restarts},
            "timeouts": {"gang_seconds": self.timeouts.gang_seconds,
                         "stop_grace_seconds": self.timeouts.stop_grace_seconds},
            "roles": {name: role.to_dict() for name, role in self.roles.items()},
            "files": dict(self.files),
        }
        if self.timeouts.job_seconds is not None:
            d["timeouts"]["job_seconds"] = self.timeouts.job_seconds
        if self.docker:
            d["docker"] = self.docker.to_dict()
        if self.environment.to_dict():
            d["environment"] = self.environment.to_dict()
        if self.tags:
            d["tags"] = list(self.tags)
        if self.shared_dir:
            d["shared_dir"] = self.shared_dir
        return d

    @classmethod
    def from_dict(cls, data: Any, base_dir: Optional[str] = None, check_files: bool = True) -> "JobSpec":
        """Validate ``data`` and build a spec; relative file sources resolve against ``base_dir``.

        ``check_files=False`` skips checking that local sources exist (the AM on a
        cluster node reads a spec whose files were checked where it was submitted).
        """
        return _Builder(base_dir or os.getcwd(), check_files).job(data)


class _Builder(ProblemCollector):
    """Walks a raw dict, collecting every problem with its path."""

    def __init__(self, base_dir: str, check_files: bool = True):
        super().__init__()
        self.base_dir = base_dir
        self.check_files = check_files

    # -- helpers ----------------------------------------------------------
    def mapping(self, value: Any, path: str, known: Tuple[str, ...]) -> Dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping, got {_show(value)}")
            return {}
        for key in value:
            if not isinstance(key, str):
                self.fail(_join(path, str(key)), f"field names must be strings, got {_show(key)}")
            elif key not in known:
                hint = difflib.get_close_matches(key, known, n=1)
                more = f"; did you mean '{hint[0]}'?" if hint else f"; known fields: {', '.join(known)}"
                self.fail(_join(path, key), f"unknown field{more}")
        return value

    def integer(self, value: Any, path: str, minimum: int, default: int, maximum: Optional[int] = None) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(path, f"expected a whole number >= {minimum}, got {_show(value)}")
            return default
        if maximum is not None and value > maximum:
            self.fail(path, f"expected at most {maximum}, got {_show(value)}")
            return default
        return value

    def seconds(self, value: Any, path: str, default: float, maximum: float) -> float:
        """A duration in seconds: a number (whole or not) from 0 to ``maximum``."""
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= maximum:
            self.fail(path, f"expected a number of seconds from 0 to {maximum:g}, got {_show(value)}")
            return default
        return float(value)

    def string(self, value: Any, path: str, default: Optional[str] = None, required: bool = False) -> Optional[str]:
        if value is None:
            if required:
                self.fail(path, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(path, f"expected a string, got {_show(value)}")
            return default
        value = str(value)
        if required and not value.strip():
            self.fail(path, "must not be empty")
        if "\x00" in value:  # no process argument, path or environment value can hold one
            self.fail(path, "must not contain a NUL character")
            return default
        return value

    def choice(self, value: Any, path: str, choices: Tuple[str, ...], default: str) -> str:
        if value is None:
            return default
        if value not in choices:
            self.fail(path, f"expected one of {', '.join(choices)}, got {_show(value)}")
            return default
        return value

    # -- sections -----------------------------------------------------------
    def job(self, data: Any) -> JobSpec:
        if not isinstance(data, dict):
            raise SpecError([("", f"the job file must be a YAML mapping, got {_show(data)}")])
        self.mapping(data, "", JOB_FIELDS)
        name = self.string(data.get("name"), "name", required=True) or "job"
        if name and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z", name):
            self.fail("name", f"expected letters, digits, '.', '_' or '-' (at most 100), got {name!r}")
        framework = self.choice(data.get("framework"), "framework", FRAMEWORKS, "custom")
        queue = self.string(data.get("queue"), "queue", default="default")
        queue = "default" if queue is None else queue
        if len(queue) > 255 or not _QUEUE.match(queue):
            self.fail("queue", "expected a YARN queue name or path (letters, digits, '_', '-', '@', '+', "
                               f"parts joined by '.', no spaces), got {_show(queue)}")
        restart = self.restart(data.get("restart"))
        timeouts = self.timeouts(data.get("timeouts"))
        docker = self.docker(data.get("docker"), "docker")
        roles = self.roles(data.get("roles"), docker)
        files = self.files(data.get("files"))
        environment = self.environment(data.get("environment"))
        tags = self.tags(data.get("tags"))
        shared_dir = self.shared_dir(data.get("shared_dir"))
        if environment.archive and ENV_ARCHIVE_DIR in {d.split("/")[0] for d in files}:
            self.fail(f"files.{ENV_ARCHIVE_DIR}", f"'{ENV_ARCHIVE_DIR}' is where environment.archive is "
                                                  "unpacked; choose another destination")
        spec = JobSpec(name=name, roles=roles, framework=framework, queue=queue, restart=restart,
                       timeouts=timeouts, files=files, docker=docker, environment=environment,
                       tags=tags, shared_dir=shared_dir)
        if not self.problems:
            from ..frameworks import get_framework

            self.problems.extend(get_framework(framework).check(spec))
        self.raise_if_any()
        return spec

    def restart(self, value: Any) -> RestartSpec:
        d = self.mapping(value, "restart", ("policy", "max_restarts"))
        policy = self.choice(d.get("policy"), "restart.policy", RESTART_POLICIES, RestartPolicy.GANG.value)
        max_restarts = self.integer(d.get("max_restarts"), "restart.max_restarts", 0, 0, maximum=100)
        return RestartSpec(policy=RestartPolicy(policy), max_restarts=max_restarts)

    def timeouts(self, value: Any) -> Timeouts:
        d = self.mapping(value, "timeouts", ("gang_seconds", "job_seconds", "stop_grace_seconds"))
        gang = self.integer(d.get("gang_seconds"), "timeouts.gang_seconds", 1, 300, maximum=MAX_GANG_SECONDS)
        job = d.get("job_seconds")
        job_s = None if job is None else self.integer(job, "timeouts.job_seconds", 1, 0, maximum=MAX_JOB_SECONDS)
        grace = self.seconds(d.get("stop_grace_seconds"), "timeouts.stop_grace_seconds",
                             DEFAULT_STOP_GRACE_SECONDS, MAX_STOP_GRACE_SECONDS)
        return Timeouts(gang_seconds=gang, job_seconds=job_s, stop_grace_seconds=grace)

    def roles(self, value: Any, job_docker: Optional[DockerSpec]) -> Dict[str, RoleSpec]:
        if value is None:
            self.fail("roles", "is required: at least one role, e.g. roles: {worker: {command: ...}}")
            return {}
        if not isinstance(value, dict) or not value:
            self.fail("roles", f"expected a non-empty mapping of role name to role, got {_show(value)}")
            return {}
        out: Dict[str, RoleSpec] = {}
        folded: Dict[str, str] = {}
        for name, raw in value.items():
            path = f"roles.{name}"
            if not isinstance(name, str) or not _NAME.match(name):
                self.fail(path, f"role names are a letter then letters, digits or '-' (at most 63), got {_show(name)}")
                continue
            if name.lower() in folded:
                # Task directories, log files and container names would collide on some systems.
                self.fail(path, f"differs from role '{folded[name.lower()]}' only in case; give roles distinct names")
                continue
            folded[name.lower()] = name
            role = self.role(name, raw, path, job_docker)
            if role is not None and role.instances > 0:
                out[name] = role
        if value and not out and not self.problems:
            self.fail("roles", "every role has instances: 0; the job would run nothing")
        return out

    def role(self, name: str, raw: Any, path: str, job_docker: Optional[DockerSpec]) -> Optional[RoleSpec]:
        if not isinstance(raw, dict):
            self.fail(path, f"expected a mapping with at least 'command', got {_show(raw)}")
            return None
        self.mapping(raw, path, ROLE_FIELDS)
        instances = self.integer(raw.get("instances"), f"{path}.instances", 0, 1, maximum=MAX_INSTANCES)
        resources = self.resources(raw.get("resources"), f"{path}.resources")
        command = raw.get("command")
        if isinstance(command, list) and command and all(isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in command):
            command = shlex.join(str(c) for c in command)
        command = self.string(command, f"{path}.command", required=True) or ""
        env = self.env(raw.get("env"), f"{path}.env")
        self.exec_limits(command, env, path)
        docker = self.docker(raw.get("docker"), f"{path}.docker", inherit=job_docker)
        node_label = self.string(raw.get("node_label"), f"{path}.node_label")
        if node_label and not _NODE_LABEL.match(node_label):
            self.fail(f"{path}.node_label", f"expected one YARN node label (letters, digits, '_', '-'), "
                                            f"got {_show(node_label)}")
        tracked = raw.get("tracked")
        if tracked is not None and not isinstance(tracked, bool):
            self.fail(f"{path}.tracked", f"expected true or false, got {_show(tracked)}")
            tracked = None
        return RoleSpec(name=name, command=command, instances=instances, resources=resources,
                        env=env, docker=docker, node_label=node_label or None, tracked=tracked)

    def exec_limits(self, command: str, env: Mapping[str, str], path: str) -> None:
        """What Linux's execve() takes: each string at most MAX_ARG_STRLEN, all of them within ARG_MAX.

        The task runs as ``/bin/sh -c COMMAND`` with its variables in the environment; past
        these limits every attempt would die with 'Argument list too long'.
        """
        size = len(command.encode()) + 1
        if size > MAX_ARG_STRLEN:
            self.fail(f"{path}.command", f"is {size - 1} bytes; a command may be at most {MAX_ARG_STRLEN - 1} "
                                         "(Linux's limit on one argument, MAX_ARG_STRLEN)")
        total = size
        for name, value in env.items():
            entry = len(name.encode()) + 1 + len(value.encode()) + 1
            total += entry + 8  # and its pointer
            if entry > MAX_ARG_STRLEN:
                self.fail(f"{path}.env.{name}", f"NAME=value is {entry - 1} bytes; an environment variable may be "
                                                f"at most {MAX_ARG_STRLEN - 1} (Linux's MAX_ARG_STRLEN)")
        if total > MAX_TASK_ARGS_BYTES:
            self.fail(f"{path}.env", f"the command and variables take {total} bytes; a task's may take at most "
                                     f"{MAX_TASK_ARGS_BYTES} (Linux's ARG_MAX, with room for the rest of the "
                                     "environment)")

    def resources(self, value: Any, path: str) -> Resources:
        d = self.mapping(value, path, ("memory", "vcores", "gpus"))
        memory = 2048
        if d.get("memory") is not None:
            try:
                memory = parse_memory(d["memory"])
            except ValueError as exc:
                self.fail(f"{path}.memory", str(exc))
        vcores = self.integer(d.get("vcores"), f"{path}.vcores", 1, 1, maximum=MAX_VCORES)
        gpus = self.integer(d.get("gpus"), f"{path}.gpus", 0, 0, maximum=MAX_GPUS)
        return Resources(memory_mb=memory, vcores=vcores, gpus=gpus)

    def env(self, value: Any, path: str) -> Dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping of NAME: value, got {_show(value)}")
            return {}
        out = {}
        for key, val in value.items():
            kpath = f"{path}.{key}"
            if not isinstance(key, str) or not _ENV_NAME.match(key):
                self.fail(kpath, "is not a valid environment variable name")
            elif key.startswith(RESERVED_ENV_PREFIX):
                self.fail(kpath, f"names starting with {RESERVED_ENV_PREFIX} are set by submarine-py")
            elif not isinstance(val, (str, int, float)):
                self.fail(kpath, f"expected a string or number, got {_show(val)}")
            elif isinstance(val, str) and "\x00" in val:
                self.fail(kpath, "must not contain a NUL character")
            else:
                out[key] = ("true" if val else "false") if isinstance(val, bool) else str(val)
        return out

    def docker(self, value: Any, path: str, inherit: Optional[DockerSpec] = None) -> Optional[DockerSpec]:
        if value is None:
            return inherit
        if isinstance(value, str):
            value = {"image": value}
        d = self.mapping(value, path, ("image", "mounts", "network"))
        if not d:
            return inherit
        image = d.get("image", inherit.image if inherit else None)
        if not isinstance(image, str) or not _IMAGE.match(image) or len(image) > 255:
            self.fail(f"{path}.image", f"expected an image reference like registry.example.com/team/name:tag, got {_show(image)}")
            image = ""
        mounts_raw = d.get("mounts", list(inherit.mounts) if inherit else [])
        mounts: List[str] = []
        if not isinstance(mounts_raw, list):
            self.fail(f"{path}.mounts", f"expected a list of 'src:dst[:ro|rw]', got {_show(mounts_raw)}")
        else:
            for i, m in enumerate(mounts_raw):
                problem = _mount_problem(m)
                if problem:
                    self.fail(f"{path}.mounts[{i}]", problem)
                else:
                    mounts.append(m if m.count(":") == 2 else m + ":ro")
        network = self.choice(d.get("network"), f"{path}.network", NETWORKS, inherit.network if inherit else "host")
        return DockerSpec(image=image, mounts=tuple(mounts), network=network)

    def files(self, value: Any) -> Dict[str, str]:
        if value is None:
            return {}
        if isinstance(value, list):
            value = self.files_list(value)
        if not isinstance(value, dict):
            self.fail("files", f"expected a mapping of destination: source, got {_show(value)}")
            return {}
        out: Dict[str, str] = {}
        for raw_dest, src in value.items():
            path = f"files.{raw_dest}"
            dest = destination(raw_dest)
            if dest is None:
                self.fail(path, "the destination must be a relative path inside the task's working directory")
                continue
            top = dest.split("/")[0]
            if top.startswith(RESERVED_FILE_PREFIXES) or top in RESERVED_FILES:
                self.fail(path, f"names starting with {' or '.join(RESERVED_FILE_PREFIXES)}, and "
                                f"{', '.join(RESERVED_FILES)}, are submarine-py's own in the working "
                                "directory; choose another destination")
                continue
            if dest in out:
                self.fail(path, f"names the same destination as another entry ({dest})")
            bad = [part for part in dest.split("/") if part and not _FILE_NAME.match(part)]
            if bad:
                self.fail(path, f"{bad[0]!r} in the destination: {_FILE_NAME_RULE}")
                continue
            if not isinstance(src, str) or not src.strip() or "\x00" in src:
                self.fail(path, f"expected a source path, got {_show(src)}")
                continue
            base = _base_name(src)
            if "://" in src and not _FILE_NAME.match(base):  # YARN localizes it under this name
                self.fail(path, f"the source's name {base!r}: {_FILE_NAME_RULE} (YARN names the copy after it)")
                continue
            full = src if "://" in src else os.path.normpath(os.path.join(self.base_dir, os.path.expanduser(src)))
            if self.check_files and "://" not in full:
                problem = source_problem(full)
                if problem:
                    self.fail(path, problem)
                    continue
            out[dest] = full
        for dest, src in out.items():  # a file cannot also be a folder holding other destinations
            parent = dest.rsplit("/", 1)[0] if "/" in dest else ""
            while parent:
                if parent in out and "://" not in out[parent] and not os.path.isdir(out[parent]):
                    self.fail(f"files.{dest}", f"lies inside {parent!r}, which is a file")
                    break
                parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
        return out

    def shared_dir(self, value: Any) -> Optional[str]:
        path = self.string(value, "shared_dir")
        if path is None:
            return None
        if not os.path.isabs(path) or "://" in path:
            self.fail("shared_dir", f"expected an absolute path that every node mounts (NFS...), got {path!r}")
            return None
        if ".." in path.split("/"):
            self.fail("shared_dir", f"must not contain '..', got {path!r}")
            return None
        if not _MOUNT_PATH.match(path):  # a Docker mount YARN passes through a shell script
            self.fail("shared_dir", f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes it "
                                    f"through a shell script), got {_show(path)}")
            return None
        return os.path.normpath(path)

    def files_list(self, value: List[Any]) -> Dict[str, Any]:
        """The list form: each source keeps its base name, which must be unique."""
        out: Dict[str, Any] = {}
        where: Dict[str, int] = {}
        for i, src in enumerate(value):
            dest = os.path.basename(src.rstrip("/")) if isinstance(src, str) else ""
            if not isinstance(src, str) or not dest or dest in (".", "..") or "\x00" in src:
                self.fail(f"files[{i}]", f"expected a source path with a base name, got {_show(src)}")
            elif dest in where:
                self.fail(f"files[{i}]", f"{src!r} would also be copied to '{dest}' (as files[{where[dest]}]); "
                                         "use the mapping form, destination: source")
            else:
                where[dest] = i
                out[dest] = src
        return out

    def environment(self, value: Any) -> EnvironmentSpec:
        d = self.mapping(value, "environment", ("python", "archive", "cache_dir"))
        python = self.string(d.get("python"), "environment.python")
        archive = self.string(d.get("archive"), "environment.archive")
        cache_dir = self.string(d.get("cache_dir"), "environment.cache_dir")
        if cache_dir and not os.path.isabs(cache_dir):
            self.fail("environment.cache_dir", f"expected an absolute path on the nodes, got {cache_dir!r}")
        elif cache_dir and not _MOUNT_PATH.match(cache_dir):
            self.fail("environment.cache_dir", f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes it "
                                               f"through a shell script), got {_show(cache_dir)}")
        elif cache_dir and not archive:
            self.fail("environment.cache_dir", "only used with environment.archive (where archives are unpacked)")
        if python and (not python.strip() or any(ord(c) < 32 or ord(c) == 127 for c in python)):
            self.fail("environment.python", f"expected an interpreter's path, got {_show(python)}")
            python = None
        if archive and not _FILE_NAME.match(_base_name(archive)):
            self.fail("environment.archive", f"the name {_base_name(archive)!r}: {_FILE_NAME_RULE} "
                                             "(YARN names the copy after it)")
            archive = None
        if python and archive:
            self.fail("environment", "give either 'python' (an interpreter on every node) or 'archive' (a packed environment), not both")
        if archive and "://" not in archive:
            archive = os.path.normpath(os.path.join(self.base_dir, archive))
            if self.check_files and not os.path.isfile(archive):
                self.fail("environment.archive", f"{archive} does not exist")
            elif not archive.endswith((".tar.gz", ".tgz", ".zip")):
                self.fail("environment.archive", "expected a .tar.gz, .tgz or .zip made by conda-pack or venv-pack")
        # An empty string (a template default of "") means unset, as for node_label.
        return EnvironmentSpec(python=python or None, archive=archive or None, cache_dir=cache_dir or None)

    def tags(self, value: Any) -> Tuple[str, ...]:
        """YARN's application tags: ASCII, no commas, compared without case (YARN lower-cases
        them), so they are kept lower-case here for both backends."""
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.fail("tags", f"expected a list of strings, got {_show(value)}")
            return ()
        if len(value) > MAX_TAGS:
            self.fail("tags", f"expected at most {MAX_TAGS} tags (YARN keeps 10 and submarine-py uses one), "
                              f"got {len(value)}")
        out: List[str] = []
        for i, raw in enumerate(value):
            tag = self.string(raw, f"tags[{i}]")
            if tag is None:
                if raw is None:
                    self.fail(f"tags[{i}]", "expected a string, got None")
                continue
            tag = tag.strip().lower()
            if not tag or "," in tag or len(tag) > MAX_TAG_CHARS or not tag.isascii() or not tag.isprintable():
                self.fail(f"tags[{i}]", f"expected printable ASCII without commas, 1 to {MAX_TAG_CHARS} "
                                        f"characters, got {_show(raw)}")
            elif tag in out:
                self.fail(f"tags[{i}]", f"repeats the tag {tag!r}")
            else:
                out.append(tag)
        return tuple(out)


_FILE_NAME_RULE = ("names may hold letters, digits, spaces and . _ + @ = , ~ - (not first), "
                   "nothing a shell would read")


def _base_name(source: str) -> str:
    """The last part of a source path or URL (what YARN calls the localized copy)."""
    path = source.split("://", 1)[1].split("/", 1)[-1] if "://" in source else source
    return os.path.basename(path.rstrip("/")) or path


def _mount_problem(m: Any) -> Optional[str]:
    if not isinstance(m, str):
        return f"expected 'src:dst[:ro|rw]', got {_show(m)}"
    parts = m.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        return f"expected 'src:dst[:ro|rw]', got {_show(m)}"
    if len(parts) == 3 and parts[2] not in ("ro", "rw"):
        return f"the mode must be ro or rw, got {parts[2]!r}"
    if not (os.path.isabs(parts[0]) and os.path.isabs(parts[1])):
        return f"both paths must be absolute, got {_show(m)}"
    for part in parts[:2]:
        if not _MOUNT_PATH.match(part):
            return (f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes mounts through a "
                    f"shell script), got {part!r}")
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
