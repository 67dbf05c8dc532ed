"""The executor as YARN ships it: one file with its modules, compiled once per node and job.

Each probe runs the bundle as its own interpreter does in a container (``python -S``, nothing
beside it), with ``LOCAL_DIRS`` naming the application's folder on the node as YARN sets it.
"""
from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from submarine_py.executor.bundle import bundle_source

PROBE = ("import runpy, sys; g = runpy.run_path('subm_executor.py', run_name='probe'); "
         "print(' '.join(sorted(sys.modules))); "
         "print(g['am_client'].__name__, g['_sibling']('envcache').__name__, g['_sibling']('nvml').__name__); "
         "print(getattr(g['_sibling']('nvml'), 'MARK', 'compiled'))")


def run_bundle(folder: Path, local_dirs: Optional[Path]) -> List[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_DIRS"}
    if local_dirs is not None:
        env["LOCAL_DIRS"] = f"{local_dirs},/elsewhere/not/used"
    return subprocess.run([sys.executable, "-S", "-c", PROBE], cwd=folder, env=env, capture_output=True,
                          text=True, check=True).stdout.splitlines()


@pytest.fixture
def container(tmp_path: Path) -> Path:
    folder = tmp_path / "container"
    folder.mkdir()
    (folder / "subm_executor.py").write_text(bundle_source())
    return folder


def kept_code(app_dir: Path) -> List[Path]:
    return sorted(app_dir.glob("subm-code-*"))


@pytest.mark.local
def test_the_bundle_runs_alone_without_urllib_or_subprocess_before_it_registers(container):
    sys_modules, siblings, _ = run_bundle(container, None)
    assert not {"urllib.request", "http.client", "subprocess", "ssl", "email"} & set(sys_modules.split())
    assert siblings == "subm_am_client subm_envcache subm_nvml"


@pytest.mark.local
def test_the_first_container_on_a_node_compiles_and_the_next_ones_load_its_code(container, tmp_path):
    app_dir = tmp_path / "appcache" / "application_1_0001"
    app_dir.mkdir(parents=True)
    assert run_bundle(container, app_dir)[2] == "compiled"
    [kept] = kept_code(app_dir)
    assert f"-{sys.implementation.cache_tag}-" in kept.name  # another Python keeps its own
    # Proof that the next container takes the kept code instead of compiling: mark it.
    with open(kept, "rb") as f:
        code = marshal.load(f)
    code["nvml"] = compile("MARK = 'kept'", "nvml", "exec")
    kept.write_bytes(marshal.dumps(code))
    assert run_bundle(container, app_dir)[2] == "kept"


@pytest.mark.local
def test_a_damaged_copy_is_compiled_again_and_replaced(container, tmp_path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    run_bundle(container, app_dir)
    [kept] = kept_code(app_dir)
    kept.write_bytes(b"not marshal data")
    assert run_bundle(container, app_dir)[1] == "subm_am_client subm_envcache subm_nvml"
    with open(kept, "rb") as f:
        assert set(marshal.load(f)) == {"executor", "protocol", "proctree", "processes", "stderr", "nvml", "am_client", "workdir",
                                            "trial_metric", "envcache"}


@pytest.mark.local
def test_without_a_writable_application_folder_the_bundle_still_runs(container, tmp_path):
    assert run_bundle(container, tmp_path / "missing")[1] == "subm_am_client subm_envcache subm_nvml"
    assert not (tmp_path / "missing").exists()


@pytest.mark.unit
def test_another_executor_version_never_takes_this_ones_code():
    """The kept code's name carries a digest of the sources."""
    def bundle_id(source: str) -> str:
        return next(line for line in source.splitlines() if line.startswith("SUBM_BUNDLE_ID"))

    assert bundle_id(bundle_source()) == bundle_id(bundle_source())
    assert bundle_id(bundle_source()) != bundle_id(bundle_source(modules=("proctree", "processes", "nvml", "am_client")))
