"""`subm init`: a job file that validates and runs as written, for every framework.

The pytorch and tensorflow job files run ``python train.py``; init writes a small one
beside the job (keeping one that is there). Names come from --name or the folder.
"""
import importlib.util
import os

import pytest
from click.testing import CliRunner

from conftest import run_json, subm
from submarine_py.cli import main
from submarine_py.scaffold import name_from_directory

FRAMEWORKS = ["pytorch", "tensorflow", "custom"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty folder to run init in (tmp_path also holds the test's SUBM_HOME)."""
    folder = tmp_path / "proj"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def init(*args: str):
    result = CliRunner().invoke(main, ["init", *args])
    assert "Traceback" not in result.output
    return result


@pytest.mark.unit
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_init_writes_a_job_that_validates_and_its_program(project, framework):
    result = init("--framework", framework)
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(main, ["validate", "job.yaml"]).exit_code == 0
    if framework == "custom":  # runs `echo`: nothing to write beside it
        assert sorted(os.listdir(project)) == ["job.yaml"]
    else:
        assert "train.py: train.py" in (project / "job.yaml").read_text()
        compile((project / "train.py").read_text(), "train.py", "exec")


@pytest.mark.unit
def test_init_keeps_an_existing_train_py_unless_forced(project):
    (project / "train.py").write_text("print('mine')\n")
    result = init()
    assert result.exit_code == 0 and "Kept the existing train.py" in result.output
    assert (project / "train.py").read_text() == "print('mine')\n"
    result = init("--force")
    assert result.exit_code == 0 and (project / "train.py").read_text() != "print('mine')\n"


@pytest.mark.unit
@pytest.mark.parametrize("folder, name", [("My Project", "my-project"), ("2024_runs", "job-2024-runs"),
                                          ("résumé!!", "r-sum"), ("___", "my-job"), ("x" * 80, "x" * 63)])
def test_the_default_name_is_made_valid_from_the_folder(tmp_path, monkeypatch, folder, name):
    (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / folder)
    result = init("--framework", "custom")
    assert result.exit_code == 0, result.output
    assert f"\nname: {name}\n" in (tmp_path / folder / "job.yaml").read_text()
    assert CliRunner().invoke(main, ["validate", "job.yaml"]).exit_code == 0
    assert name_from_directory(folder) == name


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["bad name!", "9lives", "-x", "a" * 64, ""])
def test_an_invalid_name_is_refused_and_nothing_written(project, bad):
    result = init("--name", bad)
    assert result.exit_code == 2
    assert result.output.startswith("Error: --name: ") and "not a valid job name" in result.output
    assert os.listdir(project) == []


@pytest.mark.unit
def test_a_missing_or_wrong_directory_is_a_clean_error(tmp_path):
    result = init("--path", str(tmp_path / "missing" / "dir" / "job.yaml"))
    assert result.exit_code == 2 and result.output.startswith("Error: --path: ")
    assert "does not exist" in result.output
    (tmp_path / "file").write_text("")
    result = init("--path", str(tmp_path / "file" / "job.yaml"))
    assert result.exit_code == 2 and "is not a directory" in result.output
    result = init("--path", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in result.output


def _run_init(tmp_path, ids, framework, *sets):
    folder = tmp_path / "My Project"
    folder.mkdir()
    rc, _, err = subm("init", "--framework", framework, cwd=folder)
    assert rc == 0 and "Traceback" not in err, err
    rc, report, err = run_json("run", "job.yaml", "--backend", "local", *sets, cwd=folder, timeout=300)
    ids.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", (report, err)
    assert report["name"] == "my-project"
    return report


def _stdout(task):
    with open(task["log"]) as f:
        return f.read()


@pytest.mark.local
def test_custom_init_runs_as_written(tmp_path, no_leftovers):
    report = _run_init(tmp_path, no_leftovers, "custom")
    assert [t["state"] for t in report["tasks"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert "task worker:1 of 2" in _stdout(report["tasks"][1])


@pytest.mark.local
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_pytorch_init_runs_as_written(tmp_path, no_leftovers):
    report = _run_init(tmp_path, no_leftovers, "pytorch")
    out = _stdout(report["tasks"][0])
    assert "epoch 2/2" in out and "(2 ranks)" in out, out


@pytest.mark.local
@pytest.mark.tensorflow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_tensorflow_init_runs_as_written(tmp_path, no_leftovers):
    report = _run_init(tmp_path, no_leftovers, "tensorflow", "--set", "epochs=2")
    for task in report["tasks"]:
        assert f"{task['role']}:0 epoch 2/2" in _stdout(task)
