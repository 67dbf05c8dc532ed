"""What of the submitting environment travels to YARN's nodes (``backends/yarn/client/travel``), checked
without a cluster: each part is named by what is installed (so an unchanged environment is
recognised without packing it), editable installs travel apart, the request names every part
(``--dry-run`` shows what submission uploads), and the container's launch lines make a working
venv of the unpacked parts. On the isolated rig: tests/test_the_environment_travels_to_nodes_that_have_nothing.py.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from submarine_py.backends.yarn.client.travel import BASE_DIR, CODE_DIR, ENV_DIR, Travel, installed, packing, plan
from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem
from submarine_py.errors import SpecError

skein = pytest.importorskip("skein", reason="skein is not installed (pip install '.[yarn]')")
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
WHERE = ClusterFilesystem(uri="hdfs://nn:8020", namenode_urls=("http://nn:9870",))


def fake_venv(root: Path) -> Path:
    """A venv's shape with one package installed (its METADATA and RECORD)."""
    (root / "pyvenv.cfg").parent.mkdir(parents=True, exist_ok=True)
    (root / "pyvenv.cfg").write_text(f"home = {sys.base_prefix}/bin\n")
    add_dist(root, "numpy", "2.0.0", "numpy/__init__.py,sha256=abc,10\n")
    return root


def site(root: Path) -> Path:
    return root / "lib" / f"python{VERSION}" / "site-packages"


def add_dist(root: Path, name: str, version: str, record: str, direct_url: str = "") -> Path:
    info = site(root) / f"{name}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(record)
    if direct_url:
        (info / "direct_url.json").write_text(direct_url)
    return info


@pytest.mark.unit
def test_the_fingerprint_is_of_what_is_installed_and_changes_with_it(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    first = installed.read(str(venv), sys.base_prefix)
    assert first.kind == "venv" and first.fingerprint == installed.read(str(venv), sys.base_prefix).fingerprint
    add_dist(venv, "numpy", "2.0.0", "numpy/__init__.py,sha256=another-build,10\n")  # same version, other files
    assert installed.read(str(venv), sys.base_prefix).fingerprint != first.fingerprint


@pytest.mark.unit
def test_an_editable_install_travels_apart_and_leaves_the_environments_name_alone(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    before = installed.read(str(venv), sys.base_prefix).fingerprint
    source = tmp_path / "src"
    (source / "mypkg_under_edit").mkdir(parents=True)
    (source / "mypkg_under_edit" / "__init__.py").write_text("VALUE = 1\n")
    (site(venv) / "__editable__.mypkg.pth").write_text(f"{source}\n")
    add_dist(venv, "mypkg", "0.1", "__editable__.mypkg.pth,,\n",
             direct_url=f'{{"url": "file://{source}", "dir_info": {{"editable": true}}}}')
    env = installed.read(str(venv), sys.base_prefix)
    assert env.fingerprint == before
    assert [(e.name, e.paths) for e in env.editables] == [
        ("mypkg", (("mypkg_under_edit", str(source / "mypkg_under_edit")),))]
    code = packing.pack_code(env)
    assert code == packing.pack_code(env)  # the same bytes for the same code: its hash names it
    (source / "mypkg_under_edit" / "__pycache__").mkdir()
    (source / "mypkg_under_edit" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert packing.pack_code(env) == code  # compiled files stay behind
    (source / "mypkg_under_edit" / "__init__.py").write_text("VALUE = 2\n")
    assert packing.pack_code(env) != code
    parts = {p.what: p for p in plan(WHERE, "alice", env).parts}
    assert parts["code"].uri.endswith(f"code-{hashlib.sha256(packing.pack_code(env)).hexdigest()[:20]}.tar.gz")
    assert parts["environment"].uri == f"hdfs://nn:8020/user/alice/.subm/environments/env-venv-{before}.tar"


@pytest.mark.unit
def test_an_interpreter_that_is_no_environment_is_refused_saying_what_to_do():
    with pytest.raises(SpecError) as err:
        installed.read(sys.base_prefix, sys.base_prefix)
    assert "neither a virtualenv nor a conda env" in str(err.value) and "environment.python" in str(err.value)


@pytest.mark.unit
def test_the_request_names_every_part_for_the_am_and_the_tasks_outside_images(tmp_path):
    from submarine_py.backends.yarn.client.request import build_request
    from submarine_py.jobfile import spec_from_dict
    from submarine_py.plan import make_plan

    travel = plan(WHERE, "alice")
    job = spec_from_dict({"name": "t", "roles": {
        "worker": {"instances": 2, "command": "python -c 1"},
        "ps": {"command": "python -c 1", "docker": {"image": "localhost/py:3"}}}}, base_dir=str(tmp_path))
    request = build_request(make_plan(job), ["http://rm:8088"], travel=travel)
    spec = request.app_spec
    assert {p.dir for p in travel.parts if p.am} <= set(spec.master.files)  # the AM: the layers it imports
    assert not {p.dir for p in travel.parts if not p.am} & set(spec.master.files)
    for files in (spec.services["worker"].files,):
        for part in travel.parts:
            # A layer is a file the container unpacks once per node; the rest archives YARN unpacks.
            assert files[part.dir].source == part.uri
            assert files[part.dir].type == ("file" if part.what == "layer" else "archive")
            assert files[part.dir].visibility == "private"  # the node keeps it for later jobs
    assert not any(p.dir in spec.services["ps"].files for p in travel.parts)  # the image brings its own
    assert "PYTHONPATH" not in spec.master.env  # no path of this machine
    assert all(p.uri in request.describe() for p in travel.parts)


@pytest.mark.local
def test_the_launch_lines_make_a_venv_of_the_unpacked_parts(tmp_path):
    """As YARN lays them out in a container: each part a folder (here links to this venv and its
    base installation); the lines give an interpreter that has this venv's packages."""
    env = installed.read()
    travel = Travel(installed=env, parts=tuple(plan(WHERE, "alice", env).parts))
    container = tmp_path / "container"
    container.mkdir()
    (container / ENV_DIR).symlink_to(env.prefix)
    if BASE_DIR in {p.dir for p in travel.parts}:
        (container / BASE_DIR).symlink_to(env.base_prefix)
    if env.editables:
        (container / CODE_DIR).mkdir()
    script = (travel.setup_lines() + '\nexec "$SUBM_PY" -c "import sys, skein, submarine_py; '
              'print(sys.prefix); print(sys.base_prefix)"')
    done = subprocess.run(["bash", "-c", script], cwd=container, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert done.returncode == 0, done.stderr
    prefix, base = done.stdout.split()
    assert prefix == str(container / ".subm-venv")
    assert os.path.realpath(base) == os.path.realpath(env.base_prefix)
