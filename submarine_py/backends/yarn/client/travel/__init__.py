"""The submitting environment travels to the nodes, so that they need nothing installed.

``subm run`` on YARN ships the venv or conda env it runs from: the AM, the executors and the
tasks run from it (tasks in Docker images, or given ``environment.archive``, excepted: they bring
their own). What travels is a few archives, each on the cluster's filesystem under the user's
folder, named by a fingerprint of what it holds (``installed.py``, ``layers.py``):

    site-<dist>-<fingerprint>.tar.gz  a venv's big distribution (torch, each nvidia-* wheel...)
    site-rest-<fingerprint>.tar.gz    its other distributions (and, after a small change,
    site-delta-<fingerprint>.tar.gz   what changed, above the last rest layer)
    env-venv-<fingerprint>.tar      the rest of the venv: bin/, its own files (venv-pack)
    env-conda-<fingerprint>.tar.gz  a conda env, whole (conda-pack)
    python<X.Y>-<fingerprint>.tar   a venv's base interpreter, unless it is the OS's (/usr)
    code-<sha256>.tar.gz            the editable installs' code (kilobytes)

An archive already there is reused: a second job packs and uploads nothing, and a job after a
package upgrade ships the layer that changed. Archives are packed in parallel, uploaded two at a
time, with progress shown (``progress.py``). YARN localizes each as an archive it unpacks itself,
PRIVATE: the NodeManager's per-user cache keeps it for every later job (keyed by path and
modification time), and fetches a container's files in parallel
(``yarn.nodemanager.localizer.fetch.thread-count``). YARN unpacks the small archives itself; the
layers travel as files the first container on a node unpacks beside YARN's copy, several times
faster than YARN's unpacking (``farm.py``). :meth:`Travel.setup_lines` then makes a venv of the
parts in milliseconds (a ``pyvenv.cfg``, links), since a venv's own ``pyvenv.cfg`` names its base
interpreter by an absolute path of the submitting machine.

``SUBM_SHIP_ENVIRONMENT=no`` (and ``environment.python``) opt out: for clusters whose nodes
have the environment at the same path (one installed on every node, a shared filesystem).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .....errors import BackendError
from .....progress import Meter, size
from . import layers
from .choice import SHIP_ENV, Choice, choose, ship_environment
from .installed import Installed, read
from ...hadoop.webhdfs import ClusterFilesystem, Files

#: The unpacked parts, in the container's working directory.
ENV_DIR, BASE_DIR, CODE_DIR, VENV_DIR = "subm-env", "subm-python", "subm-code", ".subm-venv"
#: A venv's layer i, unpacked in the container's working directory.
LAYER_DIR = "subm-layer-{}"
#: Archives packed at once, uploaded at once.
PACKERS, UPLOADERS = 4, 2
#: Where the parts are kept on the cluster's filesystem, under the user's folder.
FOLDER = ".subm/environments"

__all__ = ["Part", "Travel", "Choice", "choose", "ship_environment", "plan", "SHIP_ENV", "Installed", "read"]


@dataclass(frozen=True)
class Part:
    """One archive that travels: its folder in the container and its URI on the cluster."""

    dir: str
    uri: str
    #: What it is: "environment", "layer", "interpreter", "code".
    what: str
    #: A layer's: what it holds (for what subm says) and about how many bytes.
    label: str = ""
    size: int = 0
    #: A layer's entries the container does not link (``layers.Layering.hidden``).
    hidden: Tuple[str, ...] = ()
    #: Whether the ApplicationMaster's container needs it (a layer only what the AM imports:
    #: the AM starts without waiting for torch's gigabytes on its node).
    am: bool = True


@dataclass(frozen=True)
class Travel:
    """What travels for one job, decided before submitting (``--dry-run`` shows its URIs)."""

    installed: Installed
    parts: Tuple[Part, ...]
    #: The editable installs' code as it will be uploaded (b"" when there is none).
    code: bytes = b""
    #: A venv's layers as planned (None: a conda env, or a Travel made by hand).
    layering: Optional[layers.Layering] = None

    def for_am(self) -> "Travel":
        """What the ApplicationMaster's container gets: the layers it imports from, the rest."""
        return Travel(installed=self.installed, parts=tuple(p for p in self.parts if p.am), code=self.code,
                      layering=self.layering)

    def resources(self) -> Dict[str, object]:
        """skein's files, each kept in the user's node cache: a layer a file the container
        unpacks once per node (``farm.py``), the others archives YARN unpacks."""
        import skein

        return {p.dir: skein.File(source=p.uri, type="file" if p.what == "layer" else "archive", visibility="private")
                for p in self.parts}

    def setup_lines(self) -> str:
        """Shell lines that set SUBM_PY (``interpreters.PY_VAR``) to the environment's interpreter
        in the container."""
        from .....interpreters import PY_VAR
        from . import farm

        inst, dirs = self.installed, {p.dir for p in self.parts}
        lines = []
        if inst.kind == "conda":  # conda-pack's env carries its interpreter and runs where unpacked
            lines.append(f'{PY_VAR}="$PWD/{ENV_DIR}/bin/python"')
        else:
            home = f'"$PWD/{BASE_DIR}/bin"' if BASE_DIR in dirs else shlex.quote(os.path.dirname(inst.base_python))
            venv = f'"$PWD/{VENV_DIR}"'
            if BASE_DIR in dirs and inst.shared_libpython:
                lines.append(f'export LD_LIBRARY_PATH="$PWD/{BASE_DIR}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"')
            lines.append(f'mkdir -p {venv}/bin && ln -sfn {home}/python{inst.version} {venv}/bin/python '
                         f"&& printf 'home = %s\\ninclude-system-site-packages = false\\n' {home} > {venv}/pyvenv.cfg")
            layer_parts = [p for p in self.parts if p.what == "layer"]
            if layer_parts:
                site = f"{VENV_DIR}/lib/python{inst.version}/site-packages"
                spec = [(p.dir, os.path.basename(p.uri), p.hidden) for p in layer_parts]
                spec.append((f"{ENV_DIR}/{inst.site}", "", ()))
                lines.append(farm.command(f"{home}/python{inst.version}", site, spec))
            else:
                lines.append(f'ln -sfn "$PWD/{ENV_DIR}/lib" {venv}/lib')
            lines.append(f'{PY_VAR}={venv}/bin/python')
        if CODE_DIR in dirs:
            lines.append(f'export PYTHONPATH="$PWD/{CODE_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"')
        return "\n".join(lines)

    def task_path_line(self) -> str:
        """A task's PATH: the executor's python wrappers, then the environment's scripts."""
        from .....interpreters import YARN_BIN_DIR

        return f'export PATH="$PWD/{YARN_BIN_DIR}:$PWD/{ENV_DIR}/bin:$PATH"'

    def ensure(self, files: Files, say: Callable[[str], None]) -> None:
        """Put on the cluster's filesystem each part it lacks, saying what was reused, packed and
        uploaded, with the bytes and time each step took; packing and uploading show progress
        (``progress.py``). A part packed for an earlier submission (to this cluster or another)
        is uploaded as it was kept (``kept.py``), not packed again."""
        missing = [p for p in self.parts if not files.exists(files.path(p.uri))]
        there = len(self.parts) - len(missing)
        if there:
            say(f"environment: {there} of {len(self.parts)} archives on {files.where.uri} already, reused")
        if not missing:
            return
        with contextlib.ExitStack() as stack:
            local = self._packed(missing, stack, say)
            self._upload(missing, local, files, say)
        self.prune(files, say)  # something changed: what an earlier one left may be stale now

    def _packed(self, parts: Sequence[Part], stack: contextlib.ExitStack, say: Callable[[str], None]) -> List[str]:
        """The local archive of each of ``parts``: kept from an earlier submission, else packed
        now, several at once."""
        from . import kept

        fresh = [p for p in parts if p.what != "code" and not kept.has(os.path.basename(p.uri))]
        total = sum(self._bytes_to_pack(p) for p in fresh)
        if fresh:
            say(f"environment: packing {len(fresh)} archive(s) of {self.installed.prefix}, {size(total)} "
                f"({', '.join(_label(p) for p in fresh)}; once: later jobs reuse them)")
        began = time.monotonic()
        with Meter("packing", total, parts=len(fresh)) as meter:
            def one(part: Part) -> Tuple[contextlib.AbstractContextManager, str]:
                cm = kept.archive(os.path.basename(part.uri), lambda out: self._pack(part, out, meter))
                path, _ = cm.__enter__()
                return cm, path

            with ThreadPoolExecutor(PACKERS) as pool:
                done = list(pool.map(one, parts))
        for cm, _ in done:
            stack.push(cm.__exit__)
        if fresh:
            said = sum(os.path.getsize(path) for (_, path), p in zip(done, parts) if p in fresh)
            say(f"environment: packed {len(fresh)} archive(s), {size(said)}, in {time.monotonic() - began:.1f} s")
        return [path for _, path in done]

    def _bytes_to_pack(self, part: Part) -> int:
        from . import packing

        inst = self.installed
        if part.what == "layer":
            return packing.bytes_to_pack(os.path.join(inst.prefix, inst.site), self._layer(part).entries)
        if part.what == "interpreter":
            return packing.base_bytes(inst)
        if part.what == "environment":
            return packing.bytes_to_pack(inst.prefix, left_out=packing.left_out_of_environment(inst))
        return len(self.code)

    def _layer(self, part: Part) -> layers.Layer:
        """The layer a part of kind "layer" ships."""
        return next(lay for lay in self.layering.layers if lay.name == os.path.basename(part.uri))

    def _pack(self, part: Part, out: str, progress: Callable[[int], None]) -> None:
        from . import packing

        if part.what == "code":
            with open(out, "wb") as f:
                f.write(self.code)
        elif part.what == "interpreter":
            packing.pack_base(self.installed, out, progress)
        elif part.what == "layer":
            from . import kept

            layer = self._layer(part)
            packing.pack_layer(self.installed, layer, out, progress)
            if layer.kind == "site-rest":  # the next small change ships a delta above it
                kept.remember_rest(self.installed.prefix, layers.to_record(layer))
        else:
            packing.pack_environment(self.installed, out, progress)

    def _upload(self, parts: Sequence[Part], local: Sequence[str], files: Files, say: Callable[[str], None]) -> None:
        total = sum(os.path.getsize(p) for p in local)
        began = time.monotonic()
        with Meter("uploading", total, parts=len(parts)) as meter:
            def one(i: int) -> None:
                files.put(local[i], files.path(parts[i].uri), progress=meter)

            with ThreadPoolExecutor(UPLOADERS) as pool:
                list(pool.map(one, range(len(parts))))
        took = time.monotonic() - began
        say(f"environment: uploaded {len(parts)} archive(s), {size(total)}, to {files.where.uri}"
            f"{os.path.dirname(files.path(parts[0].uri))} in {took:.1f} s ({total / 1e6 / max(took, 1e-3):.0f} MB/s)")

    def prune(self, files: Files, say: Callable[[str], None]) -> None:
        """Remove from the folder of the parts what nothing uses any more (``pruning.py``)."""
        from .pruning import stale

        if not self.parts:
            return
        folder = files.path(self.parts[0].uri).rsplit("/", 1)[0]
        keep = {files.path(p.uri) for p in self.parts}
        try:
            for s in stale(files.listing(folder), keep, int(time.time() * 1000)):
                files.remove(s.path)
                say(f"removed {files.uri(s.path)} ({s.size / 1e6:.1f} MB): {s.why}")
        except BackendError as exc:  # the job goes on: pruning is housekeeping
            say(f"could not prune {files.uri(folder)}: {exc}")



def _am_needs(inst: Installed, layer: layers.Layer) -> bool:
    """Whether the AM's container gets ``layer``: the small distributions always, a big one
    where the AM imports it (every one where what the AM needs is unknown)."""
    return (layer.kind in ("site-rest", "site-delta") or not inst.am_needs
            or any(d.name in inst.am_needs for d in layer.dists))


def _label(part: Part) -> str:
    return part.label or part.what


def plan(where: ClusterFilesystem, user: str, installed: Optional[Installed] = None) -> Travel:
    """What travels for a job submitted from ``installed`` (default: the running environment)
    by ``user``: the parts' URIs, by fingerprint. Reads the environment; packs only the code."""
    from . import kept
    from .packing import pack_code

    inst = installed or read()
    folder = f"{where.uri}/user/{user}/{FOLDER}"
    parts: List[Part] = []
    planned = None
    if inst.kind == "venv" and inst.dists:
        tag = f"python{inst.version} {platform.machine()}"
        previous = kept.previous_rest(inst.prefix)
        planned = layers.layering(inst.dists, tag, layers.from_record(previous) if previous else None)
        for i, layer in enumerate(planned.layers):
            parts.append(Part(LAYER_DIR.format(i), f"{folder}/{layer.name}", "layer",
                              label=layer.kind[len("site-"):], size=layer.size, hidden=planned.hidden_in(layer),
                              am=_am_needs(inst, layer)))
        parts.append(Part(ENV_DIR, f"{folder}/env-{inst.kind}-{inst.fingerprint}.tar", "environment"))
    else:
        suffix = ".tar.gz" if inst.kind == "conda" else ".tar"
        parts.append(Part(ENV_DIR, f"{folder}/env-{inst.kind}-{inst.fingerprint}{suffix}", "environment"))
    if inst.ship_base:
        parts.append(Part(BASE_DIR, f"{folder}/python{inst.version}-{inst.base_fingerprint}.tar", "interpreter"))
    code = pack_code(inst) if inst.editables else b""
    if code:
        parts.append(Part(CODE_DIR, f"{folder}/code-{hashlib.sha256(code).hexdigest()[:20]}.tar.gz", "code"))
    return Travel(installed=inst, parts=tuple(parts), code=code, layering=planned)
