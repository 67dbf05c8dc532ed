"""What the submitting environment is, read without packing it: a venv or a conda env, its
interpreter, what is installed there, and its editable installs (the code being worked on).

The fingerprints name what travels (``travel/__init__.py``). They are of what is installed,
not of an archive's bytes: an unchanged environment is recognised in milliseconds, without
packing gigabytes again to find that nothing changed. A package's ``RECORD`` lists the hash of
every file pip installed, so a reinstall of another build changes the fingerprint too; files
copied into site-packages by hand do not (docs/yarn.md says so).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import site
import sys
import sysconfig
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

from .....errors import SpecError
from .layers import Dist, owned_entries

#: Base installations the nodes' own operating system is taken to have (not shipped).
SYSTEM_PREFIXES = ("/usr",)
NOT_AN_ENVIRONMENT = ("is neither a virtualenv nor a conda env, so there is nothing subm can ship to the nodes: "
                      "run subm from a venv (python -m venv) or a conda env with your packages, or set "
                      "environment.python to an interpreter that every node has")


@dataclass(frozen=True)
class Editable:
    """An editable install (``pip install -e``): its importable top-level names and where they are."""

    name: str
    #: (top-level name, path on this machine: a package's folder or a module's file)
    paths: Tuple[Tuple[str, str], ...]
    #: What pip wrote for it inside the environment (its .pth file, import hook, dist-info),
    #: relative to the environment's prefix: left out of the environment's archive.
    files: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Installed:
    """The submitting environment as it will travel."""

    prefix: str
    #: "venv" (venv-pack packs it) or "conda" (conda-pack; the env carries its interpreter).
    kind: str
    #: "3.11": the interpreter's name in the base installation is python<version>.
    version: str
    #: A venv's base installation (its interpreter and standard library); "" for conda.
    base_prefix: str
    #: Whether the base installation travels too (a venv whose base is not the OS's).
    ship_base: bool
    #: The base installation's libpython is a shared library (the launch adds it to LD_LIBRARY_PATH).
    shared_libpython: bool
    editables: Tuple[Editable, ...]
    #: Of what is installed, editable installs excepted (they travel on their own).
    fingerprint: str
    #: Of the base installation ("" when it does not travel).
    base_fingerprint: str
    #: A venv's distributions in its site-packages, editable installs excepted, as layers take
    #: them (``layers.py``); () for a conda env (conda-pack packs it whole).
    dists: Tuple[Dist, ...] = ()
    #: That site-packages, relative to ``prefix`` ("lib/python3.11/site-packages").
    site: str = ""
    #: What the ApplicationMaster imports: submarine-py and what it requires (with its extras
    #: for YARN), by name; the AM's container gets only the layers holding them (empty: unknown).
    am_needs: FrozenSet[str] = frozenset()

    @property
    def base_python(self) -> str:
        """The base interpreter's path on this machine (a venv's ``home``)."""
        return os.path.join(self.base_prefix, "bin", f"python{self.version}")


def read(prefix: Optional[str] = None, base_prefix: Optional[str] = None) -> Installed:
    """The environment at ``prefix`` (default: the one running), or a SpecError saying what to do."""
    prefix = os.path.realpath(prefix or sys.prefix)
    base_prefix = os.path.realpath(base_prefix or sys.base_prefix)
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        kind = "conda"
    elif os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) and prefix != base_prefix:
        kind = "venv"
    else:
        raise SpecError([("environment", f"subm runs from {prefix}, which {NOT_AN_ENVIRONMENT}")])
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    site_dirs = site_packages(prefix)
    dists = list(importlib.metadata.distributions(path=site_dirs))
    editables = tuple(e for e in (_editable(d, prefix) for d in dists) if e is not None)
    editable_names = {e.name for e in editables}
    ship_base = kind == "venv" and base_prefix not in SYSTEM_PREFIXES
    lines = [f"kind {kind}", f"python {sys.version}", f"machine {platform.machine()}"]
    lines += sorted(_dist_line(d) for d in dists if _name(d) not in editable_names)
    if kind == "conda":
        lines += sorted(os.listdir(os.path.join(prefix, "conda-meta")))
    layered = _dists(dists, site_dirs[0], editable_names) if kind == "venv" and site_dirs else ()
    am_needs = _required(dists, "submarine-py", AM_EXTRAS) if layered else frozenset()
    return Installed(prefix=prefix, kind=kind, version=version, base_prefix=base_prefix if kind == "venv" else "",
                     ship_base=ship_base, shared_libpython=bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
                     editables=editables, fingerprint=_digest(lines),
                     base_fingerprint=_base_digest(base_prefix, version) if ship_base else "",
                     dists=layered, site=os.path.relpath(site_dirs[0], prefix) if layered else "",
                     am_needs=am_needs)


def site_packages(prefix: str) -> List[str]:
    return [d for d in site.getsitepackages([prefix]) if os.path.isdir(d)]


def _dists(dists: List[importlib.metadata.Distribution], site_dir: str, skip: Iterable[str]) -> Tuple[Dist, ...]:
    """The distributions installed in ``site_dir`` (but ``skip``'s), each with its size and the
    entries it owns there; one whose RECORD is missing stays with the environment's archive."""
    skip, files, found = set(skip), {}, {}
    for d in dists:
        name = _name(d)
        if name in skip or name in found or not d.files or \
                os.path.realpath(str(d.locate_file(""))) != os.path.realpath(site_dir):
            continue
        found[name] = d
        files[name] = [str(f) for f in d.files]
    owned = owned_entries(files)
    return tuple(Dist(name=name, line=_dist_line(d), size=sum(int(f.size or 0) for f in d.files or ()),
                      entries=owned[name]) for name, d in sorted(found.items()) if owned[name])


#: submarine-py's extras the ApplicationMaster may use (sweep: a sweep's AM searches with Optuna).
AM_EXTRAS = ("yarn", "kerberos", "gpu", "sweep")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _required(dists: List[importlib.metadata.Distribution], root: str, extras: Iterable[str]) -> FrozenSet[str]:
    """The names ``root`` requires, directly or not: its requirements and those of ``extras``,
    then every requirement of theirs without an extra (markers otherwise taken as true: a few
    more names than needed is no harm)."""
    by_name: Dict[str, importlib.metadata.Distribution] = {}
    for d in dists:
        by_name.setdefault(_name(d), d)
    if root not in by_name:
        return frozenset()  # not installed here: unknown
    seen, todo = set(), [(root, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        if name in seen or name not in by_name:
            seen.add(name)
            continue
        seen.add(name)
        for req in by_name[name].requires or ():
            marker = _EXTRA_MARKER.search(req)
            if marker and marker.group(1) not in wanted:
                continue
            found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if found:
                todo.append((found.group(1).lower().replace("_", "-").replace(".", "-"), ()))
    return frozenset(seen)


def _name(dist: importlib.metadata.Distribution) -> str:
    return (dist.metadata["Name"] or "").lower().replace("_", "-")


def _dist_line(dist: importlib.metadata.Distribution) -> str:
    record = dist.read_text("RECORD") or dist.read_text("METADATA") or ""
    return f"{_name(dist)} {dist.version} {hashlib.sha256(record.encode()).hexdigest()}"


def _digest(lines: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:20]


def _base_digest(base_prefix: str, version: str) -> str:
    exe = os.path.realpath(os.path.join(base_prefix, "bin", f"python{version}"))
    try:
        st = os.stat(exe)
    except OSError:
        raise SpecError([("environment", f"the venv's base interpreter {exe} is gone, so it cannot travel with "
                                         "the venv: recreate the venv, or set environment.python")]) from None
    return _digest([base_prefix, sys.version, str(st.st_size), str(st.st_mtime_ns)])


def _editable(dist: importlib.metadata.Distribution, prefix: str) -> Optional[Editable]:
    """The editable install ``dist`` is (PEP 610's direct_url.json says so), or None."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    if not (direct.get("dir_info") or {}).get("editable"):
        return None
    names = [n.strip() for n in (dist.read_text("top_level.txt") or "").splitlines() if n.strip()]
    paths = [p for p in (_where(n) for n in names) if p is not None]
    if not paths:  # a .pth naming a source folder (hatchling, setup.py develop): its modules
        paths = [p for folder in _pth_folders(dist) for p in _modules_in(folder)]
    written = (os.path.realpath(str(f.locate())) for f in dist.files or ())
    files = tuple(sorted(os.path.relpath(p, prefix) for p in written if p.startswith(prefix + os.sep)))
    return Editable(name=_name(dist), paths=tuple(sorted(set(paths))), files=files)


def _where(name: str) -> Optional[Tuple[str, str]]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return name, list(spec.submodule_search_locations)[0]
    return (name, spec.origin) if spec.origin and os.path.isfile(spec.origin) else None


def _pth_folders(dist: importlib.metadata.Distribution) -> List[str]:
    out = []
    for f in dist.files or ():
        if str(f).endswith(".pth"):
            for line in (f.read_text() or "").splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import ")) and os.path.isdir(line):
                    out.append(line)
    return out


def _modules_in(folder: str) -> List[Tuple[str, str]]:
    out = []
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".py") and os.path.isfile(path):
            out.append((entry[:-3], path))
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            out.append((entry, path))
    return out
