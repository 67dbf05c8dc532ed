"""The environments the tests run ``subm`` and their jobs' programs with.

Where the rig's nodes see this machine's folders, a job can run this venv where it is. Isolated
nodes (rig.sh's RIG_ISOLATED=1) have only their operating system's ``python3`` and the rig's
shared folder (RIG_SHARED, mounted on every node as an NFS share would be). There, a job either
takes its environment along (the default, :func:`slim_python`'s few hundred MB), or runs one that
"admins installed on every node" in the shared folder: :func:`preinstalled_python`, and for
PyTorch and TensorFlow :func:`shared_python`, this venv's packages as hard links, since packing
this venv's 6.5 GB (49 000 files) to unpack on every node of every rig would cost CI many minutes
(bench/environment_travel.py measures that path).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent
#: The rig's nodes share nothing with this machine but the rig's shared folder.
ISOLATED_NODES = os.environ.get("RIG_ISOLATED") == "1"
#: The interpreter isolated nodes have, as every node of a cluster has its OS's.
NODES_PYTHON = "/usr/bin/python3"
#: The tests' cluster (read at import: each test's fixture hides HADOOP_CONF_DIR), or None.
CLUSTER_CONF_DIR = os.environ.get("HADOOP_CONF_DIR")


def venv_with_subm(venv_dir: Path, extras: str, *editable: Path, base: Optional[str] = None) -> Path:
    """A user's venv at ``venv_dir``, made from ``base`` (by default this machine's base
    interpreter), holding ``submarine-py[extras]`` and the ``editable`` projects (``pip install
    -e``) and nothing else; returns its interpreter. With ``base`` given, submarine-py is installed
    as a copy, not editable: the venv then needs nothing of this machine but that interpreter."""
    made_from = base or os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    subprocess.run([made_from, "-m", "venv", str(venv_dir)], check=True, timeout=120)
    python = venv_dir / "bin" / "python"
    subm = [] if base else ["-e"]
    for how, project in ((subm, f"{REPO}[{extras}]"), *((["-e"], str(e)) for e in editable)):
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               *how, project], capture_output=True, text=True, timeout=600)
        if done.returncode:
            pytest.fail(f"cannot install {project} into {venv_dir}:\n{done.stderr[-3000:]}")
    return python


def python_without(root: Path, hidden: Tuple[str, ...], *, for_isolated_nodes: bool = False) -> str:
    """Make ``root`` a virtualenv that holds this interpreter's environment but for the packages
    whose entries in site-packages start with one of ``hidden`` (case-insensitively: modules,
    their ``.dist-info``, their ``.libs``); returns its interpreter's path.

    Nothing is installed: every other entry of this environment's site-packages (``.pth`` files
    included) is a symlink, and its ``bin`` has this environment's console scripts
    (``torchrun``, ``tensorboard``, ...) started by its own interpreter, but for those that import
    a hidden package. For the hidden packages, ``import`` fails, ``importlib.util.find_spec``
    answers None and ``importlib.metadata`` knows no version: as where they were never installed.

    ``for_isolated_nodes``: for nodes that see only ``root`` (in the rig's shared folder) and
    their own ``/usr/bin/python3``: the venv is made from that interpreter (of this one's minor
    version: the same compiled packages load), the entries are hard links (a copy where ``root``
    is on another filesystem), and submarine-py, installed editable here, is a copy of its package.
    """
    if for_isolated_nodes:
        _same_minor_version(NODES_PYTHON)
        subprocess.run([NODES_PYTHON, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    else:
        venv.EnvBuilder(symlinks=True, with_pip=False).create(root)
    python = root / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    prefixes = tuple(name.lower() for name in hidden)
    entries = []
    for folder in dict.fromkeys(site.getsitepackages()):
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            if (hidden and entry.lower().startswith(prefixes)) or os.path.lexists(target / entry):
                continue
            if for_isolated_nodes and entry.startswith("__editable__") and "submarine_py" in entry:
                continue  # it points into this checkout: the package is copied below instead
            entries.append(os.path.join(folder, entry))
    if for_isolated_nodes:
        _hard_copy(entries, target)
        shutil.copytree(REPO / "submarine_py", target / "submarine_py",
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        for path in entries:
            (target / os.path.basename(path)).symlink_to(path)
    imports_hidden = re.compile(r"^\s*(from|import)\s+(%s)\b" % "|".join(map(re.escape, hidden)), re.M)
    own_bin = Path(sys.prefix) / "bin"
    for script in sorted(own_bin.iterdir()) if own_bin.is_dir() else ():
        copy = root / "bin" / script.name
        if copy.exists() or not script.is_file():
            continue
        try:
            text = script.read_text()
        except (OSError, UnicodeDecodeError):  # a binary
            continue
        first, _, body = text.partition("\n")
        if not first.startswith("#!") or Path(first[2:].strip()).parent != own_bin:
            continue
        if hidden and imports_hidden.search(body):
            continue
        copy.write_text(f"#!{python}\n{body}")
        copy.chmod(0o755)
    probe = "import importlib.util as u, sys; sys.exit(any(u.find_spec(n) for n in sys.argv[1:]))"
    if subprocess.run([str(python), "-c", probe, *hidden], cwd=root).returncode:
        pytest.fail(f"{python} still finds one of {hidden}")
    return str(python)


def _same_minor_version(python: str) -> None:
    ask = "import sys; print('%d.%d' % sys.version_info[:2])"
    theirs = subprocess.run([python, "-c", ask], capture_output=True, text=True).stdout.strip()
    ours = "%d.%d" % sys.version_info[:2]
    if theirs != ours:
        pytest.fail(f"the isolated nodes' {python} is Python {theirs or '(none)'}, this venv's {ours}: its "
                    f"compiled packages would not load there; make the venv from Python {theirs}")


def _hard_copy(paths: list, target: Path) -> None:
    """``cp -al PATHS TARGET``: hard links, made in a few seconds and taking no room; where
    ``target`` is on another filesystem than this venv, a copy."""
    if not paths:
        return
    if subprocess.run(["cp", "-al", *paths, str(target)], capture_output=True).returncode:
        subprocess.run(["cp", "-a", *paths, str(target)], check=True)


def new_shared_folder(prefix: str, elsewhere: Optional[Path] = None) -> Path:
    """A new folder in the rig's shared one (RIG_SHARED, mounted on every node as an NFS share
    would be, isolated ones included); where there is none, ``elsewhere`` (given: a folder
    that this machine's jobs see anyway)."""
    root = os.environ.get("RIG_SHARED") if elsewhere is not None else os.environ["RIG_SHARED"]
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root)) if root else elsewhere


def in_shared_folder(name: str) -> Path:
    """A place for a new venv in the rig's shared folder, which isolated nodes see."""
    return new_shared_folder(f"{name}.") / "venv"


@functools.lru_cache(maxsize=None)
def shared_python() -> str:
    """This venv (PyTorch, TensorFlow, submarine-py) installed in the rig's shared folder, for the
    PyTorch and TensorFlow tests' jobs on isolated nodes (see the module's docstring)."""
    return python_without(in_shared_folder("frameworks"), (), for_isolated_nodes=True)


@functools.lru_cache(maxsize=None)
def preinstalled_python() -> str:
    """An interpreter with submarine-py at a path every node has, as where admins install one
    environment on every node (``environment.python``): this one where the nodes see this
    machine's folders; for isolated nodes a venv of submarine-py[yarn] made once per session
    in the rig's shared folder from the operating system's python3, which the nodes have too."""
    if not ISOLATED_NODES:
        return sys.executable
    return str(venv_with_subm(in_shared_folder("preinstalled"), "yarn", base=NODES_PYTHON))


def _kerberized(conf_dir: Optional[str]) -> bool:
    """Whether the cluster of ``conf_dir`` (None: no cluster) authenticates with Kerberos."""
    from submarine_py.backends.yarn.hadoop.kerberos import is_secure

    return bool(conf_dir) and os.path.isdir(conf_dir) and is_secure(conf_dir)


@functools.lru_cache(maxsize=None)
def slim_python() -> str:
    """A venv of submarine-py[yarn,sweep] alone (and the kerberos extra where the tests' cluster
    is Kerberized: subm refuses one without it): what travels with its jobs is a user's
    environment of a few hundred MB, not this one's gigabytes.

    Made once for this checkout and its dependencies, not once per session: its place and
    what it holds stay the same from one CI pass to the next, so its packed archive does too
    (SUBM_PACK_CACHE keeps it) and each pass only uploads it to its own rig. submarine-py is
    installed editable: a change of its code travels beside the archive, as a user's would."""
    extras = "yarn,kerberos,sweep" if _kerberized(CLUSTER_CONF_DIR) else "yarn,sweep"
    key = hashlib.sha256(f"{REPO}\0{sys.version}\0{extras}\0".encode()
                         + (REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    home = Path(tempfile.gettempdir()) / "subm-test-venvs" / f"slim-{key}"
    home.mkdir(parents=True, exist_ok=True)
    python, done = home / "venv" / "bin" / "python", home / "made"
    with open(home / "lock", "w") as lock:  # xdist workers and concurrent passes make it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(home / "venv", ignore_errors=True)  # a session killed while making it
            venv_with_subm(home / "venv", extras)
            done.touch()
    return str(python)
