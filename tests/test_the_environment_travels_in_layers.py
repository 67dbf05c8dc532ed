"""A venv travels in layers (``backends/yarn/client/travel/layers.py``, ``farm.py``): each big
distribution in an archive of its own, the others together, and after a small change only what
changed, above the rest packed last. In the container the layers become one site-packages of
links. Checked without a cluster: the cut, the names, and a container laid out as YARN unpacks
the archives (``tar -xf`` in a folder each). On the isolated rig:
tests/test_the_environment_travels_to_nodes_that_have_nothing.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from submarine_py.backends.yarn.client.travel import ENV_DIR, Travel, installed, kept, layers, packing, plan
from submarine_py.backends.yarn.client.travel.layers import BIG_BYTES, Dist, layering, owned_entries
from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
WHERE = ClusterFilesystem(uri="hdfs://nn:8020", namenode_urls=("http://nn:9870",))
TAG = "python3.11 x86_64"


def dist(name: str, version: str = "1.0", size: int = 1000, entries=None) -> Dist:
    return Dist(name, f"{name} {version} sha-{name}-{version}", size, tuple(entries or [name, f"{name}-{version}.dist-info"]))


# -- the cut ------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_distribution_owns_its_folders_and_only_its_part_of_a_shared_one():
    owned = owned_entries({
        "torch": ["torch/__init__.py", "torch/lib/libtorch.so", "torch-2.13.0.dist-info/RECORD", "../../../bin/torchrun"],
        "nvidia-cudnn": ["nvidia/cudnn/lib/libcudnn.so", "nvidia-cudnn.dist-info/RECORD"],
        "nvidia-nccl": ["nvidia/nccl/lib/libnccl.so", "nvidia-nccl.dist-info/RECORD"],
        "six": ["six.py", "__pycache__/six.cpython-311.pyc", "six-1.16.dist-info/RECORD"],
        "typing-extensions": ["typing_extensions.py", "__pycache__/typing_extensions.cpython-311.pyc"],
    })
    assert owned["torch"] == ("torch", "torch-2.13.0.dist-info")  # bin/ travels with the venv's own archive
    assert owned["nvidia-cudnn"] == ("nvidia-cudnn.dist-info", "nvidia/cudnn")
    assert owned["six"] == ("__pycache__/six.cpython-311.pyc", "six-1.16.dist-info", "six.py")


@pytest.mark.unit
def test_big_distributions_travel_alone_and_the_rest_together_named_by_what_they_hold():
    torch, cudnn = dist("torch", "2.13.0", 2 * BIG_BYTES), dist("nvidia-cudnn-cu13", "9", BIG_BYTES)
    small = [dist("numpy", size=BIG_BYTES // 2), dist("six")]
    cut = layering([*small, cudnn, torch], TAG)
    assert [(lay.kind, [d.name for d in lay.dists]) for lay in cut.layers] == [
        ("site-rest", ["numpy", "six"]), ("site-nvidia_cudnn_cu13", ["nvidia-cudnn-cu13"]), ("site-torch", ["torch"])]
    assert cut.hidden == ()
    again = layering([torch, *small, cudnn], TAG)
    assert [lay.name for lay in again.layers] == [lay.name for lay in cut.layers]  # the order installed is no matter
    assert layering([torch], "python3.12 x86_64").layers[0].name != cut.layers[2].name  # another interpreter


@pytest.mark.unit
def test_after_a_small_upgrade_only_what_changed_travels_above_the_last_rest():
    torch = dist("torch", "2.13.0", 2 * BIG_BYTES)
    before = [dist("numpy", size=BIG_BYTES // 2), dist("six", "1.16"), dist("idna", "3.6")]
    rest = layering([torch, *before], TAG).layers[0]
    after = [dist("numpy", size=BIG_BYTES // 2), dist("six", "1.17"), dist("attrs", "24")]  # idna removed
    cut = layering([torch, *after], TAG, previous_rest=rest)
    assert [lay.kind for lay in cut.layers] == ["site-delta", "site-rest", "site-torch"]
    assert cut.layers[1] == rest  # the same archive, reused
    assert [d.name for d in cut.layers[0].dists] == ["attrs", "six"]  # only what changed ships
    # The rest's copies of what changed or went are not linked: six 1.16 and idna are gone.
    assert cut.hidden_in(rest) == ("idna", "idna-3.6.dist-info", "six", "six-1.16.dist-info")
    # Unchanged since: the rest as it was, nothing above it.
    assert [lay.kind for lay in layering([torch, *before], TAG, previous_rest=rest).layers] == ["site-rest", "site-torch"]


@pytest.mark.unit
def test_a_change_beyond_a_quarter_of_the_rest_packs_the_rest_anew():
    before = [dist("numpy", size=1000), dist("scipy", size=1000)]
    rest = layering(before, TAG).layers[0]
    cut = layering([dist("numpy", size=1000), dist("scipy", "2.0", size=1000)], TAG, previous_rest=rest)
    assert [lay.kind for lay in cut.layers] == ["site-rest"] and cut.layers[0] != rest and cut.hidden == ()


@pytest.mark.unit
def test_the_last_rest_layer_is_remembered_only_while_its_archive_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(kept.PACK_CACHE, str(tmp_path))
    rest = layering([dist("six")], TAG).layers[0]
    kept.remember_rest("/home/ada/venv", layers.to_record(rest))
    assert kept.previous_rest("/home/ada/venv") is None  # its archive is not here
    (tmp_path / rest.name).write_bytes(b"tar")
    assert layers.from_record(kept.previous_rest("/home/ada/venv")) == rest
    assert kept.previous_rest("/home/ada/other-venv") is None


# -- in the container ----------------------------------------------------------------------

def make_venv(root: Path, packages: dict) -> Path:
    """A venv of this interpreter with ``packages`` (name -> (version, {path: text}, size))."""
    subprocess.run([sys.base_prefix + f"/bin/python{VERSION}", "-m", "venv", "--without-pip", str(root)],
                   check=True, timeout=120)
    for name, (version, files) in packages.items():
        install(site(root), name, version, files)
    (root / "bin" / "hello").write_text("#!/usr/bin/env python\nprint('hello')\n")
    (root / "bin" / "hello").chmod(0o755)
    return root


def site(venv: Path) -> Path:
    return venv / "lib" / f"python{VERSION}" / "site-packages"


def install(site: Path, name: str, version: str, files: dict) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = []
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
        record.append(f"{path},sha256=x,{len(text)}")
    record.append(f"{info.name}/METADATA,,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def container_of(travel: Travel, where: Path, yarn_cache: Path) -> Path:
    """The container's working directory as YARN lays it out: a layer a link to its file in
    YARN's node cache (an entry per file, kept for the next container), each other archive
    unpacked in its folder."""
    box = where / "container"
    box.mkdir(parents=True)
    for part in travel.parts:  # packed as submission packs them: kept on this machine
        with kept.archive(os.path.basename(part.uri), lambda out: travel._pack(part, out, lambda n: None)) as (
                archive, _):
            if part.what == "layer":
                entry = yarn_cache / os.path.basename(part.uri) / os.path.basename(part.uri)
                if not entry.exists():
                    entry.parent.mkdir(parents=True)
                    shutil.copy(archive, entry)
                (box / part.dir).symlink_to(entry)
            else:
                (box / part.dir).mkdir()
                subprocess.run(["tar", "-xf", archive, "-C", str(box / part.dir)], check=True, timeout=60)
    return box


def python_in(box: Path, travel: Travel, code: str) -> str:
    done = subprocess.run(["bash", "-c", travel.setup_lines() + f'\nexec "$SUBM_PY" -c {code!r}'], cwd=box,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.local
def test_the_layers_unpacked_apart_make_one_site_packages_in_the_container(tmp_path, monkeypatch):
    pytest.importorskip("venv_pack", reason="packing a venv needs venv-pack (pip install '.[yarn]')")
    monkeypatch.setenv(kept.PACK_CACHE, str(tmp_path / "kept"))
    monkeypatch.setattr(layers, "BIG_BYTES", 1000)  # "big": bigpkg's and nvidia-a's 1000 bytes
    venv = make_venv(tmp_path / "venv", {
        "bigpkg": ("1.0", {"bigpkg/__init__.py": "WHO = 'big'\n" + "#" * 1000}),
        "nvidia-a": ("1.0", {"nvidia/a/__init__.py": "A = 1\n" + "#" * 1000}),
        "nvidia-b": ("1.0", {"nvidia/b/__init__.py": "B = 2\n"}),
        "filler": ("1.0", {"filler.py": "#" * 500}),  # the rest is more than a small change
        "six": ("1.16", {"six.py": "V = '1.16'\n"}),
        "idna": ("3.6", {"idna/__init__.py": ""}),
    })
    env = installed.read(str(venv), sys.base_prefix)
    first = plan(WHERE, "ada", env)
    assert sorted(p.label for p in first.parts if p.what == "layer") == ["bigpkg", "nvidia_a", "rest"]
    yarn_cache = tmp_path / "node" / "filecache"
    box = container_of(first, tmp_path / "first", yarn_cache)
    out = python_in(box, first, "import bigpkg, nvidia.a, nvidia.b, six, idna, sys; "
                    "print(bigpkg.WHO, nvidia.a.A, nvidia.b.B, six.V, sys.prefix)")
    assert out.split() == ["big", "1", "2", "1.16", str(box / ".subm-venv")]
    assert (box / ENV_DIR / "bin" / "hello").read_text().startswith("#!/usr/bin/env python")
    # Each layer unpacked once on the node, beside YARN's copy, which is emptied: its size once.
    for part in (p for p in first.parts if p.what == "layer"):
        entry = yarn_cache / os.path.basename(part.uri)
        assert (entry / "unpacked").is_dir() and (entry / os.path.basename(part.uri)).stat().st_size == 0
    again = container_of(first, tmp_path / "again", yarn_cache)  # the next container links them
    assert python_in(again, first, "import bigpkg; print(bigpkg.WHO)").split() == ["big"]

    # Without submarine-py here, what the AM imports is unknown: it gets every layer. With it,
    # the small ones and those of what it requires (bench: 0.8 of 7.4 GB for a torch venv).
    assert first.for_am().parts == first.parts
    install(site(venv), "submarine-py", "1.0", {"submarine_py/__init__.py": ""})
    (site(venv) / "submarine-py-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: submarine-py\nVersion: 1.0\nRequires-Dist: six\n"
        "Requires-Dist: bigpkg ; extra == 'torch'\n")
    with_it = plan(WHERE, "ada", installed.read(str(venv), sys.base_prefix))
    assert sorted(p.label for p in with_it.for_am().parts if p.what == "layer") == ["delta", "rest"]
    assert "bigpkg" not in str(with_it.for_am().resources())
    for gone in ("submarine_py", "submarine-py-1.0.dist-info"):
        shutil.rmtree(site(venv) / gone)

    # six upgraded, idna removed: a delta of six 1.17 above the same rest; the old ones unseen.
    for gone in ("six.py", "six-1.16.dist-info", "idna", "idna-3.6.dist-info"):
        subprocess.run(["rm", "-rf", str(site(venv) / gone)], check=True)
    install(site(venv), "six", "1.17", {"six.py": "V = '1.17'\n"})
    second = plan(WHERE, "ada", installed.read(str(venv), sys.base_prefix))
    assert [p.label for p in second.parts if p.what == "layer"] == ["delta", "rest", "bigpkg", "nvidia_a"]
    assert {p.uri for p in first.parts if p.label != "rest"}.isdisjoint({second.parts[0].uri})
    assert second.parts[1].uri == next(p.uri for p in first.parts if p.label == "rest")
    box = container_of(second, tmp_path / "second", yarn_cache)
    out = python_in(box, second, "import importlib.metadata as m, importlib.util as u, six; "
                    "print(six.V, m.version('six'), u.find_spec('idna'))")
    assert out.split() == ["1.17", "1.17", "None"]
    # What the delta ships: six alone (and the venv's small own archive, as after any change).
    delta = tmp_path / "kept" / os.path.basename(second.parts[0].uri)
    assert subprocess.run(["tar", "-tzf", str(delta)], capture_output=True, text=True).stdout.split() == [
        "six-1.17.dist-info/", "six-1.17.dist-info/METADATA", "six-1.17.dist-info/RECORD", "six.py"]


@pytest.mark.unit
def test_packing_counts_every_byte_it_packs(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "data.bin").write_bytes(b"x" * 3_000_000)
    (site / "pkg" / "link").symlink_to("data.bin")
    env = installed.Installed(prefix=str(tmp_path / "venv"), kind="venv", version="3.11", base_prefix="/usr",
                              ship_base=False, shared_libpython=False, editables=(), fingerprint="f",
                              base_fingerprint="", dists=(dist("pkg", size=3_000_000, entries=["pkg"]),),
                              site="lib/python3.11/site-packages")
    counted = []
    packing.pack_layer(env, layering(env.dists, TAG).layers[0], str(tmp_path / "l.tar.gz"), counted.append)
    assert sum(counted) == 3_000_000
    listed = subprocess.run(["tar", "-tzvf", str(tmp_path / "l.tar.gz")], capture_output=True, text=True).stdout
    assert "pkg/link -> data.bin" in listed
