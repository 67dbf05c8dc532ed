"""Pure logic behind running users' programs unmodified: local ranks under GPU
isolation, who decides the end of a TensorFlow ps job, file destinations and shared_dir,
the files archive YARN ships, and the python wrappers."""
from __future__ import annotations

import os
import subprocess
import tarfile

import pytest
from click.testing import CliRunner

from submarine_py.backends.local import docker as local_docker
from submarine_py.backends.yarn.client import shipping
from submarine_py.cli import main
from submarine_py.errors import SpecError
from submarine_py.frameworks import get_framework
from submarine_py.interpreters import write_wrappers
from submarine_py.plan import make_plan
from submarine_py.executor.workdir import lay_out_files
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

ONE_HOST = {"worker": ["h:1", "h:2", "h:3"]}


def spec(tmp_path, **fields):
    data = {"name": "j", "roles": {"worker": {"command": "python main.py"}}}
    data.update(fields)
    return spec_from_dict(data, base_dir=str(tmp_path))


def problems(tmp_path, **fields):
    with pytest.raises(SpecError) as info:
        spec(tmp_path, **fields)
    return str(info.value)


# -- local ranks ------------------------------------------------------------------------

def test_tasks_with_their_own_gpus_are_local_rank_0_of_1():
    fw = get_framework("pytorch")
    envs = [fw.env(ONE_HOST, "worker", i) for i in range(3)]
    assert [(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [("0", "1")] * 3
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]  # global ranks are unchanged


def test_tasks_without_gpus_on_one_host_are_each_local_rank_0_of_1():
    # Before issue 19 they counted the GPU-less tasks of their host (0 of 2, 1 of 2): one task
    # is one node now, whether or not it has GPUs.
    fw = get_framework("pytorch")
    envs = [fw.env(ONE_HOST, "worker", i) for i in range(3)]
    assert [(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [("0", "1")] * 3


def test_horovod_tasks_on_one_machine_are_hosts_of_their_own():
    fw = get_framework("horovod")
    envs = [fw.env({"worker": ["h:1", "h:2"]}, "worker", i) for i in range(2)]
    assert [(e["HOROVOD_LOCAL_RANK"], e["HOROVOD_LOCAL_SIZE"]) for e in envs] == [("0", "1"), ("0", "1")]
    assert [(e["HOROVOD_CROSS_RANK"], e["HOROVOD_CROSS_SIZE"]) for e in envs] == [("0", "2"), ("1", "2")]


def test_validate_prints_local_rank_0_for_tasks_with_gpus(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: g\nframework: pytorch\nroles:\n  worker: {instances: 2, command: python t.py,"
                   " resources: {gpus: 1}}\n")
    for backend in ("local", "yarn"):
        result = CliRunner().invoke(main, ["validate", str(job), "--backend", backend])
        assert result.exit_code == 0, result.output
        assert result.output.count("\n    LOCAL_RANK=0") == 2 and "LOCAL_RANK=1" not in result.output


# -- TensorFlow ParameterServerStrategy ---------------------------------------------------

def test_with_a_ps_and_a_chief_the_chief_decides_the_end(tmp_path):
    roles = {r: {"command": "python t.py"} for r in ("chief", "worker", "ps")}
    plan = make_plan(spec(tmp_path, framework="tensorflow", roles=roles))
    assert {t.role: t.tracked for t in plan.tasks} == {"chief": True, "worker": False, "ps": False}


def test_without_a_chief_tensorflow_workers_stay_tracked(tmp_path):
    roles = {r: {"command": "python t.py"} for r in ("worker", "ps")}
    plan = make_plan(spec(tmp_path, framework="tensorflow", roles=roles))
    assert {t.role: t.tracked for t in plan.tasks} == {"worker": True, "ps": False}


def test_a_role_can_still_be_tracked_explicitly(tmp_path):
    roles = {"chief": {"command": "c"}, "worker": {"command": "w", "tracked": True}, "ps": {"command": "p"}}
    plan = make_plan(spec(tmp_path, framework="tensorflow", roles=roles))
    assert plan.task("worker", 0).tracked


# -- files and shared_dir -----------------------------------------------------------------

def test_destinations_are_normalized_and_nested_ones_accepted(tmp_path):
    (tmp_path / "in.txt").write_text("x")
    (tmp_path / "lib").mkdir()
    s = spec(tmp_path, files={"./data//in.txt": "in.txt", "lib/": "lib"})
    assert set(s.files) == {"data/in.txt", "lib"}


def test_two_entries_naming_one_destination_are_refused(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert "files.data/./a.txt: names the same destination" in problems(
        tmp_path, files={"data/a.txt": "a.txt", "data/./a.txt": "a.txt"})


def test_a_destination_inside_a_file_is_refused(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert "files.data/a.txt: lies inside 'data', which is a file" in problems(
        tmp_path, files={"data": "a.txt", "data/a.txt": "a.txt"})


@pytest.mark.parametrize("dest", [".subm-bin/python", "subm_executor.py", ".", "a/../../b"])
def test_reserved_or_escaping_destinations_are_refused(tmp_path, dest):
    (tmp_path / "a.txt").write_text("x")
    assert f"files.{dest}" in problems(tmp_path, files={dest: "a.txt"})


@pytest.mark.parametrize("value", ["nfs/jobs", "hdfs:///jobs", "/mnt/../etc", 3])
def test_shared_dir_must_be_an_absolute_path(tmp_path, value):
    assert "shared_dir" in problems(tmp_path, shared_dir=value)


def test_shared_dir_round_trips(tmp_path):
    s = spec(tmp_path, shared_dir="/mnt/nfs/jobs/")
    assert s.shared_dir == "/mnt/nfs/jobs"
    assert spec_from_dict(s.to_dict()).shared_dir == "/mnt/nfs/jobs"


def test_local_docker_tasks_mount_the_shared_dir(tmp_path):
    plan = make_plan(spec(tmp_path, docker={"image": "python:3.11"}))
    argv = local_docker.run_argv(plan.tasks[0], {}, "/wd", "/ex.py", "job", "n", shared_dir="/jobs/x/shared")
    assert "/jobs/x/shared:/jobs/x/shared:rw" in argv


# -- the files archive on YARN ---------------------------------------------------------------

def test_the_archive_lays_files_out_as_real_files_at_their_destinations(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    os.symlink("mod.py", src / "pkg" / "alias.py")  # links inside a folder stay links
    (src / "train.py").write_text("import pkg\n")
    os.symlink(src / "train.py", src / "entry.py")  # a linked source ships what it points to
    (src / "input.txt").write_text("data\n")
    files = {"train.py": str(src / "entry.py"), "pkg": str(src / "pkg"), "data/input.txt": str(src / "input.txt"),
             "big.bin": "hdfs://nn/big.bin"}
    work = tmp_path / "container"
    work.mkdir()
    shipping.pack_files(files, str(work / shipping.FILES_ARCHIVE))
    with tarfile.open(work / shipping.FILES_ARCHIVE) as tar:
        assert "big.bin" not in tar.getnames()
    (work / ".subm-url-0").write_text("remote")  # what YARN localizes for the URL source
    env = shipping.executor_env(files)
    lay_out_files(env, str(work))
    assert not (work / "train.py").is_symlink() and (work / "train.py").read_text() == "import pkg\n"
    assert (work / "pkg" / "mod.py").read_text() == "X = 1\n" and (work / "pkg" / "alias.py").is_symlink()
    assert (work / "data" / "input.txt").read_text() == "data\n"
    assert (work / "big.bin").read_text() == "remote"
    assert not (work / shipping.FILES_ARCHIVE).exists()


def test_an_unreadable_source_is_refused_by_field_when_packing(tmp_path):
    with pytest.raises(SpecError) as info:
        shipping.pack_files({"data/x": str(tmp_path / "gone")}, str(tmp_path / "a.tar.gz"))
    assert "files.data/x" in str(info.value)


# -- python wrappers ---------------------------------------------------------------------------

def test_wrappers_run_the_interpreter_by_the_path_given(tmp_path):
    python = "/usr/bin/env"  # any executable: the wrapper must exec it with the arguments
    write_wrappers(python, str(tmp_path / "bin"))
    for name in ("python", "python3"):
        out = subprocess.run([str(tmp_path / "bin" / name), "echo", "it's", "$HOME"], capture_output=True,
                             text=True, check=True).stdout
        assert out == "it's $HOME\n"


@pytest.mark.parametrize("python", ["/opt/py/bin/python3", "/opt/it's $HOME/bin/python"])
def test_a_yarn_executor_writes_the_wrappers_of_the_interpreter_it_was_started_with(tmp_path, monkeypatch, python):
    """The same wrappers, written by the executor when its first command starts (YARN)."""
    from submarine_py.interpreters import WRAPPER_ENV, YARN_BIN_DIR, wrapper_script
    from submarine_py.executor import workdir

    monkeypatch.setattr(workdir.sys, "executable", python)
    workdir.write_python_wrappers({}, str(tmp_path))
    assert not (tmp_path / YARN_BIN_DIR).exists()  # not asked
    workdir.write_python_wrappers({WRAPPER_ENV: "1"}, str(tmp_path))
    for name in ("python", "python3"):
        wrapper = tmp_path / YARN_BIN_DIR / name
        assert wrapper.read_text() == wrapper_script(python) and os.access(wrapper, os.X_OK)
