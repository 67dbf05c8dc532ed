"""The AM-executor protocol's names are spelled once (issue 31): ``submarine_py/executor/protocol.py``
holds its environment variables and the AM endpoint's paths; the executor (standard library only,
protocol.py included) and the AM, the plan and the backends import them from there."""
from __future__ import annotations

import ast
import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

import submarine_py
from submarine_py.executor import protocol

pytestmark = pytest.mark.unit

PACKAGE = Path(submarine_py.__file__).parent
PROTOCOL = Path(protocol.__file__)
NAMES = {k: v for k, v in vars(protocol).items() if k.isupper()}
PATHS = {k: v for k, v in NAMES.items() if k.startswith("PATH_")}
VARIABLES = {k: v for k, v in NAMES.items() if not k.startswith("PATH_")}


def strings(path: Path):
    """The string constants of ``path``'s code, docstrings left out."""
    tree = ast.parse(path.read_text(), str(path))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_protocol_py_imports_nothing_and_names_each_thing_by_its_rule():
    tree = ast.parse(PROTOCOL.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert PATHS and VARIABLES
    for name, value in VARIABLES.items():  # PARAM_PREFIX: "SUBM_PARAM_" + a parameter's name
        assert value == "SUBM_" + (name[:-len("PREFIX")] if name.endswith("_PREFIX") else name), name
    for name, value in PATHS.items():
        assert value == "/v1/" + name[len("PATH_"):].lower(), name
    assert len(set(NAMES.values())) == len(NAMES)


def test_the_protocols_names_and_paths_are_spelled_nowhere_else_in_the_package():
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PROTOCOL or PACKAGE / "templates" in path.parents:  # templates: users' programs
            continue
        for line, text in strings(path):
            if text in VARIABLES.values() or re.search(r"(?<!/ws)/v1/[a-z]", text):
                spelled.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r}")
    assert not spelled, "spell these through submarine_py/executor/protocol.py:\n" + "\n".join(spelled)


class StubAM:
    """What the AM's HTTP endpoint calls on an AM, recording which call each path reached."""

    url, job_id, token = "http://am", "job-1", "secret"

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if not name.startswith(("on_", "heard_from", "next_instructions", "kill", "connection_dropped")):
            raise AttributeError(name)

        def call(*args, **kw):
            self.calls.append(name)
            return {"index": 0} if name == "on_register" else []

        return call

    @property
    def containers(self):  # what the backend serves other AMs (YARN: the line's verdicts)
        return SimpleNamespace(answer=lambda path, query: {"verdict": None} if path == protocol.PATH_LINE else None)

    def report(self):
        self.calls.append("report")
        return SimpleNamespace(to_dict=lambda: {"state": "RUNNING"})


def test_every_path_the_am_serves_is_in_the_protocol_and_every_one_is_served():
    from submarine_py.am.server import serve

    am = StubAM()
    server, port = serve(am, host="127.0.0.1")
    try:
        def ask(path, method):
            data = json.dumps({"executor": "ex-1"}).encode() if method == "POST" else None
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                         headers={"Authorization": "Bearer secret"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        gets = {protocol.PATH_AM, protocol.PATH_STATUS, protocol.PATH_NEXT, protocol.PATH_LINE}
        for path in PATHS.values():
            method = "GET" if path in gets else "POST"
            query = "?executor=ex-1&after=0&wait=0" if path == protocol.PATH_NEXT else ""
            assert ask(path + query, method) == 200, path
        assert ask("/v1/nothing", "POST") == 404 and ask("/v1/nothing", "GET") == 404
    finally:
        server.shutdown()
        server.server_close()
    assert {"on_register", "on_started", "on_exit", "on_metric", "on_gpu", "on_goodbye", "kill",
            "next_instructions", "report"} <= set(am.calls)


def test_the_shipped_executor_reads_the_protocol_beside_it(tmp_path):
    """As a container gets it (``subm_*.py`` side by side, ``python -S``), each module that
    needs the protocol finds it: the one copy, not one of its own."""
    import subprocess

    from submarine_py.executor import main as executor
    import shutil

    for name, path in executor.shipped_files().items():
        shutil.copy(path, tmp_path / name)
    probe = ("import runpy; g = runpy.run_path('subm_executor.py', run_name='probe'); "
             "p = g['protocol']; print(all(g['_sibling'](m).protocol is p for m in "
             "('am_client', 'workdir', 'trial_metric')), p.PATH_REGISTER)")
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", protocol.PATH_REGISTER]
