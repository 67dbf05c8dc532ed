"""The job spec: Jinja2 rendering, safe YAML, validation and the round trip to dicts."""
import subprocess
import sys
import textwrap

import pytest

from submarine_py.errors import SpecError
from submarine_py.jobfile import load_job, parse_set_options, render_template
from submarine_py.jobfile.loader import load_yaml
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

# A commented job file as people write them, which must work as written.
MNIST_DDP_SPEC = """\
name: mnist-ddp
framework: pytorch            # pytorch | tensorflow | horovod | mxnet | custom
queue: default
restart:
  policy: gang                # gang: stop and restart every task together | task | never
  max_restarts: 2
timeouts:
  gang_seconds: 300           # every task up and registered within this, or the job fails, saying who is missing
roles:
  worker:
    instances: 2
    resources: {memory: 2 GiB, vcores: 1, gpus: 0}
    command: python train.py --epochs {{ epochs | default(2) }}
    env: {OMP_NUM_THREADS: "1"}
files:
  train.py: train.py          # destination in each task's working directory: source (relative to the spec)
"""


@pytest.fixture
def mnist_ddp_job(tmp_path):
    (tmp_path / "train.py").write_text("print('train')\n")
    job = tmp_path / "job.yaml"
    job.write_text(MNIST_DDP_SPEC)
    return job


# -- a commented job file ---------------------------------------------------------

def test_a_commented_job_file_loads_as_written(mnist_ddp_job, tmp_path):
    spec = load_job(str(mnist_ddp_job))
    assert spec.name == "mnist-ddp" and spec.framework == "pytorch" and spec.queue == "default"
    assert (spec.restart.policy, spec.restart.max_restarts) == ("gang", 2)
    assert spec.timeouts.gang_seconds == 300
    worker = spec.roles["worker"]
    assert worker.instances == 2
    assert (worker.resources.memory_mb, worker.resources.vcores, worker.resources.gpus) == (2048, 1, 0)
    assert worker.command == "python train.py --epochs 2"
    assert worker.env == {"OMP_NUM_THREADS": "1"}
    # Sources resolve against the spec's directory, not the current one.
    assert spec.files == {"train.py": str(tmp_path / "train.py")}


def test_set_overrides_a_default(mnist_ddp_job):
    spec = load_job(str(mnist_ddp_job), parse_set_options(["epochs=7"]))
    assert spec.roles["worker"].command == "python train.py --epochs 7"


# -- --set and rendering -------------------------------------------------------------

def test_set_values_are_typed_like_yaml_scalars():
    values = parse_set_options(["epochs=3", "lr=0.1", "debug=true", "name=mnist", "empty=",
                                "url=http://x:1/a=b", "list=[1, 2]", "nothing=null"])
    assert values == {"epochs": 3, "lr": 0.1, "debug": True, "name": "mnist", "empty": "",
                      # only the first '=' splits; structures and null stay the text given
                      "url": "http://x:1/a=b", "list": "[1, 2]", "nothing": "null"}
    assert isinstance(values["epochs"], int) and isinstance(values["lr"], float)
    assert values["debug"] is True


def test_set_numbers_render_as_written_but_compute_as_numbers():
    values = parse_set_options(["run=0123", "version=1.10", "n=1_000"])
    # YAML 1.1 reads 0123 as octal 83 and 1.10 as 1.1; the job file must still see what was typed.
    assert render_template("{{ run }} {{ version }} {{ n }}", values) == "0123 1.10 1_000"
    assert render_template("{{ run + 0 }} {{ version * 2 }} {{ n // 10 }}", values) == "83 2.2 100"


def test_typed_set_values_reach_the_template():
    text = "{{ (epochs * 2) }} {{ 'yes' if debug else 'no' }} {{ lr + 1 }}"
    assert render_template(text, parse_set_options(["epochs=3", "debug=false", "lr=0.5"])) == "6 no 1.5"


@pytest.mark.parametrize("bad", ["noequals", "=3", "1x=2", "a b=3"])
def test_set_refuses_malformed_pairs(bad):
    with pytest.raises(SpecError) as info:
        parse_set_options([bad])
    assert info.value.problems[0][0] == "--set" and repr(bad) in str(info.value)


def test_undefined_variable_is_an_error_that_names_it_and_suggests_a_default():
    with pytest.raises(SpecError) as info:
        render_template("command: python train.py --epochs {{ epochs }}\n", {}, name="job.yaml")
    message = str(info.value)
    assert "'epochs' is undefined" in message
    assert "job.yaml" in message
    assert "--set" in message and "default(" in message


def test_default_filter_fills_in_undefined_variables():
    assert render_template("{{ epochs | default(2) }} {{ name | default('x') }}", {}) == "2 x"
    assert render_template("{{ epochs | default(2) }}", {"epochs": 5}) == "5"


def test_templates_can_read_the_environment(monkeypatch):
    monkeypatch.setenv("SUBM_TEST_VALUE", "from-env")
    monkeypatch.delenv("SUBM_TEST_UNSET", raising=False)
    assert render_template("{{ env.SUBM_TEST_VALUE }}", {}) == "from-env"
    assert render_template("{{ env('SUBM_TEST_UNSET', 'fallback') }}", {}) == "fallback"
    assert render_template("{{ env('SUBM_TEST_VALUE') }}", {}) == "from-env"
    with pytest.raises(SpecError, match="env.SUBM_TEST_UNSET"):
        render_template("{{ env.SUBM_TEST_UNSET }}", {})


@pytest.mark.parametrize("template, message", [
    ("{{ ''.__class__.__mro__ }}", "unsafe"),
    ("{% for x in range(10**9) %}{% endfor %}", "MAX_RANGE"),
    ("{{ 'a' * 10**10 }}", "repetition"),
    ("{{ 7 ** 10000000 }}", "power"),
    ("{{ 1 / 0 }}", "division by zero"),
    ("{% if %}", "line 1"),
])
def test_templates_are_sandboxed_and_bounded(template, message):
    with pytest.raises(SpecError) as info:
        render_template(template, {})
    assert info.value.problems[0][0] == "template" and message in str(info.value)


# -- YAML safety ------------------------------------------------------------------------

def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_any_of_it_is_built_with_a_clear_message(tmp_path):
    """9 levels of 9 aliases expand to ~387 million nodes; the loader refuses from the document's
    nodes as written (a few dozen), before it constructs a single Python object of them.

    Run in a child process with a hard timeout, so a regression cannot hang the suite; the
    refusal's speed is bench/latencies.py's."""
    job = tmp_path / "bomb.yaml"
    job.write_text("name: bomb\nroles: {worker: {command: 'true'}}\n" + _alias_bomb())
    code = textwrap.dedent(f"""
        import yaml
        from submarine_py.errors import SpecError
        from submarine_py.jobfile import load_job
        built = []
        construct = yaml.constructor.BaseConstructor.construct_object
        def counted(self, node, deep=False):
            built.append(node)
            return construct(self, node, deep)
        yaml.constructor.BaseConstructor.construct_object = counted
        try:
            load_job({str(job)!r})
        except SpecError as exc:
            print(len(built)); print(exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    objects_built, message = proc.stdout.split("\n", 1)
    assert "expands to more than 100000 nodes (an alias bomb?); refusing to load it" in message
    assert objects_built == "0"


def test_a_recursive_alias_is_refused():
    with pytest.raises(SpecError, match="refers to itself"):
        load_yaml("a: &a [1, *a]\n")


def test_ordinary_aliases_still_work():
    assert load_yaml("base: &b {memory: 1 GiB}\nother: *b\n") == {
        "base": {"memory": "1 GiB"}, "other": {"memory": "1 GiB"}}


@pytest.mark.parametrize("doc", [
    "!!python/object/apply:os.system ['touch /tmp/subm-pwned']\n",
    "name: !!python/object:submarine_py.jobfile.model.JobSpec {name: x}\n",
    "name: !!python/name:os.system\n",
])
def test_yaml_object_tags_are_refused(doc):
    with pytest.raises(SpecError) as info:
        load_yaml(doc)
    assert "could not determine a constructor" in str(info.value)
    assert "not valid YAML" in str(info.value)


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(SpecError):
        load_yaml("[" * 100_000 + "]" * 100_000)


def test_an_oversized_job_file_is_refused(tmp_path):
    job = tmp_path / "big.yaml"
    job.write_text("# " + "x" * (2 << 20) + "\n")
    with pytest.raises(SpecError, match="limited to"):
        load_job(str(job))


# -- the model ----------------------------------------------------------------------------

FULL_SPEC = """\
name: everything
framework: tensorflow
queue: research
restart: {policy: task, max_restarts: 3}
timeouts: {gang_seconds: 60, job_seconds: 3600}
docker:
  image: registry.example.com:5000/team/tf:2.21
  mounts: [/data:/data, /scratch:/scratch:rw]
  network: bridge
environment: {python: /opt/conda/bin/python}
tags: [nightly, team-a]
acls: {view: [bob, "group:research"], modify: [carol]}
kerberos: {principal: alice@EXAMPLE.COM, keytab: alice.keytab}
roles:
  chief:
    resources: {memory: 4 GiB, vcores: 2}
    command: ["python", "train.py", "--job", "chief's"]
  worker:
    instances: 3
    resources: {memory: 1536, gpus: 1}
    command: python train.py
    env: {OMP_NUM_THREADS: 1, VERBOSE: true, NAME: x}
    node_label: gpu
  ps:
    instances: 2
    command: python train.py
    docker: {image: python:3.11-slim}
  evaluator:
    command: python eval.py
    tracked: false
  tensorboard:
    instances: 0
    command: tensorboard --logdir .
files:
  train.py: train.py
  lib/: lib
"""


@pytest.fixture
def full_job(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("")
    job = tmp_path / "job.yaml"
    job.write_text(FULL_SPEC)
    return job


def test_every_field_is_read(full_job, tmp_path):
    spec = load_job(str(full_job))
    assert spec.timeouts.job_seconds == 3600 and spec.tags == ("nightly", "team-a")
    assert spec.environment.python == "/opt/conda/bin/python"
    chief, worker, ps = spec.roles["chief"], spec.roles["worker"], spec.roles["ps"]
    assert chief.command == "python train.py --job 'chief'\"'\"'s'"  # a list is shell-quoted
    assert worker.resources.memory_mb == 1536 and worker.resources.gpus == 1
    assert worker.env == {"OMP_NUM_THREADS": "1", "VERBOSE": "true", "NAME": "x"}
    assert worker.node_label == "gpu"
    # Roles inherit the job's image; a mount without a mode is read-only.
    assert worker.docker.image == "registry.example.com:5000/team/tf:2.21"
    assert worker.docker.mounts == ("/data:/data:ro", "/scratch:/scratch:rw")
    assert ps.docker.image == "python:3.11-slim" and ps.docker.network == "bridge"
    assert spec.roles["evaluator"].tracked is False
    assert "tensorboard" not in spec.roles  # instances: 0 leaves a role out
    assert spec.files == {"train.py": str(tmp_path / "train.py"), "lib": str(tmp_path / "lib")}  # normalized
    assert spec.acls.view == ("bob", "group:research") and spec.acls.groups("view") == ("research",)
    assert spec.acls.modify == ("carol",)
    assert spec.kerberos.principal == "alice@EXAMPLE.COM"
    assert spec.kerberos.keytab == str(tmp_path / "alice.keytab")  # beside the job file


def test_round_trip_yaml_to_object_to_dict_to_object(full_job, tmp_path):
    spec = load_job(str(full_job))
    again = spec_from_dict(spec.to_dict(), base_dir="/somewhere/else")
    assert again == spec
    assert again.to_dict() == spec.to_dict()


def test_a_commented_job_file_round_trips(mnist_ddp_job):
    spec = load_job(str(mnist_ddp_job))
    assert spec_from_dict(spec.to_dict()) == spec


def test_to_dict_survives_json_and_yaml(full_job):
    import json

    import yaml

    spec = load_job(str(full_job))
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec_from_dict(load_yaml(yaml.safe_dump(spec.to_dict()))) == spec


def test_spec_errors_are_value_errors_carrying_every_problem():
    with pytest.raises(ValueError) as info:
        spec_from_dict({"name": "x", "roles": {"worker": {"command": "c", "instances": -1,
                                                             "resources": {"gpus": "two"}}}})
    assert isinstance(info.value, SpecError)
    assert dict(info.value.problems) == {
        "roles.worker.instances": "expected a whole number >= 0, got -1",
        "roles.worker.resources.gpus": "expected a whole number >= 0, got 'two'",
    }


def test_omitted_fields_take_their_defaults():
    spec = spec_from_dict({"name": "x", "roles": {"worker": {"command": "true"}}})
    assert spec.framework == "custom" and spec.queue == "default"
    assert (spec.restart.policy, spec.restart.max_restarts) == ("gang", 0)
    assert spec.timeouts.gang_seconds == 300 and spec.timeouts.job_seconds is None
    assert spec.timeouts.stop_grace_seconds == 3.0
    worker = spec.roles["worker"]
    assert worker.instances == 1
    assert (worker.resources.memory_mb, worker.resources.vcores, worker.resources.gpus) == (2048, 1, 0)
    assert worker.docker is None and worker.env == {}


def test_the_spec_is_frozen():
    spec = spec_from_dict({"name": "x", "roles": {"worker": {"command": "true"}}})
    with pytest.raises(Exception):
        spec.name = "y"  # type: ignore[misc]


@pytest.mark.parametrize("grace", [0, 0.5, 30, 3600])
def test_the_stop_grace_is_any_number_of_seconds_and_round_trips(grace):
    spec = spec_from_dict({"name": "x", "timeouts": {"stop_grace_seconds": grace},
                              "roles": {"worker": {"command": "true"}}})
    assert spec.timeouts.stop_grace_seconds == grace
    assert spec_from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize("grace", [-1, 3601, "3s", True, [3], float("nan")])
def test_a_bad_stop_grace_is_refused_naming_the_field(grace):
    with pytest.raises(SpecError) as err:
        spec_from_dict({"name": "x", "timeouts": {"stop_grace_seconds": grace},
                           "roles": {"worker": {"command": "true"}}})
    assert "timeouts.stop_grace_seconds: expected a number of seconds from 0 to 3600" in str(err.value)


@pytest.mark.parametrize("lost", [1, 2.5, 30, 600])
def test_the_heartbeat_silence_before_an_executor_is_lost_is_a_setting_and_round_trips(lost):
    spec = spec_from_dict({"name": "x", "timeouts": {"lost_after_seconds": lost},
                              "roles": {"worker": {"command": "true"}}})
    assert spec.timeouts.lost_after_seconds == lost
    assert spec_from_dict(spec.to_dict()) == spec
    assert spec_from_dict({"name": "x", "roles": {"worker": {"command": "true"}}}).timeouts.lost_after_seconds == 6


@pytest.mark.parametrize("lost", [0, 0.5, -3, 601, "6s", True, float("nan")])
def test_a_bad_heartbeat_silence_is_refused_naming_the_field(lost):
    with pytest.raises(SpecError) as err:
        spec_from_dict({"name": "x", "timeouts": {"lost_after_seconds": lost},
                           "roles": {"worker": {"command": "true"}}})
    assert "timeouts.lost_after_seconds: expected a number of seconds from 1 to 600" in str(err.value)


def test_the_environment_cache_dir_must_be_absolute_and_go_with_an_archive(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    ok = spec_from_dict({"name": "x", "roles": {"worker": {"command": "true"}},
                            "environment": {"archive": str(archive), "cache_dir": "/data/envs"}})
    assert ok.environment.cache_dir == "/data/envs" and spec_from_dict(ok.to_dict()) == ok
    for env, message in (({"archive": str(archive), "cache_dir": "envs"}, "expected an absolute path"),
                         ({"cache_dir": "/data/envs"}, "only used with environment.archive")):
        with pytest.raises(SpecError) as err:
            spec_from_dict({"name": "x", "roles": {"worker": {"command": "true"}}, "environment": env})
        assert f"environment.cache_dir: {message}" in str(err.value)
