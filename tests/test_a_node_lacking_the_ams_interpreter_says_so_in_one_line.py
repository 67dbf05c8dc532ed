"""The lines that start the ApplicationMaster on a YARN node (``interpreters.am_start_check``)
say in one line which node lacks what, and what to set, before the AM would fail with "exit
code 127"; the YARN backend quotes that line as the job's diagnostics (``attempts.node_could_not_start``).
On a rig whose node cannot see the submitting venv: tests/test_the_projects_rig_is_a_hadoop_whose_nodes_share_nothing.py.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from submarine_py.backends.yarn import attempts
from submarine_py.interpreters import am_start_check, assign

pytestmark = pytest.mark.local


def start(python: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"{assign(python)}\n{am_start_check()}\necho STARTED"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "NM_HOST": "nm7.example.com"})


def test_a_node_without_the_interpreter_names_itself_the_path_and_what_to_set():
    run = start("/home/me/venv/bin/python3")
    assert run.returncode == 127 and "STARTED" not in run.stdout
    [line] = run.stderr.splitlines()
    assert line.startswith("[subm] node nm7.example.com: no /home/me/venv/bin/python3 there"), line
    assert "set environment.python" in line


def test_an_interpreter_without_the_ams_packages_is_named_too():
    run = start("/usr/bin/python3")  # the OS's, without skein (and without this package)
    assert run.returncode == 127, run.stdout
    assert "/usr/bin/python3 lacks skein or submarine_py" in run.stderr


def test_the_interpreter_that_submits_starts_the_am():
    assert start(sys.executable).stdout.strip() == "STARTED"


@pytest.mark.parametrize("python", ["/tmp/x/$(touch {mark})/python3", "/tmp/x/`touch {mark}`/python3",
                                    "/tmp/it's \"{mark}\" $HOME/python3"])
def test_a_path_holding_shell_syntax_is_named_as_written_and_runs_nothing(tmp_path, python):
    mark = tmp_path / "ran"
    path = python.format(mark=mark)
    run = start(path)
    assert not mark.exists(), "the interpreter's path ran as shell"
    assert run.returncode == 127
    [line] = run.stderr.splitlines()
    assert line.startswith(f"[subm] node nm7.example.com: no {path} there"), line


def test_the_backend_quotes_the_latest_attempts_line(monkeypatch):
    class RM:  # the latest attempt's AM container, as ResourceManager.am_container gives it
        def am_container(self, app_id):
            return {"id": "2", "nodeHttpAddress": "n2:8042", "containerId": "c2"}

    logs = {("n2:8042", "c2"): b"something else\n[subm] node n2: no /venv/bin/python3 there, ...\n"}
    monkeypatch.setattr(attempts, "node_log", lambda node, cid, name, timeout=0: logs.get((node, cid)))
    assert attempts.node_could_not_start(RM(), "app") == "node n2: no /venv/bin/python3 there, ..."
    logs.clear()
    assert attempts.node_could_not_start(RM(), "app") is None
