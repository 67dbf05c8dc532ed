"""What YARN cannot take in a job file, checked from the spec alone (``YarnBackend.check``).

Each rule here is YARN's, not the job file's: YARN writes these values into the launch
script of each container (a shell script), into its Docker runtime's variables (mounts
separated by ``,`` and ``:``), or checks them itself (queue paths, node label names, the
number and form of application tags). The local backend takes any of them.

Pure: reads only the spec. No cluster, no skein, no driver, no file, so ``subm validate``
asks it offline; the cluster's own limits are ``YarnBackend.check_cluster``'s.
"""
from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from ....jobfile.fields import show
from ....jobfile.model import DockerSpec, JobSpec

#: A name YARN turns into a file of the container's directory (a ``files`` destination or a
#: source's base name): YARN's launch script writes it between double quotes, so no ``$``,
#: backquote, quote, backslash or control character may reach it; no ``:``/``#``/``%``/``?``
#: (URIs) and no leading ``-`` (an option to ``ln``).
FILE_NAME = re.compile(r"^[A-Za-z0-9._+@=,~][A-Za-z0-9._+@=,~ -]*\Z")
FILE_NAME_RULE = ("names may hold letters, digits, spaces and . _ + @ = , ~ - (not first), "
                  "nothing a shell would read")
#: A host or container path of a Docker mount (YARN separates mounts with ',' and fields with ':').
MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._+@=~/-]*\Z")
#: A queue name or path (root.team.a): no spaces, no empty parts.
QUEUE = re.compile(r"^[A-Za-z0-9_@+-]+(?:\.[A-Za-z0-9_@+-]+)*\Z")
MAX_QUEUE_CHARS = 255
#: YARN's node label names; Hadoop 3.1 takes one label per request.
NODE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,254}\Z")
#: YARN keeps at most 10 tags of at most 100 characters; submarine-py uses one itself.
MAX_TAGS = 9
MAX_TAG_CHARS = 100

Problem = Tuple[str, str]


def base_name(source: str) -> str:
    """The last part of a source path or URL (what YARN calls the localized copy)."""
    path = source.split("://", 1)[1].split("/", 1)[-1] if "://" in source else source
    return os.path.basename(path.rstrip("/")) or path


def problems(spec: JobSpec) -> List[Problem]:
    """Every YARN rule ``spec`` breaks, as ``(field path, message)``, in the job file's order."""
    out: List[Problem] = []
    if len(spec.queue) > MAX_QUEUE_CHARS or not QUEUE.match(spec.queue):
        out.append(("queue", "expected a YARN queue name or path (letters, digits, '_', '-', '@', '+', "
                             f"parts joined by '.', no spaces), got {show(spec.queue)}"))
    out += _mounts(spec.docker, "docker")
    inherited = spec.docker.mounts if spec.docker else ()
    for name, role in spec.roles.items():
        if role.docker is not spec.docker:  # a mount it shares with the job is named there
            out += _mounts(role.docker, f"roles.{name}.docker", skip=inherited)
        if role.node_label and not NODE_LABEL.match(role.node_label):
            out.append((f"roles.{name}.node_label", f"expected one YARN node label (letters, digits, '_', '-'), "
                                                   f"got {show(role.node_label)}"))
    out += _files(spec)
    out += _environment(spec)
    out += _tags(spec)
    out += _tensorboard(spec)
    if spec.shared_dir and not MOUNT_PATH.match(spec.shared_dir):  # a Docker mount too
        out.append(("shared_dir", f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes it "
                                  f"through a shell script), got {show(spec.shared_dir)}"))
    return out


def _mounts(docker: Optional[DockerSpec], path: str, skip: Tuple[str, ...] = ()) -> List[Problem]:
    """Docker mounts reach YARN as one variable its launch script holds (``src:dst:mode,...``)."""
    if docker is None:
        return []
    out = []
    for i, mount in enumerate(docker.mounts):
        if mount in skip:
            continue
        bad = next((part for part in mount.split(":")[:2] if not MOUNT_PATH.match(part)), None)
        if bad is not None:
            out.append((f"{path}.mounts[{i}]", f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes "
                                               f"mounts through a shell script), got {bad!r}"))
    return out


def _files(spec: JobSpec) -> List[Problem]:
    out = []
    for dest, src in spec.files.items():
        path = f"files.{dest}"
        bad = [part for part in dest.split("/") if part and not FILE_NAME.match(part)]
        if bad:
            out.append((path, f"{bad[0]!r} in the destination: {FILE_NAME_RULE}"))
            continue
        base = base_name(src)
        if "://" in src and not FILE_NAME.match(base):  # YARN localizes it under this name
            out.append((path, f"the source's name {base!r}: {FILE_NAME_RULE} (YARN names the copy after it)"))
    return out


def _environment(spec: JobSpec) -> List[Problem]:
    env, out = spec.environment, []
    if env.cache_dir and os.path.isabs(env.cache_dir) and not MOUNT_PATH.match(env.cache_dir):
        out.append(("environment.cache_dir", f"paths may hold letters, digits and / . _ + @ = ~ - (YARN passes it "
                                             f"through a shell script), got {show(env.cache_dir)}"))
    if env.archive and not FILE_NAME.match(base_name(env.archive)):
        out.append(("environment.archive", f"the name {base_name(env.archive)!r}: {FILE_NAME_RULE} "
                                           "(YARN names the copy after it)"))
    return out


def _tensorboard(spec: JobSpec) -> List[Problem]:
    """The job's TensorBoard reads what every task writes, on whichever node each runs: a log
    folder on this machine would be a different folder on each node."""
    if spec.tensorboard is None or spec.tensorboard.logdir or spec.shared_dir:
        return []
    return [("tensorboard", "on YARN, TensorBoard reads a log folder every task can write to: set shared_dir "
                            "(a path every node mounts; TensorBoard then reads tensorboard/ in the job's "
                            "subfolder) or tensorboard.logdir (such a path, or a URI like hdfs://...)")]


def _tags(spec: JobSpec) -> List[Problem]:
    """YARN's application tags: ASCII, no commas (its CLI and REST API split on them), at most
    100 characters, at most 10 (one is submarine-py's). Compared without case, as YARN does:
    the job file keeps them lower-case for every backend."""
    out = []
    if len(spec.tags) > MAX_TAGS:
        out.append(("tags", f"expected at most {MAX_TAGS} tags (YARN keeps 10 and submarine-py uses one), "
                            f"got {len(spec.tags)}"))
    for i, tag in enumerate(spec.tags):
        if not tag or "," in tag or len(tag) > MAX_TAG_CHARS or not tag.isascii() or not tag.isprintable():
            out.append((f"tags[{i}]", f"expected printable ASCII without commas, 1 to {MAX_TAG_CHARS} "
                                      f"characters, got {show(tag)}"))
    return out
