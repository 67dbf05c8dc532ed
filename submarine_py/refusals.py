"""Launches that the node refuses: no restart can fix them, so the job fails at once.

A container that ends before its executor registers is normally a failed launch, which the AM
retries (a node may be short of disk, a localized file gone). Some ends are refusals instead:
YARN's setuid ``container-executor`` or Docker turned the container down for a reason that holds
on every node and for every attempt (an image outside the trusted registries, a mount the
cluster does not allow, an image that cannot be pulled, an image without what the launch
needs). :func:`refusal` recognises them from the container's exit status and the diagnostics
its NodeManager (or ``docker run``) wrote, and says in one line what was refused, quoting the
message, and which setting must change: the admin's (``container-executor.cfg`` on every
NodeManager, see hadoop-conf/README.md) or the job's.

Pure: text in, text out. The exit statuses seen for each (Hadoop 3.1.1 and 3.1.2, Docker 20.10;
hadoop-conf/README.md has the table) are kept for documentation; the messages decide, since
the same status also ends ordinary launches (127: a command not found).
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from .interpreters import NO_PYTHON3

#: What YARN's exit status of a refused launch was, as measured (the messages decide).
SEEN_EXIT_CODES = {
    "untrusted image, present on the node": 127,   # runs without its mounts: no launch script
    "untrusted image, absent": 7,                  # docker run's pull fails
    "image absent, trusted": 7,
    "mount not allowed": 29,                       # container-executor: "Error constructing docker command"
    "an allowed mount root missing on the node": 29,
    "docker run failing (no bash in the image)": 7,
    "local docker run refused (daemon error)": 125,
    "local image without python3": 127,
    "a network the NodeManager does not allow": -1,  # the NodeManager itself (Java), before container-executor
}

_CFG = "container-executor.cfg on every NodeManager"


def _quote(text: str, limit: int = 300) -> str:
    # YARN's diagnostics run on into container-executor's own progress lines: its message ends there.
    text = re.split(r"\.? (?:See|Run) 'docker run --help'|\s+Shell output:|\s+Launch container failed", text)[0]
    text = re.sub(r"\s+", " ", text).strip().rstrip(".")
    return '"' + (text if len(text) <= limit else text[:limit] + "...") + '"'


def _untrusted(m: "re.Match[str]", text: str) -> str:
    image = m.group("image")
    registry = image.split("/", 1)[0] if "/" in image else "(none: a bare Docker Hub name)"
    return (f"the NodeManager refused image {image}: {_quote(m.group(0))} (container-executor); "
            f"its registry {registry} is not in docker.trusted.registries ({_CFG}): an admin adds it "
            f"there, or name the image with a trusted registry (docker.image)")


def _mount(m: "re.Match[str]", text: str) -> str:
    mount = m.group("mount")
    kind = (m.group("kind") or "").lower()
    writable = kind == "rw" or (not kind and ("read-write mount" in text or mount.endswith(":rw")))
    setting = "docker.allowed.rw-mounts" if writable else "docker.allowed.ro-mounts"
    source = mount.split(":", 1)[0]
    return (f"the NodeManager refused mount {mount}: {_quote(m.group(0))} (container-executor); "
            f"{source} must be under a path listed in {setting} ({_CFG}): an admin adds it there, "
            f"or drop it from docker.mounts")


def _mount_missing(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager refused mount {m.group('mount')}: {_quote(m.group(0))} (container-executor); "
            f"its source does not exist on the node: docker.mounts sources must exist on every node")


def _allowed_root_missing(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager refused every Docker container: {_quote(m.group(0))} (container-executor); "
            f"every path in docker.allowed.ro-mounts and docker.allowed.rw-mounts ({_CFG}) must exist "
            f"on the node: an admin creates it there or removes it from the list")


def _mount_error(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager refused the container's mounts: {_quote(m.group(0))} (container-executor); "
            f"every docker.mounts source must exist and lie under docker.allowed.ro-mounts or "
            f"docker.allowed.rw-mounts ({_CFG})")


def _parent_of_cfg(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager refused mount {m.group('mount')}: {_quote(m.group(0))} (container-executor); "
            f"a read-write mount may not hold container-executor.cfg: drop it from docker.mounts")


def _missing_image(m: "re.Match[str]", text: str) -> str:
    image = m.group("image")
    daemon = re.search(r"(?:docker: )?Error response from daemon: (?P<why>[^\n]*)", text)
    why = f": {_quote(daemon.group('why'))}" if daemon else ""
    return (f"image {image} is not on the node and could not be pulled{why} (docker run); push it to "
            f"its registry or pre-pull it on every node (Hadoop 3.1 has no pull policy), or fix docker.image")


_CE_SETTINGS = (
    ("network", "docker.allowed.networks (and yarn.nodemanager.runtime.linux.docker.allowed-container-networks "
                "in yarn-site.xml)"),
    ("capabilit", "docker.allowed.capabilities"),
    ("device", "docker.allowed.devices"),
    ("volume-driver", "docker.allowed.volume-drivers"),
    ("runtime", "docker.allowed.runtimes"),
    ("privileged", "docker.privileged-containers.enabled"),
    ("image name", "the job's docker.image (not a valid image name)"),
)


def _constructing(m: "re.Match[str]", text: str) -> str:
    message = m.group("message")
    setting = next((s for key, s in _CE_SETTINGS if key in message.lower()),
                   f"the [docker] section of {_CFG}")
    if setting.startswith("docker."):
        setting = f"{setting} ({_CFG})"
    return f"the NodeManager refused the Docker container: {_quote(m.group(0))} (container-executor); see {setting}"


def _network(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager refused network {m.group('network')}: {_quote(m.group(0))}; the networks a job may "
            f"ask for are yarn.nodemanager.runtime.linux.docker.allowed-container-networks (yarn-site.xml) and "
            f"docker.allowed.networks ({_CFG}): use one of them (docker.network), or an admin adds it to both")


def _feature(m: "re.Match[str]", text: str) -> str:
    return (f"the NodeManager's container-executor refused: {_quote(m.group(0))}; an admin must enable it in "
            f"{_CFG}, or pair the container-executor binary with its own Hadoop version")


def _no_bash(m: "re.Match[str]", text: str) -> str:
    return (f"docker run failed: {_quote(m.group(0))}; YARN starts every container with bash "
            f"(launch_container.sh): use an image that has bash")


def _no_python3(m: "re.Match[str]", text: str) -> str:
    return (f"{_quote(m.group(0))}: subm's executor needs python3 (standard library only) in the image; "
            f"use an image that has it, or set environment.python to an interpreter the image has")


def _missing_python(m: "re.Match[str]", text: str) -> str:
    return (f"{_quote(m.group(0))}: environment.python must exist inside the image (mount it with "
            f"docker.mounts, allowed by the cluster), or leave it out to use the image's python3")


def _daemon(m: "re.Match[str]", text: str) -> str:
    return f"docker run failed: {_quote(m.group(0))} (the Docker daemon on the node)"


def _docker_mount(m: "re.Match[str]", text: str) -> str:
    return (f"docker run refused mount {m.group('src')}:{m.group('dst')}: {_quote(m.group(0))}; "
            f"fix docker.mounts (a folder onto a folder, a file onto a file; sources must exist on the node)")


def _local_mount(m: "re.Match[str]", text: str) -> str:
    return f"docker run refused a mount: {_quote(m.group(0))}; fix docker.mounts (sources must exist on this machine)"


_Rule = Tuple["re.Pattern[str]", Callable[["re.Match[str]", str], str]]
#: The first rule that matches decides; specific words before Docker's generic error.
RULES: List[_Rule] = [
    (re.compile(r"image: (?P<image>\S+?) is not trusted\.?"), _untrusted),
    # 3.1.1: "Invalid docker ro mount '/opt:/opt', realpath=/opt"; 3.1.2: "Configuration does not
    # allow docker mount '/opt:/opt:ro', realpath=/opt"; then "... error message='Invalid docker
    # read-only mount'" (or read-write).
    (re.compile(r"(?:Invalid docker (?P<kind>ro|rw) mount|Configuration does not allow docker mount) "
                r"'(?P<mount>[^']*)'(?:, realpath=[^\s']*)?"), _mount),
    (re.compile(r"Attempting to mount a parent directory '(?P<mount>[^']*)' of container-executor\.cfg as read-write"),
     _parent_of_cfg),
    (re.compile(r"Invalid docker mount '(?P<mount>[^']*)'(?:, realpath=[^\s']*)?"), _mount_missing),
    (re.compile(r"Unable to find permitted docker mounts on disk"), _allowed_root_missing),
    (re.compile(r"\[subm\] [^\n]*?" + NO_PYTHON3 + r"[^\n]*"), _no_python3),
    (re.compile(r"\[subm\] environment\.python [^\n]*? does not exist in image [^\n]*"), _missing_python),
    (re.compile(r"Unable to find image '(?P<image>[^']+)' locally"), _missing_image),
    (re.compile(r"Error constructing docker command, docker error code=\d+, error message='(?P<message>[^']*)'"),
     _constructing),
    (re.compile(r"Mount access error"), _mount_error),
    (re.compile(r"Disallowed network: +'(?P<network>[^']*)' specified\. Allowed networks: (?:are )?\[[^\]]*\]"),
     _network),
    (re.compile(r"Feature disabled: [^\n.]+"), _feature),
    (re.compile(r"(?:exec: )?\\?\"?bash\\?\"?: executable file not found in \$PATH"), _no_bash),
    (re.compile(r'error mounting "(?P<src>[^"]+)" to rootfs at "(?P<dst>[^"]+)"[^\n]*'), _docker_mount),
    (re.compile(r"invalid mount config[^\n]*|invalid volume specification[^\n]*|bind source path does not exist[^\n]*|"
                r"error while creating mount source path[^\n]*"), _local_mount),
    (re.compile(r"docker: Error response from daemon: [^\n]*"), _daemon),
]


def refusal(exit_code: Optional[int], diagnostics: str) -> str:
    """The verdict on a container that ended before its executor registered: "" for an ordinary
    failed launch (worth retrying), else one line saying what the node refused, its words
    quoted, and the setting to change. ``diagnostics``: what YARN's NodeManager said of the
    container (or ``docker run``'s stderr locally), with the container's own log tail."""
    if exit_code == 0 or not diagnostics:
        return ""
    for pattern, verdict in RULES:
        m = pattern.search(diagnostics)
        if m:
            return verdict(m, diagnostics)
    return ""
