"""The submitting environment travels to the nodes, so that they need nothing installed.

``subm run`` on YARN ships the venv or conda env it runs from: the AM, the executors and the
tasks run from it (tasks in Docker images, or given ``environment.archive``, excepted: they bring
their own). What travels is one archive per part, each on the cluster's filesystem under the
user's folder, named by a fingerprint of its content (``installed.py``):

    env-<fingerprint>.tar.gz        the environment (venv-pack / conda-pack), editables left out
    python<X.Y>-<fingerprint>.tar.gz a venv's base interpreter, unless it is the OS's (/usr)
    code-<sha256>.tar.gz            the editable installs' code (kilobytes)

A part already there is reused: a second job packs and uploads nothing. YARN localizes each as
an archive it unpacks itself, PRIVATE: the NodeManager's per-user cache keeps it for every later
job (keyed by path and modification time). In the container, :meth:`Travel.setup_lines` makes
a venv of the unpacked parts in milliseconds (a ``pyvenv.cfg``, two links), since a venv's own
``pyvenv.cfg`` names its base interpreter by an absolute path of the submitting machine.

``SUBM_SHIP_ENVIRONMENT=no`` (and ``environment.python``) opt out: for clusters whose nodes
have the environment at the same path (one installed on every node, a shared filesystem).
"""
from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from .....errors import BackendError
from .installed import Installed, read
from ...hadoop.webhdfs import ClusterFilesystem, Files

#: Opting out: "no" when the nodes have the submitting environment at its path.
SHIP_ENV = "SUBM_SHIP_ENVIRONMENT"
#: The unpacked parts, in the container's working directory.
ENV_DIR, BASE_DIR, CODE_DIR, VENV_DIR = "subm-env", "subm-python", "subm-code", ".subm-venv"
#: Where the parts are kept on the cluster's filesystem, under the user's folder.
FOLDER = ".subm/environments"

__all__ = ["Part", "Travel", "ship_environment", "plan", "SHIP_ENV", "Installed", "read"]


def ship_environment() -> bool:
    """Whether the submitting environment travels (SUBM_SHIP_ENVIRONMENT is not "no")."""
    return os.environ.get(SHIP_ENV, "").strip().lower() not in ("no", "0", "false")


@dataclass(frozen=True)
class Part:
    """One archive that travels: its folder in the container and its URI on the cluster."""

    dir: str
    uri: str
    #: What it is, for what subm says ("environment", "interpreter", "code").
    what: str


@dataclass(frozen=True)
class Travel:
    """What travels for one job, decided before submitting (``--dry-run`` shows its URIs)."""

    installed: Installed
    parts: Tuple[Part, ...]
    #: The editable installs' code as it will be uploaded (b"" when there is none).
    code: bytes = b""

    def resources(self) -> Dict[str, object]:
        """skein's files: each part an archive YARN unpacks and keeps in the user's node cache."""
        import skein

        return {p.dir: skein.File(source=p.uri, type="archive", visibility="private") for p in self.parts}

    def setup_lines(self) -> str:
        """Shell lines that set SUBM_PY (``interpreters.PY_VAR``) to the environment's interpreter
        in the container."""
        from .....interpreters import PY_VAR

        inst, dirs = self.installed, {p.dir for p in self.parts}
        lines = []
        if inst.kind == "conda":  # conda-pack's env carries its interpreter and runs where unpacked
            lines.append(f'{PY_VAR}="$PWD/{ENV_DIR}/bin/python"')
        else:
            home = f'"$PWD/{BASE_DIR}/bin"' if BASE_DIR in dirs else shlex.quote(os.path.dirname(inst.base_python))
            venv = f'"$PWD/{VENV_DIR}"'
            lines += [f'mkdir -p {venv}/bin && ln -sfn "$PWD/{ENV_DIR}/lib" {venv}/lib '
                      f'&& ln -sfn {home}/python{inst.version} {venv}/bin/python '
                      f"&& printf 'home = %s\\ninclude-system-site-packages = false\\n' {home} > {venv}/pyvenv.cfg",
                      f'{PY_VAR}={venv}/bin/python']
            if BASE_DIR in dirs and inst.shared_libpython:
                lines.append(f'export LD_LIBRARY_PATH="$PWD/{BASE_DIR}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"')
        if CODE_DIR in dirs:
            lines.append(f'export PYTHONPATH="$PWD/{CODE_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"')
        return "\n".join(lines)

    def task_path_line(self) -> str:
        """A task's PATH: the executor's python wrappers, then the environment's scripts."""
        from .....interpreters import YARN_BIN_DIR

        return f'export PATH="$PWD/{YARN_BIN_DIR}:$PWD/{ENV_DIR}/bin:$PATH"'

    def ensure(self, files: Files, say: Callable[[str], None]) -> None:
        """Put on the cluster's filesystem each part it lacks, saying what was reused, packed and
        uploaded, with the time each took. A part packed for an earlier submission (to this
        cluster or another) is uploaded as it was kept (``kept.py``), not packed again."""
        uploaded = False
        for part in self.parts:
            path = files.path(part.uri)
            if files.exists(path):
                say(f"{part.what}: reusing {part.uri}")
                continue
            uploaded = True
            if part.what == "code":
                with tempfile.TemporaryDirectory(prefix="subm-pack-") as tmp:  # packed by plan(): written out
                    local = os.path.join(tmp, os.path.basename(path))
                    began = time.monotonic()
                    with open(local, "wb") as f:
                        f.write(self.code)
                    written = time.monotonic() - began
                    began = time.monotonic()
                    files.put(local, path)
                say(f"code: packed {self._source(part)} ({len(self.code) / 1e6:.1f} MB) in {written:.1f} s, "
                    f"uploaded to {part.uri} in {time.monotonic() - began:.1f} s")
                continue
            self._pack_and_put(part, path, files, say)
        if uploaded:  # something changed: what an earlier one left may be stale now
            self.prune(files, say)

    def _pack_and_put(self, part: Part, path: str, files: Files, say: Callable[[str], None]) -> None:
        from . import kept, packing

        pack = packing.pack_base if part.what == "interpreter" else packing.pack_environment
        began = time.monotonic()

        def packing_now(out: str) -> None:  # gigabytes take minutes: say what it waits for
            say(f"{part.what}: {files.where.uri}{path} is not there yet: packing {self._source(part)} "
                "(once: later jobs reuse it)")
            pack(self.installed, out)

        with kept.archive(os.path.basename(path), packing_now) as (local, fresh):
            packed = time.monotonic() - began
            size = os.path.getsize(local)
            began = time.monotonic()
            files.put(local, path)
        how = f"packed {self._source(part)} ({size / 1e6:.1f} MB) in {packed:.1f} s" if fresh else \
            f"{self._source(part)} packed earlier ({size / 1e6:.1f} MB, kept in {os.path.dirname(local)})"
        say(f"{part.what}: {how}, uploaded to {part.uri} in {time.monotonic() - began:.1f} s")

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

    def _source(self, part: Part) -> str:
        if part.what == "interpreter":
            return self.installed.base_prefix
        if part.what == "code":
            return ", ".join(e.name for e in self.installed.editables) + " (editable)"
        return self.installed.prefix


def plan(where: ClusterFilesystem, user: str, installed: Optional[Installed] = None) -> Travel:
    """What travels for a job submitted from ``installed`` (default: the running environment)
    by ``user``: the parts' URIs, by fingerprint. Reads the environment; packs only the code."""
    from .packing import pack_code

    inst = installed or read()
    folder = f"{where.uri}/user/{user}/{FOLDER}"
    parts = [Part(ENV_DIR, f"{folder}/env-{inst.kind}-{inst.fingerprint}.tar.gz", "environment")]
    if inst.ship_base:
        parts.append(Part(BASE_DIR, f"{folder}/python{inst.version}-{inst.base_fingerprint}.tar.gz", "interpreter"))
    code = pack_code(inst) if inst.editables else b""
    if code:
        parts.append(Part(CODE_DIR, f"{folder}/code-{hashlib.sha256(code).hexdigest()[:20]}.tar.gz", "code"))
    return Travel(installed=inst, parts=tuple(parts), code=code)
