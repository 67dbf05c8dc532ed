"""Malformed job files, generated: whatever the file holds, ``subm validate`` answers
exit 0 (it is valid) or exit 2 with one ``Error: ...`` naming the field, never a traceback.

Hypothesis takes valid job documents and puts a wrong value (wrong type, null, huge or
negative number, float, boolean, unicode, empty string, non-string keys, deep nesting) at
every field and nesting level; other tests feed raw bytes and files that are not job files.
Everything runs in-process through click's ``CliRunner`` (``conftest.cli``), so an
exception the CLI does not turn into ``Error: ...`` fails the test with its traceback.
"""
from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, List, Tuple

import pytest
import yaml

from conftest import cli
from unprivileged import as_unprivileged, reachable_tmp_path  # noqa: F401 (a fixture)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

#: Examples per generated test; SUBM_FUZZ_EXAMPLES=3000 for a long hunt.
EXAMPLES = int(os.environ.get("SUBM_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Documents that mostly validate go all the way to both backends' requests: fewer of them.
FUZZ_SLOW = settings(FUZZ, max_examples=max(1, EXAMPLES // 3))

@pytest.fixture(autouse=True)
def bugs_raise(monkeypatch):
    """The CLI turns an unexpected exception into ``Error: unexpected ...``, exit 1; here it
    propagates instead (SUBM_DEBUG=1), so a crash fails the test with its traceback."""
    monkeypatch.setenv("SUBM_DEBUG", "1")


#: Valid documents, one per framework, with every field set somewhere.
BASES: List[dict] = [
    {"name": "ddp", "framework": "pytorch", "queue": "default",
     "restart": {"policy": "gang", "max_restarts": 2},
     "timeouts": {"gang_seconds": 300, "job_seconds": 3600},
     "roles": {"master": {"instances": 1, "command": "python train.py",
                          "resources": {"memory": "2 GiB", "vcores": 1, "gpus": 0}},
               "worker": {"instances": 2, "processes": 2, "command": ["python", "train.py", "--epochs", 2],
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
     "roles": {"worker": {"instances": 3, "command": "python hvd.py", "processes": "gpus",
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


_plausible_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@st.composite
def retyped(draw) -> Tuple[dict, Tuple]:
    """A valid document with one leaf replaced by a value of the same type: any text for a
    string, any small number for a number (most such documents stay valid)."""
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    leaves = [p for p in _paths(doc) if not isinstance(_get(doc, p), (dict, list))]
    path = draw(st.sampled_from(leaves))
    old = _get(doc, path)
    if isinstance(old, bool):
        new: Any = draw(st.booleans())
    elif isinstance(old, int):
        new = draw(st.integers(min_value=-2, max_value=2000))
    else:
        new = draw(st.one_of(_plausible_text, st.sampled_from(["worker", "ps", "2 GiB", "a b", "UPPER", "x.y"])))
    _set(doc, path, new)
    return doc, path


def _get(doc: Any, path: Tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


#: Every generated example gets a folder here; removed when the tests end (thousands of
#: examples: one /tmp folder each used to be left behind).
_FUZZ_ROOT = Path(tempfile.mkdtemp(prefix="subm-fuzz-"))
atexit.register(shutil.rmtree, _FUZZ_ROOT, True)


def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(dir=_FUZZ_ROOT))
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
    assert "Traceback" not in out + err and "Error: unexpected" not in err, err
    assert out == "", out


def assert_clean(rc: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err
    if rc != 0:
        assert_refused_cleanly(rc, out, err)


#: The backends ``subm validate --backend`` checks for; each has rules of its own.
BACKENDS = ("local", "yarn")


def assert_survives_submission(job: Path, backend: str) -> None:
    """What ``validate --backend BACKEND`` accepts must not fail later, half-submitted: the AM
    re-reads the spec from its ``to_dict`` (without the local files), the backend builds its
    request, every task gets its environment, and the plan prints as JSON."""
    from submarine_py.backends.local import LocalBackend
    from submarine_py.backends.yarn.client.app_spec import YarnOptions, build_application_spec
    from submarine_py.jobfile import load_job
    from submarine_py.output import to_json
    from submarine_py.plan import make_plan

    spec = load_job(str(job))
    again = spec_from_dict(spec.to_dict(), check_files=False)
    assert again == spec, (spec.to_dict(), again.to_dict())
    plan = make_plan(again)
    cluster = plan.placeholder_cluster()
    for task in plan.tasks:
        for env in plan.process_envs(task, cluster, "application_1_1", 0):
            assert all(isinstance(k, str) and isinstance(v, str) and "\x00" not in v for k, v in env.items())
    to_json(plan.to_dict())
    if backend == "local":
        LocalBackend(home=str(job.parent / "home")).request(plan).describe()
        return
    opts = YarnOptions(job_file=str(job.parent / "job.json"),
                       rm_urls=("http://rm:8088",), archive_sha256="ab" * 32)
    pytest.importorskip("skein")
    build_application_spec(plan, opts).to_dict()


@pytest.mark.parametrize("base", BASES, ids=lambda b: b["name"])
def test_the_base_documents_are_valid(base):
    d = _workdir()
    job = d / "job.yaml"
    job.write_text(yaml.safe_dump(base))
    for backend in BACKENDS:
        rc, out, err = cli("validate", "--backend", backend, str(job))
        assert rc == 0, err
        assert_survives_submission(job, backend)


def validate_document(doc: dict) -> List[Tuple[int, str]]:
    """``subm validate --backend B`` of ``doc`` written as a job file, for each backend B: a
    clean exit, and a document it accepts survives submission to B. Returns the exit code
    and stderr of each."""
    job = _workdir() / "job.yaml"
    job.write_text(yaml.safe_dump(doc, allow_unicode=True, width=1 << 16))
    results = []
    for backend in BACKENDS:
        rc, out, err = cli("validate", "--backend", backend, str(job))
        assert_clean(rc, out, err)
        if rc == 0:
            assert_survives_submission(job, backend)
        results.append((rc, err))
    return results


@FUZZ
@given(mutated())
def test_a_wrong_value_anywhere_is_refused_naming_its_field(case):
    doc, path, how = case
    for rc, err in validate_document(doc):
        if rc == 2 and not err.startswith("Error: template: "):
            # The problem is named by where it is (a framework's role rules may name 'roles' instead);
            # text that Jinja2 cannot render is named by its line.
            assert f"{path[0]}" in err or "roles" in err, err


@FUZZ_SLOW
@given(retyped())
def test_a_retyped_value_is_accepted_whole_or_refused_by_name(case):
    doc, path = case
    for rc, err in validate_document(doc):
        if rc != 0 and not err.startswith("Error: template: "):
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
    (b"", "is empty"),
    (b"   \n# only a comment\n", "is empty"),
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
def test_raw_job_files_are_accepted_or_refused_cleanly(data, expected):
    rc, out, err = _validate_bytes(data)
    assert_clean(rc, out, err)
    if expected:
        assert rc == 2 and expected in err, err


def test_a_directory_is_not_a_job_file(tmp_path):
    rc, out, err = cli("validate", str(tmp_path))
    assert_refused_cleanly(rc, out, err)
    assert str(tmp_path) in err


def test_a_missing_job_file_is_refused_cleanly(tmp_path):
    rc, out, err = cli("validate", str(tmp_path / "nope.yaml"))
    assert_refused_cleanly(rc, out, err)
    assert "nope.yaml" in err


def test_an_unreadable_job_file_is_refused_cleanly(reachable_tmp_path):
    job = reachable_tmp_path / "job.yaml"
    job.write_text("name: x\nroles: {w: {command: x}}\n")
    assert cli("validate", str(job))[0] == 0  # valid while readable (and what validate imports is imported)
    job.chmod(0)

    def validate_as_a_user_who_may_not_read_it() -> Tuple[bool, Tuple[int, str, str]]:
        return os.path.exists(job), cli("validate", str(job))

    seen, (rc, out, err) = as_unprivileged(validate_as_a_user_who_may_not_read_it)
    assert seen  # its folder is open to that user: only the file's own mode stops the reading
    assert_refused_cleanly(rc, out, err)
    assert f"cannot read {job}: Permission denied" in err


def test_a_fifo_is_not_waited_on(tmp_path):
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    rc, out, err = cli("validate", str(fifo))
    assert_refused_cleanly(rc, out, err)
    assert "not a regular file" in err


# -- what a valid-looking job may still not ask for -------------------------------------------

def _doc(**over: Any) -> dict:
    doc: dict = {"name": "t", "roles": {"worker": {"command": "true"}}}
    doc.update(over)
    return doc


def _roles(framework: str, **roles: Any) -> dict:
    return _doc(framework=framework, roles={r: {"instances": n, "command": "true"} for r, n in roles.items()})


def validate_doc(doc: Any, *options: str) -> Tuple[int, str, str]:
    """``subm validate [OPTIONS] JOB`` of ``doc``; ``--backend yarn`` adds YARN's rules."""
    d = _workdir()
    job = d / "job.yaml"
    job.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    return cli("validate", *options, str(job))


@pytest.mark.parametrize("doc, expected", [
    (_roles("pytorch", master=2, worker=1), "roles.master.instances: PyTorch has one rank 0: at most 1, got 2"),
    (_roles("pytorch", chief=1, master=1), "give 'master' or 'chief', not both"),
    (_roles("pytorch", tensorboard=1), "PyTorch needs a 'master', 'chief' or 'worker' role"),
    (_roles("pytorch", Worker=1), "roles.Worker: pytorch knows the roles"),
    (_roles("tensorflow", chief=2, worker=1), "roles.chief.instances: TensorFlow has one chief"),
    (_roles("tensorflow", evaluator=1), "TensorFlow needs a 'chief' or a 'worker' role"),
    (_roles("tensorflow", ps=1), "TensorFlow needs a 'chief' or a 'worker' role"),
    (_roles("mxnet", server=1, worker=2), "roles.scheduler: MXNet needs exactly one scheduler, got none"),
    (_roles("mxnet", scheduler=2, server=1, worker=1), "roles.scheduler: MXNet needs exactly one scheduler, got 2"),
    (_roles("mxnet", scheduler=1, worker=1), "roles.server: MXNet needs at least one server"),
    (_roles("mxnet", scheduler=1, server=1), "roles.worker: MXNet needs at least one worker"),
    (_roles("horovod", tensorboard=1), "roles.worker: Horovod needs a 'worker' role"),
    (_roles("horovod", worker=0), "every role has instances: 0"),
    (_roles("custom", worker=1001), "roles.worker.instances: expected at most 1000, got 1001"),
    (_doc(roles={"worker": {"command": "true"}, "WORKER": {"command": "true"}}),
     "roles.WORKER: differs from role 'worker' only in case"),
])
def test_framework_role_rules_name_the_role(doc, expected):
    rc, out, err = validate_doc(doc)
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


@pytest.mark.parametrize("timeouts, expected", [
    ({"gang_seconds": 0}, "timeouts.gang_seconds: expected a whole number >= 1, got 0"),
    ({"gang_seconds": 86401}, "timeouts.gang_seconds: expected at most 86400"),
    ({"gang_seconds": 1.5}, "timeouts.gang_seconds: expected a whole number >= 1, got 1.5"),
    ({"job_seconds": 0}, "timeouts.job_seconds: expected a whole number >= 1, got 0"),
    ({"job_seconds": 10 ** 12}, "timeouts.job_seconds: expected at most 31622400"),
    ({"job_seconds": -5}, "timeouts.job_seconds: expected a whole number >= 1"),
    ({"gang": 5}, "timeouts.gang: unknown field"),
])
def test_timeouts_are_bounded(timeouts, expected):
    rc, out, err = validate_doc(_doc(timeouts=timeouts))
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


@pytest.mark.parametrize("memory, mib", [("2GB", 2048), ("2 gib", 2048), ("1.5 GiB", 1536), (".5 GiB", 512),
                                         ("2048", 2048), (512, 512), ("+1 GiB", 1024)])
def test_memory_sizes_that_are_accepted(memory, mib):
    from submarine_py.units import parse_memory

    assert parse_memory(memory) == mib
    rc, out, err = validate_doc(_doc(roles={"w": {"command": "true", "resources": {"memory": memory}}}))
    assert rc == 0, err


@pytest.mark.parametrize("memory, expected", [
    (0, "must be at least 1 MiB, got 0"),
    ("0", "must be at least 1 MiB"),
    ("-1 GiB", "must be at least 1 MiB, got '-1 GiB'"),
    ("1e9", "expected a size like '512 MiB' or '2 GiB', got '1e9' (a plain number is MiB)"),
    (2147483648, "a plain number is MiB, not bytes"),
    ("2 GiB 512 MiB", "expected a size like"),
    ("", "expected a size like"),
    (True, "got True"),
])
def test_memory_sizes_that_are_refused(memory, expected):
    rc, out, err = validate_doc(_doc(roles={"w": {"command": "true", "resources": {"memory": memory}}}))
    assert_refused_cleanly(rc, out, err)
    assert "roles.w.resources.memory: " in err and expected in err, err


@pytest.mark.parametrize("resources, expected", [
    ({"vcores": 0}, "roles.w.resources.vcores: expected a whole number >= 1, got 0"),
    ({"vcores": 1025}, "roles.w.resources.vcores: expected at most 1024"),
    ({"vcores": 2.0}, "roles.w.resources.vcores: expected a whole number >= 1, got 2.0"),
    ({"gpus": -1}, "roles.w.resources.gpus: expected a whole number >= 0, got -1"),
    ({"gpus": 2 ** 64}, "roles.w.resources.gpus: expected at most 64"),
    ({"gpus": "1"}, "roles.w.resources.gpus: expected a whole number >= 0, got '1'"),
])
def test_vcores_and_gpus_are_bounded(resources, expected):
    rc, out, err = validate_doc(_doc(roles={"w": {"command": "true", "resources": resources}}))
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


def test_two_list_sources_with_one_base_name_are_refused(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "train.py").write_text("")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_doc(files=["a/train.py", "b/train.py"])))
    rc, out, err = cli("validate", str(job))
    assert_refused_cleanly(rc, out, err)
    assert "files[1]: 'b/train.py' would also be copied to 'train.py' (as files[0])" in err, err


@pytest.mark.parametrize("files, expected", [
    ([None], "files[0]: expected a source path with a base name, got None"),
    (["/"], "files[0]: expected a source path with a base name"),
    ([""], "files[0]: expected a source path"),
    ([["a"]], "files[0]: expected a source path"),
    ({"a": None}, "files.a: expected a source path, got None"),
    ({"a": " "}, "files.a: expected a source path"),
    ({1: "x"}, "files.1: the destination must be a relative path"),
])
def test_malformed_files_name_the_entry(files, expected):
    rc, out, err = validate_doc(_doc(files=files))
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


@pytest.mark.parametrize("tags, expected", [
    (["a,b"], "tags[0]: expected printable ASCII without commas"),
    (["ok", ""], "tags[1]: expected printable ASCII without commas"),
    (["ok", None], "tags[1]: expected a string, got None"),
    (["ok", "OK"], "tags[1]: repeats the tag 'ok'"),
    (["é"], "tags[0]: expected printable ASCII"),
    (["x" * 101], "tags[0]: expected printable ASCII without commas, 1 to 100 characters"),
    ([f"t{i}" for i in range(10)], "tags: expected at most 9 tags"),
    ({"a": 1}, "tags: expected a list of strings"),
])
def test_tags_are_checked_one_by_one(tags, expected):
    rc, out, err = validate_doc(_doc(tags=tags), "--backend", "yarn")
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


def test_tags_are_kept_lower_case_as_yarn_does():

    assert spec_from_dict(_doc(tags=["Nightly", "team-A", 2026])).tags == ("nightly", "team-a", "2026")


@pytest.mark.parametrize("queue", ["my queue", " default", "a..b", ".a", "a.", "", "q\tx", "a,b"])
def test_queue_names_with_spaces_or_empty_parts_are_refused(queue):
    rc, out, err = validate_doc(_doc(queue=queue), "--backend", "yarn")
    assert_refused_cleanly(rc, out, err)
    assert "queue: " in err, err


@pytest.mark.parametrize("queue", ["default", "root.team-a.dev", "gpu_queue", "user@x"])
def test_queue_names_and_paths_are_accepted(queue):
    rc, out, err = validate_doc(_doc(queue=queue), "--backend", "yarn")
    assert rc == 0, err


@pytest.mark.parametrize("label, ok", [("gpu", True), ("gpu-v100_x", True), ("gpu && ssd", False),
                                       ("-x", False), ("a b", False)])
def test_node_labels_are_accepted_or_refused_by_name(label, ok):
    rc, out, err = validate_doc(_doc(roles={"w": {"command": "true", "node_label": label}}), "--backend", "yarn")
    if ok:
        assert rc == 0, err
    else:
        assert_refused_cleanly(rc, out, err)
        assert "roles.w.node_label: expected one YARN node label" in err


@pytest.mark.parametrize("doc, expected", [
    (_doc(roles={"w": {"command": "echo a\x00b"}}), "roles.w.command: must not contain a NUL character"),
    (_doc(roles={"w": {"command": "true", "env": {"A": "x\x00"}}}), "roles.w.env.A: must not contain a NUL"),
    (_doc(roles={1: {"command": "true"}}), "roles.1: role names are a letter"),
    (_doc(roles={"w": {"command": "true", 5: 1}}), "roles.w.5: field names must be strings, got 5"),
    ({"name": "t", "roles": {"w": {"command": "true"}}, None: 1}, "None: field names must be strings"),
])
def test_odd_values_are_named(doc, expected):
    rc, out, err = validate_doc(doc)
    assert_refused_cleanly(rc, out, err)
    assert expected in err, err


# -- the other commands' arguments -------------------------------------------------------------

def _ok_job() -> Path:
    d = _workdir()
    job = d / "job.yaml"
    job.write_text("name: t\nroles:\n  w: {command: 'echo {{ word | default(\"hi\") }}'}\n")
    return job


@pytest.mark.parametrize("command", ["status", "kill", "logs"])
@pytest.mark.parametrize("app_id", ["nope", "", "local_", "local_../../etc", "local_a/b", "application_abc",
                                    "application_1_", "application_1_1_1", "-x", "APPLICATION_1_1"])
def test_a_malformed_job_id_is_bad_input(command, app_id):
    rc, out, err = cli(command, "--", app_id)
    assert_refused_cleanly(rc, out, err)
    assert "is not a job id" in err


@pytest.mark.parametrize("command", ["status", "kill", "logs"])
def test_an_unknown_local_job_is_not_found(command, subm_home):
    rc, out, err = cli(command, "local_20260101-120000_ab12")
    assert rc == 1 and err.startswith("Error: no local job local_20260101-120000_ab12"), err
    assert not (subm_home / "local" / "local_20260101-120000_ab12").exists()


@pytest.mark.parametrize("args, expected", [
    (["logs", "local_20260101-120000_ab12", "--index", "-1"], "--index"),
    (["logs", "local_20260101-120000_ab12", "--index", "one"], "--index"),
    (["logs", "local_20260101-120000_ab12", "--role", "../x"], "--role: expected a role name"),
    (["list", "--backend", "nope"], "--backend"),
    (["list", "--output", "xml"], "--output"),
    (["cluster", "--backend", "nope"], "--backend"),
    (["status"], "APP_ID"),
    (["history", "--since", "soon"], "--since"),
    (["history", "--state", "LOST"], "--state"),
    (["init", "--framework", "caffe"], "--framework"),
    (["nope"], "No such command"),
])
def test_bad_arguments_exit_2(args, expected):
    rc, out, err = cli(*args)
    assert rc == 2, (rc, out, err)
    assert err.count("Error:") == 1 and expected in err, err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("args, expected", [
    (["--set", "word"], "--set: expected key=value"),
    (["--set", "=x"], "--set: expected key=value"),
    (["--set", "1x=2"], "--set: expected key=value with an identifier"),
    (["--set", "wrod=hey"], "--set: job.yaml does not use the variable 'wrod'; it reads word"),
    (["--output", "yaml"], "--output"),
])
def test_bad_validate_and_run_arguments_exit_2_before_anything_runs(args, expected, subm_home):
    job = _ok_job()
    for command in (["validate"], ["run", "--backend", "local"], ["run", "--dry-run"]):
        rc, out, err = cli(*command, str(job), *args)
        assert rc == 2 and err.count("Error:") == 1 and expected in err, (command, err)
    assert not (subm_home / "local").exists() or not list((subm_home / "local").iterdir())


def test_run_of_a_missing_file_submits_nothing(tmp_path, subm_home):
    rc, out, err = cli("run", "--backend", "local", str(tmp_path / "missing.yaml"))
    assert_refused_cleanly(rc, out, err)
    assert "cannot read" in err and "missing.yaml" in err
    assert not (subm_home / "local").exists() or not list((subm_home / "local").iterdir())


def test_an_unknown_backend_in_the_environment_is_bad_input():
    job = _ok_job()
    for args in (["run", str(job)], ["list"], ["cluster"]):
        rc, out, err = cli(*args, env={"SUBM_BACKEND": "nope"})
        assert rc == 2 and "Error:" in err and "'nope' is not one of 'local', 'yarn'" in err, err
    rc, out, err = cli("list", env={"SUBM_OUTPUT": "xml"})
    assert rc == 2 and "'xml' is not one of 'text', 'json'" in err, err


def test_a_used_set_variable_is_accepted():
    rc, out, err = cli("validate", str(_ok_job()), "--set", "word=bye")
    assert rc == 0 and "echo bye" in out, err


def test_a_huge_since_duration_means_every_job():
    rc, out, err = cli("history", "--no-collect", "--since", "99999999999999d")
    assert rc == 0 and "Traceback" not in err and "Error" not in err, err


def test_an_unused_set_variable_is_named_once_without_a_template_prefix():
    rc, out, err = cli("validate", str(_ok_job()), "--set", "epochs=3")
    assert rc == 2 and err.startswith("Error: --set: job.yaml does not use the variable 'epochs'; it reads word"), err
