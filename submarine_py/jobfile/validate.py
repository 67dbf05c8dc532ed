"""The validating walk over a job file's dict: builds the spec's dataclasses and collects every
problem with its path (``roles.worker.resources.gpus: ...``), raised as one :class:`SpecError`.

Used through :func:`spec_from_dict`; the rules for single fields are in ``fields.py``. These are
the rules of every backend; a backend's own (``Backend.check``) come in as ``rules`` and are
reported with them, in the same error.
"""
from __future__ import annotations

import os
import re
import shlex
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..errors import SpecError
from ..states import Placement, RestartPolicy
from ..units import parse_memory
from .fields import (
    ENV_NAME, IMAGE, MAX_GANG_SECONDS, MAX_GPUS, MAX_INSTANCES, MAX_JOB_SECONDS, MAX_LOST_AFTER_SECONDS,
    MAX_PROCESSES, MAX_STOP_GRACE_SECONDS, MAX_VCORES, MIN_LOST_AFTER_SECONDS, RESERVED_ENV_PREFIX, ROLE_NAME,
    exec_limit_problems, mount_problem, show,
)
from . import access
from .sweep import sweep as sweep_section, task_problem as sweep_task_problem
from .files import ENV_ARCHIVE_DIR, RESERVED_FILE_PREFIXES, RESERVED_FILES, destination, source_problem
from .reader import FieldReader
from .model import (
    DEFAULT_HOLD_SECONDS, DEFAULT_LOST_AFTER_SECONDS, DEFAULT_MAX_CLUSTER_RESTARTS, DEFAULT_MAX_RESTARTS, DEFAULT_SETTLE_SECONDS,
    DEFAULT_STOP_GRACE_SECONDS, FRAMEWORKS, JOB_FIELDS, MAX_HOLD_SECONDS, MAX_SETTLE_SECONDS, MIN_HOLD_SECONDS, NETWORKS, PER_GPU, RESTART_POLICIES, ROLE_FIELDS, TENSORBOARD_ROLE, DockerSpec, EnvironmentSpec, JobSpec, Resources,
    RestartSpec, RoleSpec, TensorBoardSpec, Timeouts,
)

#: A URI of a filesystem TensorBoard reads (``hdfs://nn/logs``, ``gs://bucket/logs``).
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+\Z")

#: More rules a spec must pass (a backend's ``check``): its problems, as ``(path, message)``.
Rules = Callable[[JobSpec], List[Tuple[str, str]]]


class Builder(FieldReader):
    """Walks a raw dict section by section, collecting every problem with its path."""

    def __init__(self, base_dir: str, check_files: bool = True, rules: Optional[Rules] = None):
        super().__init__(base_dir)
        self.check_files = check_files
        self.rules = rules

    # -- sections -----------------------------------------------------------
    def job(self, data: Any) -> JobSpec:
        if not isinstance(data, dict):
            raise SpecError([("", f"the job file must be a YAML mapping, got {show(data)}")])
        self.mapping(data, "", JOB_FIELDS)
        name = self.string(data.get("name"), "name", required=True) or "job"
        if name and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z", name):
            self.fail("name", f"expected letters, digits, '.', '_' or '-' (at most 100), got {name!r}")
        framework = self.choice(data.get("framework"), "framework", FRAMEWORKS, "custom")
        queue = self.string(data.get("queue"), "queue", default="default")
        queue = "default" if queue is None else queue
        restart = self.restart(data.get("restart"))
        timeouts = self.timeouts(data.get("timeouts"))
        docker = self.docker(data.get("docker"), "docker")
        tensorboard = self.tensorboard(data)
        roles = self.roles(data.get("roles"), docker, with_tensorboard=tensorboard is not None)
        if tensorboard is not None and roles:
            self.tensorboard_role(data.get("roles"), roles, docker)
        files = self.files(data.get("files"))
        environment = self.environment(data.get("environment"))
        tags = self.tags(data.get("tags"))
        shared_dir = self.shared_dir(data.get("shared_dir"))
        placement = self.choice(data.get("placement"), "placement", tuple(p.value for p in Placement),
                                Placement.PACK.value)
        acls, kerberos = access.acls(self, data.get("acls")), access.kerberos(self, data.get("kerberos"))
        if environment.archive and ENV_ARCHIVE_DIR in {d.split("/")[0] for d in files}:
            self.fail(f"files.{ENV_ARCHIVE_DIR}", f"'{ENV_ARCHIVE_DIR}' is where environment.archive is "
                                                  "unpacked; choose another destination")
        sweep = sweep_section(self, data.get("sweep"))
        spec = JobSpec(name=name, roles=roles, framework=framework, queue=queue, restart=restart,
                       timeouts=timeouts, files=files, docker=docker, environment=environment,
                       tags=tags, shared_dir=shared_dir, tensorboard=tensorboard, placement=Placement(placement),
                       sweep=sweep, acls=acls, kerberos=kerberos)
        if sweep is not None and roles:
            problem = sweep_task_problem(roles, spec)
            if problem:
                self.fail("sweep", problem)
        if not self.problems:
            from ..frameworks import get_framework

            self.problems.extend(get_framework(framework).check(spec))
        if self.rules is not None:  # on what was built: a bad field stands at its default there
            self.problems.extend(self.rules(spec))
        self.raise_if_any()
        return spec

    def restart(self, value: Any) -> RestartSpec:
        d = self.mapping(value, "restart", ("policy", "max_restarts", "max_cluster_restarts"))
        policy = self.choice(d.get("policy"), "restart.policy", RESTART_POLICIES, RestartPolicy.GANG.value)
        max_restarts = self.integer(d.get("max_restarts"), "restart.max_restarts", 0, DEFAULT_MAX_RESTARTS,
                                    maximum=100)
        cluster = self.integer(d.get("max_cluster_restarts"), "restart.max_cluster_restarts", 0,
                               DEFAULT_MAX_CLUSTER_RESTARTS, maximum=100)
        return RestartSpec(policy=RestartPolicy(policy), max_restarts=max_restarts, max_cluster_restarts=cluster)

    def timeouts(self, value: Any) -> Timeouts:
        d = self.mapping(value, "timeouts", ("gang_seconds", "job_seconds", "stop_grace_seconds",
                                             "lost_after_seconds", "hang_seconds", "queue_seconds",
                                             "hold_seconds", "settle_seconds"))
        gang = self.integer(d.get("gang_seconds"), "timeouts.gang_seconds", 1, 300, maximum=MAX_GANG_SECONDS)
        job = d.get("job_seconds")
        job_s = None if job is None else self.integer(job, "timeouts.job_seconds", 1, 0, maximum=MAX_JOB_SECONDS)
        grace = self.seconds(d.get("stop_grace_seconds"), "timeouts.stop_grace_seconds",
                             DEFAULT_STOP_GRACE_SECONDS, MAX_STOP_GRACE_SECONDS)
        lost, lost_s = d.get("lost_after_seconds"), DEFAULT_LOST_AFTER_SECONDS
        if lost is not None:
            if isinstance(lost, bool) or not isinstance(lost, (int, float)) \
                    or not MIN_LOST_AFTER_SECONDS <= lost <= MAX_LOST_AFTER_SECONDS:
                self.fail("timeouts.lost_after_seconds", f"expected a number of seconds from "
                          f"{MIN_LOST_AFTER_SECONDS} to {MAX_LOST_AFTER_SECONDS}, got {show(lost)}")
            else:
                lost_s = float(lost)
        hang = d.get("hang_seconds")
        hang_s = None if hang is None else self.integer(hang, "timeouts.hang_seconds", 1, 0, maximum=MAX_JOB_SECONDS)
        queue = d.get("queue_seconds")
        queue_s = None if queue is None else self.integer(queue, "timeouts.queue_seconds", 1, 0,
                                                          maximum=MAX_JOB_SECONDS)
        hold_s = self.seconds(d.get("hold_seconds"), "timeouts.hold_seconds", DEFAULT_HOLD_SECONDS,
                              MAX_HOLD_SECONDS, minimum=MIN_HOLD_SECONDS)
        settle_s = self.seconds(d.get("settle_seconds"), "timeouts.settle_seconds", DEFAULT_SETTLE_SECONDS,
                                MAX_SETTLE_SECONDS)
        return Timeouts(gang_seconds=gang, job_seconds=job_s, stop_grace_seconds=grace, lost_after_seconds=lost_s,
                        hang_seconds=hang_s, queue_seconds=queue_s, hold_seconds=hold_s, settle_seconds=settle_s)

    def roles(self, value: Any, job_docker: Optional[DockerSpec],
              with_tensorboard: bool = False) -> Dict[str, RoleSpec]:
        if value is None:
            self.fail("roles", "is required: at least one role, e.g. roles: {worker: {command: ...}}")
            return {}
        if not isinstance(value, dict) or not value:
            self.fail("roles", f"expected a non-empty mapping of role name to role, got {show(value)}")
            return {}
        out: Dict[str, RoleSpec] = {}
        folded: Dict[str, str] = {}
        for name, raw in value.items():
            path = f"roles.{name}"
            if not isinstance(name, str) or not ROLE_NAME.match(name):
                self.fail(path, f"role names are a letter then letters, digits or '-' (at most 63), got {show(name)}")
                continue
            if name.lower() in folded:
                # Task directories, log files and container names would collide on some systems.
                self.fail(path, f"differs from role '{folded[name.lower()]}' only in case; give roles distinct names")
                continue
            folded[name.lower()] = name
            role = self.role(name, raw, path, job_docker,
                             command_optional=with_tensorboard and name == TENSORBOARD_ROLE)
            if role is not None and role.instances > 0:
                out[name] = role
        if value and not out and not self.problems:
            self.fail("roles", "every role has instances: 0; the job would run nothing")
        return out

    def role(self, name: str, raw: Any, path: str, job_docker: Optional[DockerSpec],
             command_optional: bool = False) -> Optional[RoleSpec]:
        """``command_optional``: the job's TensorBoard role, whose command the plan gives."""
        if not isinstance(raw, dict):
            self.fail(path, f"expected a mapping with at least 'command', got {show(raw)}")
            return None
        self.mapping(raw, path, ROLE_FIELDS)
        instances, fewest = self.instances(raw.get("instances"), f"{path}.instances")
        resources = self.resources(raw.get("resources"), f"{path}.resources")
        processes = self.processes(raw.get("processes"), f"{path}.processes", resources)
        command = raw.get("command")
        if isinstance(command, list) and command and all(isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in command):
            command = shlex.join(str(c) for c in command)
        command = self.string(command, f"{path}.command", required=not command_optional) or ""
        env = self.env(raw.get("env"), f"{path}.env")
        for where, problem in exec_limit_problems(command, env, path):
            self.fail(where, problem)
        docker = self.docker(raw.get("docker"), f"{path}.docker", inherit=job_docker)
        node_label = self.string(raw.get("node_label"), f"{path}.node_label")
        tracked = raw.get("tracked")
        if tracked is not None and not isinstance(tracked, bool):
            self.fail(f"{path}.tracked", f"expected true or false, got {show(tracked)}")
            tracked = None
        return RoleSpec(name=name, command=command, instances=instances, resources=resources,
                        env=env, docker=docker, node_label=node_label or None, tracked=tracked,
                        processes=processes, min_instances=fewest)

    def instances(self, value: Any, path: str) -> Tuple[int, Optional[int]]:
        """``instances``: a whole number (0 leaves the role out), or a range ``{min, max}`` (an
        elastic role: ``docs/elastic.md``) with 1 <= min <= max. Returns (the most, the fewest
        when elastic, else None); a range whose ends are equal is that number."""
        if not isinstance(value, dict):
            return self.integer(value, path, 0, 1, maximum=MAX_INSTANCES), None
        d = self.mapping(value, path, ("min", "max"))
        for end in ("min", "max"):
            if end not in d:
                self.fail(f"{path}.{end}", "is required: a range of instances is {min: N, max: M} (an elastic "
                                           "role, docs/elastic.md)")
        low = self.integer(d.get("min"), f"{path}.min", 1, 1, maximum=MAX_INSTANCES)
        high = self.integer(d.get("max"), f"{path}.max", 1, max(low, 1), maximum=MAX_INSTANCES)
        if high < low:
            self.fail(f"{path}.max", f"expected at least min ({low}), got {high}")
            return low, None
        return high, (low if low < high else None)

    def tensorboard(self, data: Dict[str, Any]) -> Optional[TensorBoardSpec]:
        """``tensorboard``: present (``{}``, or nothing after the colon), TensorBoard runs beside the
        job; ``logdir``: an absolute path every task can write to, or a URI TensorBoard reads."""
        if "tensorboard" not in data:
            return None
        d = self.mapping(data["tensorboard"], "tensorboard", ("logdir",))
        logdir = self.string(d.get("logdir"), "tensorboard.logdir")
        if not logdir:  # an empty string (a template default of "") means unset
            return TensorBoardSpec()
        if URI.match(logdir):
            return TensorBoardSpec(logdir=logdir)
        if not os.path.isabs(logdir) or ".." in logdir.split("/"):
            self.fail("tensorboard.logdir", f"expected an absolute path (without '..') that every task can "
                                            f"write to, or a URI TensorBoard reads (hdfs://..., gs://...), "
                                            f"got {logdir!r}")
            return TensorBoardSpec()
        return TensorBoardSpec(logdir=os.path.normpath(logdir))

    def tensorboard_role(self, raw_roles: Any, roles: Dict[str, RoleSpec], job_docker: Optional[DockerSpec]) -> None:
        """With the ``tensorboard`` field, its task ``tensorboard:0``: the role as the job file
        spells it out (resources, image, node label, env, flags in a command of its own), else
        one with the defaults, added to ``roles``."""
        path = f"roles.{TENSORBOARD_ROLE}"
        raw = raw_roles.get(TENSORBOARD_ROLE) if isinstance(raw_roles, dict) else None
        if isinstance(raw, dict):
            instances = raw.get("instances", 1)
            if instances != 1 and not any(p == f"{path}.instances" for p, _ in self.problems):
                self.fail(f"{path}.instances", f"the job's TensorBoard (the tensorboard field) is one task: "
                                               f"expected 1, got {show(instances)}")
            if raw.get("tracked") is True:
                self.fail(f"{path}.tracked", "the job's TensorBoard serves until the job ends and never "
                                             "decides it: it cannot be tracked")
        role = roles.get(TENSORBOARD_ROLE)
        if role is None:
            roles[TENSORBOARD_ROLE] = RoleSpec(name=TENSORBOARD_ROLE, command="", docker=job_docker)
        elif role.process_count != 1:
            self.fail(f"{path}.processes", f"TensorBoard runs one process: at most 1, got {show(role.processes)}")

    def processes(self, value: Any, path: str, resources: Resources) -> Union[int, str]:
        """``processes``: a whole number from 1 to MAX_PROCESSES, or ``gpus`` (one process per
        GPU of ``resources.gpus``, which must then be at least 1). Which frameworks and roles
        take more than one is the framework's ``check``."""
        if value is None:
            return 1
        if value == PER_GPU:
            gpus_path = f"{path.rsplit('.', 1)[0]}.resources.gpus"
            if resources.gpus < 1 and not any(p == gpus_path for p, _ in self.problems):
                self.fail(path, f"'{PER_GPU}' starts one process per GPU of the task, but {gpus_path} "
                                f"is {resources.gpus}; ask for GPUs or give a number of processes")
                return 1
            return PER_GPU
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROCESSES:
            self.fail(path, f"expected a whole number from 1 to {MAX_PROCESSES}, or '{PER_GPU}' "
                            f"(one process per GPU), got {show(value)}")
            return 1
        return value

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
            self.fail(path, f"expected a mapping of NAME: value, got {show(value)}")
            return {}
        out = {}
        for key, val in value.items():
            kpath = f"{path}.{key}"
            if not isinstance(key, str) or not ENV_NAME.match(key):
                self.fail(kpath, "is not a valid environment variable name")
            elif key.startswith(RESERVED_ENV_PREFIX):
                self.fail(kpath, f"names starting with {RESERVED_ENV_PREFIX} are set by submarine-py")
            elif not isinstance(val, (str, int, float)):
                self.fail(kpath, f"expected a string or number, got {show(val)}")
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
        if not isinstance(image, str) or not IMAGE.match(image) or len(image) > 255:
            self.fail(f"{path}.image", f"expected an image reference like registry.example.com/team/name:tag, got {show(image)}")
            image = ""
        mounts_raw = d.get("mounts", list(inherit.mounts) if inherit else [])
        mounts: List[str] = []
        if not isinstance(mounts_raw, list):
            self.fail(f"{path}.mounts", f"expected a list of 'src:dst[:ro|rw]', got {show(mounts_raw)}")
        else:
            for i, m in enumerate(mounts_raw):
                problem = mount_problem(m)
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
            self.fail("files", f"expected a mapping of destination: source, got {show(value)}")
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
            if not isinstance(src, str) or not src.strip() or "\x00" in src:
                self.fail(path, f"expected a source path, got {show(src)}")
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
        return os.path.normpath(path)

    def files_list(self, value: List[Any]) -> Dict[str, Any]:
        """The list form: each source keeps its base name, which must be unique."""
        out: Dict[str, Any] = {}
        where: Dict[str, int] = {}
        for i, src in enumerate(value):
            dest = os.path.basename(src.rstrip("/")) if isinstance(src, str) else ""
            if not isinstance(src, str) or not dest or dest in (".", "..") or "\x00" in src:
                self.fail(f"files[{i}]", f"expected a source path with a base name, got {show(src)}")
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
        elif cache_dir and not archive:
            self.fail("environment.cache_dir", "only used with environment.archive (where archives are unpacked)")
        if python and (not python.strip() or any(ord(c) < 32 or ord(c) == 127 for c in python)):
            self.fail("environment.python", f"expected an interpreter's path, got {show(python)}")
            python = None
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
        """Application tags: strings, stripped and kept lower-case on every backend, so that a
        job's tags compare the same wherever it runs (YARN compares them without case and
        lower-cases them). What YARN allows in them (ASCII, no commas, how many, how long) is
        the YARN backend's rule."""
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.fail("tags", f"expected a list of strings, got {show(value)}")
            return ()
        out: List[str] = []
        for i, raw in enumerate(value):
            tag = self.string(raw, f"tags[{i}]")
            if tag is None:
                if raw is None:
                    self.fail(f"tags[{i}]", "expected a string, got None")
                continue
            tag = tag.strip().lower()
            if tag in out:
                self.fail(f"tags[{i}]", f"repeats the tag {tag!r}")
            else:
                out.append(tag)
        return tuple(out)


def spec_from_dict(data: Any, base_dir: Optional[str] = None, check_files: bool = True,
                   rules: Optional[Rules] = None) -> JobSpec:
    """Validate ``data`` and build a spec; relative file sources resolve against ``base_dir``.

    ``check_files=False`` skips checking that local sources exist (the AM on a
    cluster node reads a spec whose files were checked where it was submitted).
    ``rules``: more rules the spec must pass (the chosen backend's ``check``); their
    problems are reported with the job file's own, in one :class:`SpecError`.
    """
    return Builder(base_dir or os.getcwd(), check_files, rules).job(data)
