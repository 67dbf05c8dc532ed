"""The executor package runs inside any image that has ``python3``: nothing in it may import
anything outside the standard library (or a module of its own package)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from submarine_py.executor import bundle
from submarine_py.executor import main as executor

PACKAGE = Path(executor.__file__).parent
MODULES = sorted(p for p in PACKAGE.glob("*.py"))
OWN = {p.stem for p in MODULES}


def imported_names(path: Path):
    """Every top-level module name ``path`` imports, wherever in the file (functions too)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


@pytest.mark.unit
@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_module_of_the_executor_package_imports_only_the_standard_library(path):
    foreign = {n for n in imported_names(path)
               if n not in sys.stdlib_module_names and n not in OWN and n != "__future__"}
    assert not foreign, f"{path.name} imports {sorted(foreign)}, which a user's image may lack"


@pytest.mark.unit
def test_the_executor_stays_standard_library_only():
    """Importing it (as a container runs it, its siblings beside it) pulls in nothing else."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(executor.__file__)!r}); import main; "
            "print(sorted(m.split('.')[0] for m in sys.modules if not m.startswith('_')))")
    mods = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert all(m in sys.stdlib_module_names or m == "main" for m in eval(mods)), mods


@pytest.mark.unit
def test_the_bundle_yarn_ships_runs_in_an_interpreter_without_site_packages(tmp_path):
    """The one file YARN ships (the executor with its modules embedded), run with ``-S -I``:
    no site-packages, no user paths, so the submarine_py package itself is out of reach."""
    (tmp_path / "subm_executor.py").write_text(bundle.bundle_source())
    env = {"PATH": os.environ.get("PATH", ""), "SUBM_AM_URL": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-S", "-I", "subm_executor.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "cannot start" in out.stderr and "Traceback" not in out.stderr
