"""Example Hadoop configuration for a YARN 3.1+ cluster that schedules GPUs and runs Docker,
and, with a Kerberos realm, runs in secure mode (a ``core-site.xml`` besides).

``render_hadoop_conf(values)`` fills the templates in
``submarine_py/templates/hadoop-conf/`` with an admin's values (each checked
here, so a typo fails before it reaches a NodeManager, which would only say
"container-executor failed" much later) and returns ``{filename: text}``.
``write_hadoop_conf`` writes them to a folder; ``hadoop-conf/`` at the top of
the repository holds them rendered with :data:`DEFAULTS` and a README.

Values may be given as Python values or as strings (what ``--set KEY=VALUE``
gives): lists as comma-separated strings, integers as digits.
"""
from __future__ import annotations

import os
import posixpath
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from .errors import ProblemCollector, SpecError
from .templating import render, split_set_options

#: The files rendered, in the order a README walks through them.
FILES = ("yarn-site.xml", "resource-types.xml", "capacity-scheduler.xml", "container-executor.cfg")
GPU_DOCKER_PLUGINS = ("nvidia-docker-v1", "nvidia-docker-v2")

DEFAULTS: Dict[str, Any] = {
    # Images whose name starts with one of these followed by "/" are trusted. Hadoop 3.1.1
    # matches that prefix only: "library" trusts "library/ubuntu:22.04", not "ubuntu:22.04".
    "trusted_registries": ["localhost"],
    # Host paths containers may bind-mount (submarine-py's docker.mounts). Each must exist on
    # every NodeManager host, or every Docker container there fails to launch (exit 29).
    "ro_mounts": ["/etc/passwd", "/etc/group", "/sys/fs/cgroup"],
    "rw_mounts": [],
    "nm_local_dirs": ["/var/lib/hadoop-yarn/local"],
    "nm_log_dirs": ["/var/log/hadoop-yarn/containers"],
    # The NodeManager's GPU plugin; false for nodes without GPUs (a 3.1.1 NodeManager with the
    # plugin and no GPU it can discover does not start).
    "gpu_plugin": True,
    "gpus_allowed": "auto",
    "nvidia_smi_path": "",
    "gpu_docker_plugin": "nvidia-docker-v1",
    "nvidia_driver_version": "",
    "docker_devices": ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
                      + [f"/dev/nvidia{i}" for i in range(8)],
    "docker_binary": "/usr/bin/docker",
    "docker_capabilities": ["CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
                            "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
                            "AUDIT_WRITE"],
    "docker_networks": ["host", "bridge", "none"],
    "docker_default_network": "host",
    "container_executor_path": "/opt/hadoop/bin/container-executor",
    "container_executor_group": "hadoop",
    "banned_users": ["yarn", "mapred", "hdfs", "bin"],
    "min_user_id": 1000,
    "resourcemanager_hostname": "localhost",
    "memory_mb": 65536,
    "vcores": 16,
    "debug_delay_sec": 600,
    # false: the controllers are mounted already (systemd does) and the admin creates
    # <controller>/<hierarchy> for the NodeManager user; true: the NodeManager mounts them through
    # container-executor, which then needs feature.mount-cgroup.enabled=1 (off by default).
    "cgroups_mount": False,
    "cgroups_mount_path": "/sys/fs/cgroup",
    "cgroups_hierarchy": "hadoop-yarn",
    # Secure mode (docs/security.md): a Kerberos realm turns it on, adding the daemons'
    # principals and keytabs (<keytab_dir>/yarn.keytab: rm/HOST and nm/HOST; http.keytab:
    # HTTP/HOST), SPNEGO, YARN's ACLs to yarn-site.xml and a core-site.xml; "" leaves it off.
    "kerberos_realm": "",
    "keytab_dir": "/etc/security/keytabs",
    # The local user the daemons' principals map to (auth_to_local), and YARN's admins.
    "daemon_user": "yarn",
    "yarn_admins": ["yarn"],
    # hadoop.security.authorization: service-level ACLs (hadoop-policy.xml).
    "service_authorization": True,
    # ResourceManager HA: two or more hosts (rm1, rm2, ... in this order) turn it on, with
    # leader election and the state store in the ZooKeeper of zookeeper_quorum (host:port, ...).
    "resourcemanager_ha_hosts": [],
    "zookeeper_quorum": [],
    "yarn_cluster_id": "yarn-cluster",
    # TLS: HTTPS only on the RMs, their web proxy and the NodeManagers (yarn.http.policy), and
    # ssl-server.xml / ssl-client.xml naming <ssl_dir>/keystore.jks and truststore.jks.
    "https": False,
    "ssl_dir": "/etc/security/ssl",
    "ssl_keystore_password": "changeit",
    "ssl_truststore_password": "changeit",
}
#: Rendered only in secure mode (``kerberos_realm``).
SECURE_FILES = ("core-site.xml",)
#: Rendered only with ``https``.
TLS_FILES = ("ssl-server.xml", "ssl-client.xml")

_REALM = re.compile(r"^\Z|^[A-Z0-9](?:[A-Z0-9.-]*[A-Z0-9])?\Z")
_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\Z")
_REGISTRY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?::[0-9]{1,5})?\Z")
_UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")
_NETWORK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_CAPABILITY = re.compile(r"^[A-Z][A-Z_]*\Z")
_GPU_DEVICES = re.compile(r"^auto\Z|^[0-9]+:[0-9]+(?:,[0-9]+:[0-9]+)*\Z")
_DRIVER_VERSION = re.compile(r"^\Z|^[0-9]+(?:\.[0-9]+)*\Z")
_HIERARCHY = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\Z")
# A path both the XML files and container-executor.cfg carry verbatim.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_.@+/-]*\Z")
_HOST_PORT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?:[0-9]{1,5}\Z")
_PASSWORD = re.compile(r"^[^<>&\s]+\Z")


class _Checker(ProblemCollector):
    """Normalizes and checks every value, collecting ``(key, message)`` problems."""

    def items(self, key: str, value: Any) -> Optional[List[str]]:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"expected a list of strings (or one comma-separated string), got {value!r}")
            return None
        return [v.strip() for v in value]

    def string_list(self, key: str, value: Any, ok: Callable[[str], Optional[str]],
                    non_empty: bool = False) -> List[str]:
        items = self.items(key, value)
        if items is None:
            return []
        if non_empty and not items:
            self.fail(key, "must not be empty")
        for i, item in enumerate(items):
            problem = ok(item)
            if problem:
                self.fail(f"{key}[{i}]", problem)
        return items

    def integer(self, key: str, value: Any, minimum: int) -> int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(key, f"expected an integer >= {minimum}, got {value!r}")
            return minimum
        return value

    def boolean(self, key: str, value: Any) -> bool:
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
            return False
        return value

    def string(self, key: str, value: Any, ok: Callable[[str], Optional[str]], strip: str = "") -> str:
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {value!r}")
            return ""
        value = value.strip().strip(strip)
        problem = ok(value)
        if problem:
            self.fail(key, problem)
        return value


def _pattern(regex: "re.Pattern[str]", what: str) -> Callable[[str], Optional[str]]:
    return lambda v: None if regex.fullmatch(v) else f"expected {what}, got {v!r}"


def _abs_path(v: str) -> Optional[str]:
    if not v.startswith("/"):
        return f"must be an absolute path, got {v!r}"
    if not _SAFE_PATH.fullmatch(v):
        return f"may hold only letters, digits and _.@+-/ (no commas, colons or spaces), got {v!r}"
    if posixpath.normpath(v) != (v.rstrip("/") or "/") or ".." in v.split("/"):
        return f"must be a normalized path (no '..', '//' or '/./'), got {v!r}"
    return None


def _mount_root(v: str) -> Optional[str]:
    problem = _abs_path(v)
    if problem:
        return problem
    if v.rstrip("/") == "":
        return "'/' would let containers mount the whole host filesystem"
    return None


def _rw_mount(v: str) -> Optional[str]:
    problem = _mount_root(v)
    if problem:
        return problem
    if v.rstrip("/") in ("/etc", "/usr", "/bin", "/sbin", "/lib", "/boot", "/dev", "/proc", "/sys", "/root"):
        return (f"{v!r} must not be mounted read-write "
                "(container-executor also refuses any parent of its own config folder)")
    return None


def _registry(v: str) -> Optional[str]:
    if "/" in v:
        return (f"a registry is a host[:port] or 'library', without '/', got {v!r} "
                "(container-executor matches the image name's prefix up to its first '/')")
    return None if _REGISTRY.fullmatch(v) else f"expected a registry host[:port] or 'library', got {v!r}"


def _device(v: str) -> Optional[str]:
    problem = _abs_path(v)
    if problem:
        return problem
    return None if v.startswith("/dev/") else f"expected a device under /dev/, got {v!r}"


def _check(values: Mapping[str, Any]) -> Dict[str, Any]:
    c = _Checker()
    v = {**DEFAULTS, **values}
    out: Dict[str, Any] = {}
    out["trusted_registries"] = c.string_list("trusted_registries", v["trusted_registries"], _registry, True)
    out["ro_mounts"] = c.string_list("ro_mounts", v["ro_mounts"], _mount_root)
    out["rw_mounts"] = c.string_list("rw_mounts", v["rw_mounts"], _rw_mount)
    out["nm_local_dirs"] = c.string_list("nm_local_dirs", v["nm_local_dirs"], _rw_mount, True)
    out["nm_log_dirs"] = c.string_list("nm_log_dirs", v["nm_log_dirs"], _rw_mount, True)
    out["gpu_plugin"] = c.boolean("gpu_plugin", v["gpu_plugin"])
    out["gpus_allowed"] = c.string("gpus_allowed", v["gpus_allowed"],
                                   _pattern(_GPU_DEVICES, "'auto' or index:minor[,index:minor...] like 0:0,1:1"))
    out["nvidia_smi_path"] = c.string("nvidia_smi_path", v["nvidia_smi_path"],
                                      lambda s: None if s == "" else _abs_path(s))
    out["gpu_docker_plugin"] = c.string(
        "gpu_docker_plugin", v["gpu_docker_plugin"],
        lambda s: None if s in GPU_DOCKER_PLUGINS else f"expected one of {', '.join(GPU_DOCKER_PLUGINS)}, got {s!r}")
    out["nvidia_driver_version"] = c.string("nvidia_driver_version", str(v["nvidia_driver_version"]),
                                            _pattern(_DRIVER_VERSION, "a driver version like 535.104.05 (or '')"))
    out["docker_devices"] = c.string_list("docker_devices", v["docker_devices"], _device)
    out["docker_binary"] = c.string("docker_binary", v["docker_binary"], _abs_path)
    out["docker_capabilities"] = c.string_list(
        "docker_capabilities", v["docker_capabilities"], _pattern(_CAPABILITY, "an upper-case capability like CHOWN"),
        True)
    out["docker_networks"] = c.string_list("docker_networks", v["docker_networks"],
                                           _pattern(_NETWORK, "a Docker network name"), True)
    networks = out["docker_networks"]
    out["docker_default_network"] = c.string(
        "docker_default_network", v["docker_default_network"],
        lambda s: None if s in networks else f"must be one of docker_networks {networks}, got {s!r}")
    out["container_executor_path"] = c.string("container_executor_path", v["container_executor_path"], _abs_path)
    out["container_executor_group"] = c.string("container_executor_group", v["container_executor_group"],
                                               _pattern(_UNIX_NAME, "a Unix group name"))
    out["banned_users"] = c.string_list("banned_users", v["banned_users"], _pattern(_UNIX_NAME, "a Unix user name"))
    out["min_user_id"] = c.integer("min_user_id", v["min_user_id"], 0)
    out["resourcemanager_hostname"] = c.string("resourcemanager_hostname", v["resourcemanager_hostname"],
                                               _pattern(_HOST, "a host name"))
    out["memory_mb"] = c.integer("memory_mb", v["memory_mb"], 1)
    out["vcores"] = c.integer("vcores", v["vcores"], 1)
    out["debug_delay_sec"] = c.integer("debug_delay_sec", v["debug_delay_sec"], 0)
    out["cgroups_mount"] = c.boolean("cgroups_mount", v["cgroups_mount"])
    out["cgroups_mount_path"] = c.string("cgroups_mount_path", v["cgroups_mount_path"], _abs_path)
    out["cgroups_hierarchy"] = c.string("cgroups_hierarchy", v["cgroups_hierarchy"],
                                        _pattern(_HIERARCHY, "a cgroup path like hadoop-yarn"), strip="/")
    out["kerberos_realm"] = c.string("kerberos_realm", v["kerberos_realm"],
                                     _pattern(_REALM, "an upper-case Kerberos realm like EXAMPLE.COM (or '')"))
    out["keytab_dir"] = c.string("keytab_dir", v["keytab_dir"], _abs_path)
    out["daemon_user"] = c.string("daemon_user", v["daemon_user"], _pattern(_UNIX_NAME, "a Unix user name"))
    out["yarn_admins"] = c.string_list("yarn_admins", v["yarn_admins"], _pattern(_UNIX_NAME, "a Unix user name"))
    out["service_authorization"] = c.boolean("service_authorization", v["service_authorization"])
    out["resourcemanager_ha_hosts"] = c.string_list("resourcemanager_ha_hosts", v["resourcemanager_ha_hosts"],
                                                    _pattern(_HOST, "a host name"))
    if len(out["resourcemanager_ha_hosts"]) == 1:
        c.fail("resourcemanager_ha_hosts", "HA needs two or more ResourceManager hosts; for one, set "
                                           "resourcemanager_hostname")
    out["zookeeper_quorum"] = c.string_list("zookeeper_quorum", v["zookeeper_quorum"],
                                            _pattern(_HOST_PORT, "host:port of a ZooKeeper server"))
    if len(out["resourcemanager_ha_hosts"]) > 1 and not out["zookeeper_quorum"]:
        c.fail("zookeeper_quorum", "ResourceManager HA elects the active one through ZooKeeper: name its servers "
                                   "(host:port, ...)")
    out["yarn_cluster_id"] = c.string("yarn_cluster_id", v["yarn_cluster_id"], _pattern(_HOST, "a name like yarn-cluster"))
    out["https"] = c.boolean("https", v["https"])
    out["ssl_dir"] = c.string("ssl_dir", v["ssl_dir"], _abs_path)
    for key in ("ssl_keystore_password", "ssl_truststore_password"):
        out[key] = c.string(key, str(v[key]), _pattern(_PASSWORD, "a password without spaces, <, > or &"))
    c.raise_if_any()
    return out


def render_hadoop_conf(values: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """The configuration files for these admin values, as ``{filename: text}``.

    Unknown keys and bad values raise one :class:`SpecError` naming every key at fault.
    """
    values = values or {}
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        known = ", ".join(sorted(DEFAULTS))
        raise SpecError([(k, f"unknown setting (known: {known})") for k in unknown])
    ctx = _check(values)
    # container-executor validates the mounts the NodeManager itself adds
    # (container work and log dirs under these roots) against rw-mounts.
    ctx["all_rw_mounts"] = _unique(ctx["nm_local_dirs"] + ctx["nm_log_dirs"] + ctx["rw_mounts"])
    ctx["nvidia_v1"] = ctx["gpu_docker_plugin"] == "nvidia-docker-v1"
    ctx["all_ro_mounts"] = list(ctx["ro_mounts"])
    if ctx["nvidia_v1"] and ctx["nvidia_driver_version"]:
        # nvidia-docker v1 hands the driver to containers as this named volume.
        ctx["all_ro_mounts"].append(f"nvidia_driver_{ctx['nvidia_driver_version']}")
    ctx["rm_ids"] = [f"rm{i + 1}" for i in range(len(ctx["resourcemanager_ha_hosts"]))]
    names = FILES + (SECURE_FILES if ctx["kerberos_realm"] else ()) + (TLS_FILES if ctx["https"] else ())
    return {name: render(f"hadoop-conf/{name}.j2", **ctx) for name in names}


def mount_warnings(values: Optional[Mapping[str, Any]] = None,
                   exists: Callable[[str], bool] = os.path.exists) -> List[str]:
    """Allowed mount roots missing on this machine.

    container-executor (3.1.1) resolves every root in docker.allowed.ro-mounts and
    rw-mounts before each Docker launch; one that does not exist fails every Docker
    container on that node (exit code 29), whatever the job mounts. Rendering may happen
    elsewhere than on a node, so these are warnings: create the folders on every node.
    """
    ctx = _check({k: v for k, v in (values or {}).items() if k in DEFAULTS})
    # The NodeManager creates its local and log dirs itself; the admin's extra roots it does not.
    roots = [("ro_mounts", p) for p in ctx["ro_mounts"]] + [("rw_mounts", p) for p in ctx["rw_mounts"]]
    return [f"{key}: {path} does not exist on this machine; it must exist on every NodeManager host, "
            f"or every Docker container there fails to launch (exit code 29)"
            for key, path in roots if not exists(path)]


def write_hadoop_conf(out_dir: str, values: Optional[Mapping[str, Any]] = None, force: bool = False) -> List[str]:
    """Render and write the files into ``out_dir`` (created if missing); return their paths.

    Refuses to overwrite an existing file unless ``force``; nothing is written then.
    """
    files = render_hadoop_conf(values)
    paths = {name: os.path.join(out_dir, name) for name in files}
    existing = [p for p in paths.values() if os.path.exists(p)]
    if existing and not force:
        raise SpecError([(p, "already exists (use --force to overwrite)") for p in existing])
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(text)
    return list(paths.values())


def parse_values(pairs: Iterable[str]) -> Dict[str, str]:
    """``KEY=VALUE`` strings (CLI ``--set``) as a dict of strings; the checks happen on render."""
    return {key: raw.strip() for key, raw in split_set_options(pairs)}


def _unique(items: Iterable[str]) -> List[str]:
    seen: Dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
