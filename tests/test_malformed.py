"""Malformed job files, generated: whatever the file holds, ``subm validate`` answers
exit 0 (it is valid) or exit 2 with one ``Error: ...`` naming the field, never a traceback.

Hypothesis takes valid job documents and puts a wrong value (wrong type, null, huge or
negative number, float, boolean, unicode, empty string, non-string keys, deep nesting) at
every field and nesting level; other tests feed raw bytes and files that are not job files.
Everything runs in-process through click's ``CliRunner`` (``conftest.cli``), so an
exception the CLI does not turn into ``Error: ...`` fails the test with its traceback.
"""
from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any, List, Tuple

import pytest
import yaml

from conftest import cli

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.unit

FUZZ = settings(max_examples=int(os.environ.get("SUBM_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

#: Valid documents, one per framework, with every field set somewhere.
BASES: List[dict] = [
    {"name": "ddp", "framework": "pytorch", "queue": "default",
     "restart": {"policy": "gang", "max_restarts": 2},
     "timeouts": {"gang_seconds": 300, "job_seconds": 3600},
     "roles": {"master": {"instances": 1, "command": "python train.py",
                          "resources": {"memory": "2 GiB", "vcores": 1, "gpus": 0}},
               "worker": {"instances": 2, "command": ["python", "train.py", "--epochs", 2],
                          "resources": {"memory": 512, "vcores": 2, "gpus": 0},
                          "env": {"OMP_NUM_THREADS": "1", "DEBUG": True}, "tracked": True,
                          "node_label": "cpu"}},
     "files": {"train.py": "train.py"}, "tags": ["team-a", "nightly"],
     "environment": {"python": "/usr/bin/python3"}},
    {"name": "tf", "framework": "tensorflow",
     "docker": {"image": "localhost/tf:2", "mounts": ["/data:/data:ro"], "network": "host"},
     "roles": {"chief": {"command": "python tf.py"},
               "worker": {"instances": 2, "command": "python tf.py",
                          "docker": {"image": "localhost/tf:gpu", "network": "bridge"}},
               "ps": {"instances": 1, "command": "python tf.py"},
               "evaluator": {"command": "python tf.py"}},
     "files": ["train.py"]},
    {"name": "hvd", "framework": "horovod", "restart": {"policy": "task"},
     "roles": {"worker": {"instances": 3, "command": "python hvd.py",
                          "resources": {"memory": "1 GiB", "gpus": 1}}},
     "environment": {"archive": "env.tar.gz"}},
    {"name": "mx", "framework": "mxnet",
     "roles": {"scheduler": {"command": "python mx.py"}, "server": {"instances": 2, "command": "python mx.py"},
               "worker": {"instances": 2, "command": "python mx.py"}}},
    {"name": "plain", "roles": {"main": {"command": "echo hi"}}},
]

_leaf = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([0, -1, 1001, 2 ** 31, 2 ** 63, 10 ** 30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "\t", "0", "-1", "1.5", "1e9", "yes", "null", "~", "2 GiB", "-1 GiB",
                     "worker", "a,b", "with space", "é", "名前", "\u202e", "\x00", "x" * 5000,
                     "../../etc/passwd", "/abs", "{{", "*", "&a", "!!python/object"]),
    st.text(max_size=30),
)
#: Keys that are not strings (YAML allows them).
_odd_key = st.one_of(st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.booleans(), st.none(),
                     st.floats(allow_nan=False), st.text(max_size=10))


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


garbage = st.one_of(
    _leaf,
    st.lists(_leaf, max_size=4),
    st.dictionaries(_odd_key, _leaf, max_size=4),
    st.builds(_nested, st.integers(min_value=1, max_value=300)),
    st.recursive(_leaf, lambda c: st.one_of(st.lists(c, max_size=3),
                                            st.dictionaries(_odd_key, c, max_size=3)), max_leaves=8),
)


def _paths(doc: Any, prefix: Tuple = ()) -> List[Tuple]:
    """Every path to a value in ``doc`` (mapping keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: Any, path: Tuple, value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@st.composite
def mutated(draw) -> Tuple[dict, Tuple, str]:
    """(document, the path that was changed, how)."""
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    path = draw(st.sampled_from(_paths(doc)))
    how = draw(st.sampled_from(["replace", "replace", "replace", "add-key", "delete"]))
    if how == "replace":
        _set(doc, path, draw(garbage))
    elif how == "delete":
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    else:  # a stray key next to the chosen one (or inside it when it is a mapping)
        target = doc
        for key in path[:-1]:
            target = target[key]
        inner = target[path[-1]]
        if isinstance(inner, dict):
            target, path = inner, path + ("?",)
        if isinstance(target, dict):
            key = draw(_odd_key.filter(lambda k: k not in target))
            target[key] = draw(garbage)
            path = path[:-1] + (key,)
        else:
            target.append(draw(garbage))
    return doc, path, how


def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="subm-fuzz-"))
    (d / "train.py").write_text("print('train')\n")
    (d / "env.tar.gz").write_bytes(b"")
    return d


def _validate_bytes(data: bytes) -> Tuple[int, str, str]:
    d = _workdir()
    job = d / "job.yaml"
    job.write_bytes(data)
    return cli("validate", str(job))


def assert_refused_cleanly(rc: int, out: str, err: str) -> None:
    """Exit 2, one ``Error: ...`` message on stderr, nothing on stdout, no traceback."""
    assert rc == 2, f"exit {rc}\nstdout:\n{out}\nstderr:\n{err}"
    assert err.startswith("Error: ") and err.count("Error:") == 1, err
    assert "Traceback" not in out + err, err
    assert out == "", out


def assert_clean(rc: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err
    if rc != 0:
        assert_refused_cleanly(rc, out, err)


def _dotted(path: Tuple) -> str:
    return ".".join(str(k) for k in path)


@pytest.mark.parametrize("base", BASES, ids=lambda b: b["name"])
def test_the_base_documents_are_valid(base):
    d = _workdir()
    job = d / "job.yaml"
    job.write_text(yaml.safe_dump(base))
    rc, out, err = cli("validate", str(job))
    assert rc == 0, err


@FUZZ
@given(mutated())
def test_a_wrong_value_anywhere_is_refused_naming_its_field(case):
    doc, path, how = case
    d = _workdir()
    job = d / "job.yaml"
    job.write_text(yaml.safe_dump(doc, allow_unicode=True, width=1 << 16))
    rc, out, err = cli("validate", str(job))
    assert_clean(rc, out, err)
    if rc == 2 and not err.startswith("Error: template: "):
        # The problem is named by where it is (a framework's role rules may name 'roles' instead);
        # text that Jinja2 cannot render is named by its line.
        assert f"{path[0]}" in err or "roles" in err, err


@FUZZ
@given(st.binary(max_size=400))
def test_binary_garbage_is_refused_cleanly(data):
    assert_clean(*_validate_bytes(data))


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("{}[]:-,&*!|>'\"%@`#?\t\n ab1{%}")), max_size=200))
def test_yaml_and_jinja_punctuation_is_refused_cleanly(text):
    assert_clean(*_validate_bytes(text.encode()))


@pytest.mark.parametrize("data, expected", [
    (b"", "empty"),
    (b"   \n# only a comment\n", "empty"),
    (b"\xef\xbb\xbfname: bom\nroles: {w: {command: x}}\n", None),  # a UTF-8 BOM is fine
    (b"name: x\nroles:\n\tw: {command: x}\n", "tab"),
    (b"name: \xff\xfe\n", "UTF-8"),
    (b"\x00\x01\x02binary", None),
    (b"name: x\nroles: {w: {command: x}}\n" + b"#" * (2 << 20), "limited"),
    (b"[" * 5000 + b"]" * 5000, None),
    (b"{{ " + b"(" * 3000 + b"1" + b")" * 3000 + b" }}", None),
    (b"a: &a [1]\nb: *a\nname: x\nroles: {w: {command: x}}\n", "unknown field"),
    (b"name: x\nroles: {w: {command: x}}\nname: y\n", "duplicate"),
    (b"name: x\nroles: {w: &r {command: x}, v: *r}\n", None),  # anchors for roles are fine
    (b"--- {name: a, roles: {w: {command: x}}}\n--- {name: b}\n", "one YAML document"),
    (b"name: [unclosed\n", "not valid YAML"),
    (b"? [a, b]\n: 1\nname: x\nroles: {w: {command: x}}\n", "YAML"),
    (b"name: x\nroles: {1: {command: x}}\n", "roles.1"),
    (b"name: x\nroles: {w: {command: x, resources: {gpus: 99999999999999999999999}}}\n", "gpus"),
    (b"name: x\nroles: {w: {command: x, resources: {memory: .inf}}}\n", "memory"),
    (b"name: x\nroles: {w: {command: x, resources: {memory: .nan}}}\n", "memory"),
    (b"name: !!binary aGVsbG8=\nroles: {w: {command: x}}\n", "name"),
    (b"name: 2026-01-01\nroles: {w: {command: x}}\n", "name"),
    (b"name: x\nroles: {w: {command: x}}\ntimeouts: {gang_seconds: 2026-01-01}\n", "timeouts.gang_seconds"),
    (b"name: x\nroles: {w: {command: x, env: {A: 2026-01-01 10:00:00}}}\n", None),
    (b"name: x\nroles: !!set {w}\n", "roles"),
    (b"name: x\nroles: {w: {command: !!binary aGVsbG8=}}\n", "roles.w.command"),
], ids=lambda v: repr(v)[:40] if isinstance(v, bytes) else str(v))
def test_raw_job_files(data, expected):
    rc, out, err = _validate_bytes(data)
    assert_clean(rc, out, err)
    if expected:
        assert rc == 2 and expected in err, err


def test_a_directory_is_not_a_job_file(tmp_path):
    rc, out, err = cli("validate", str(tmp_path))
    assert_refused_cleanly(rc, out, err)
    assert str(tmp_path) in err


def test_a_missing_job_file(tmp_path):
    rc, out, err = cli("validate", str(tmp_path / "nope.yaml"))
    assert_refused_cleanly(rc, out, err)
    assert "nope.yaml" in err


def test_an_unreadable_job_file(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nroles: {w: {command: x}}\n")
    job.chmod(0)
    try:
        if os.access(job, os.R_OK):
            pytest.skip("running as root: every file is readable")
        rc, out, err = cli("validate", str(job))
        assert_refused_cleanly(rc, out, err)
        assert "cannot read" in err
    finally:
        job.chmod(0o644)


def test_a_fifo_is_not_waited_on(tmp_path):
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    rc, out, err = cli("validate", str(fifo))
    assert_refused_cleanly(rc, out, err)
    assert "not a regular file" in err
