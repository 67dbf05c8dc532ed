"""A job file's features need packages where the job runs (:mod:`submarine_py.extras`): a sweep
needs Optuna where its ApplicationMaster runs, a ``tensorboard`` section TensorBoard where its
task runs. Where that is the interpreter ``subm`` runs with, a missing package refuses the job
before anything is submitted (exit 2), naming the field and what to install, instead of an AM
that fails on the cluster. A Kerberized cluster needs requests-gssapi where ``subm`` runs (the
``kerberos`` extra): without it every command that talks to the cluster stops before anything
reaches it, naming the extra and what its gssapi builds against.
"""
from __future__ import annotations

import json
import sys

import pytest

from conftest import cli

from submarine_py import extras
from submarine_py.backends.local.backend import LocalBackend
from submarine_py.errors import SpecError
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

ROLES = {"worker": {"instances": 1, "command": "python3 train.py"}}
SWEEP = {"trials": 4, "parallel": 2, "metric": "score", "goal": "maximize",
         "params": {"lr": {"low": 0.001, "high": 0.1}}}


def spec(**fields):
    return spec_from_dict({"name": "j", "framework": "pytorch", "roles": ROLES, **fields})


def lacking(*modules):
    return lambda module: module not in modules


def test_a_sweep_needs_optuna_where_its_am_runs():
    job = spec(sweep=SWEEP)
    [(field, why)] = extras.missing(job, am_here=True, tasks_here=True, installed=lacking("optuna"))
    assert field == "sweep"
    assert "Optuna is not installed for" in why and "pip install optuna" in why and "submarine-py[sweep]" in why
    # With Optuna, or with an AM that runs elsewhere (another interpreter on the nodes), no word.
    assert extras.missing(job, am_here=True, tasks_here=True, installed=lacking()) == []
    assert extras.missing(job, am_here=False, tasks_here=True, installed=lacking("optuna")) == []


def test_a_tensorboard_section_needs_tensorboard_where_its_task_runs():
    job = spec(tensorboard={})
    [(field, why)] = extras.missing(job, am_here=True, tasks_here=True, installed=lacking("tensorboard"))
    assert field == "tensorboard" and "pip install tensorboard" in why
    assert extras.missing(job, am_here=True, tasks_here=False, installed=lacking("tensorboard")) == []
    # A job without those features needs neither.
    assert extras.missing(spec(), am_here=True, tasks_here=True, installed=lacking("optuna", "tensorboard")) == []


def test_the_local_backend_refuses_a_sweep_without_optuna_at_validation(monkeypatch):
    monkeypatch.setattr(extras, "importable", lacking("optuna"))
    with pytest.raises(SpecError) as caught:
        spec_from_dict({"name": "j", "framework": "pytorch", "roles": ROLES, "sweep": SWEEP},
                       rules=LocalBackend().check)
    assert "sweep" in str(caught.value) and "Optuna is not installed" in str(caught.value)


def test_yarn_refuses_a_sweep_without_optuna_where_its_am_runs_this_interpreter(monkeypatch):
    """On YARN the AM runs with the submitting interpreter unless ``environment.python`` names
    the nodes' own (then what it has is not known here: no refusal)."""
    from submarine_py.backends.yarn.client.backend import YarnBackend

    monkeypatch.setattr(extras, "importable", lacking("optuna", "tensorboard"))
    data = {"name": "j", "framework": "pytorch", "roles": ROLES, "sweep": SWEEP}
    with pytest.raises(SpecError) as caught:
        spec_from_dict(data, rules=YarnBackend().check)
    assert "sweep: Optuna is not installed for" in str(caught.value)
    # The tasks' archive is theirs: the AM still runs this interpreter.
    with pytest.raises(SpecError):
        spec_from_dict(dict(data, environment={"archive": "hdfs:///envs/e.tar.gz"}), rules=YarnBackend().check)
    assert spec_from_dict(dict(data, environment={"python": "/opt/env/bin/python3"}),
                          rules=YarnBackend().check).sweep is not None


def kerberized_conf_dir(tmp_path) -> str:
    """A cluster's configuration saying Kerberos, whose RM answers nothing (port 9)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.webapp.address</name><value>127.0.0.1:9</value>"
        "</property></configuration>")
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value>"
        "</property></configuration>")
    return str(tmp_path)


def names_the_kerberos_extra(said: str) -> None:
    assert "requests-gssapi is not installed" in said, said
    assert "pip install 'submarine-py[kerberos]'" in said, said
    assert "libkrb5-dev and a C compiler" in said and "krb5-devel" in said, said


@pytest.fixture
def nothing_reaches_the_cluster(monkeypatch):
    """No login is tried and nothing is submitted: a test fails where either happens."""
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.backend import YarnBackend
    from submarine_py.backends.yarn.hadoop import kerberos

    def reached(*args, **kwargs):
        raise AssertionError("the cluster was reached before the missing requests-gssapi was said")

    monkeypatch.setattr(kerberos, "log_in", reached)
    monkeypatch.setattr(YarnBackend, "submit", reached)
    monkeypatch.setattr(extras, "importable", lacking("requests_gssapi"))


def test_a_kerberized_cluster_without_requests_gssapi_is_refused_before_submitting(
        monkeypatch, tmp_path, nothing_reaches_the_cluster):
    """The client's REST calls answer SPNEGO with requests-gssapi, and the environment that
    submits is the one that travels to the nodes: exit 2 naming the extra, before any login."""
    from submarine_py.backends.yarn.client.backend import YarnBackend
    from submarine_py.plan import make_plan

    monkeypatch.setenv("HADOOP_CONF_DIR", kerberized_conf_dir(tmp_path))
    with pytest.raises(SpecError) as caught:
        YarnBackend(rm_urls=("http://rm.invalid:8088",)).check_cluster(make_plan(spec()))
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith("kerberos: the cluster is Kerberized and requests-gssapi is not installed")
    names_the_kerberos_extra(str(caught.value))


def test_subm_run_on_a_kerberized_cluster_without_the_kerberos_extra_says_so_in_one_line(
        tmp_path, nothing_reaches_the_cluster):
    (tmp_path / "job.yaml").write_text(json.dumps({"name": "j", "roles": ROLES}))
    env = {"HADOOP_CONF_DIR": kerberized_conf_dir(tmp_path / "conf"), "SUBM_RM_WAIT": "0"}
    code, out, err = cli("run", str(tmp_path / "job.yaml"), "--backend", "yarn", env=env)
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    names_the_kerberos_extra(err)


@pytest.mark.parametrize("command", [
    ["status", "application_1_0001"], ["wait", "application_1_0001"], ["kill", "application_1_0001"],
    ["logs", "application_1_0001"], ["list"], ["cluster"],
])
def test_every_command_that_talks_to_a_kerberized_cluster_without_the_extra_says_so_first(
        tmp_path, nothing_reaches_the_cluster, command):
    env = {"HADOOP_CONF_DIR": kerberized_conf_dir(tmp_path), "SUBM_RM_WAIT": "0", "SUBM_BACKEND": "yarn"}
    code, out, err = cli(*command, env=env)
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    names_the_kerberos_extra(err)


def test_every_message_about_a_missing_gssapi_names_the_kerberos_extra_alike(monkeypatch):
    """An endpoint asking for SPNEGO without requests-gssapi, and a ticket looked for without
    klist or python-gssapi, say what to install as the refusal above does."""
    import requests

    from submarine_py.backends.yarn.hadoop import kerberos, spnego
    from submarine_py.errors import CredentialsError

    asking = requests.Response()
    asking.status_code, asking.url = 401, "http://rm.example.com:8088/ws/v1/cluster"
    asking.headers["WWW-Authenticate"] = "Negotiate"
    with pytest.raises(CredentialsError) as caught:
        spnego._NoGssapi._check(asking)
    assert kerberos.INSTALL_GSSAPI in str(caught.value)
    names_the_kerberos_extra(str(caught.value))

    monkeypatch.setitem(sys.modules, "gssapi", None)  # `import gssapi` raises ImportError
    with pytest.raises(CredentialsError) as caught:
        kerberos._gssapi_principal()
    assert kerberos.INSTALL_GSSAPI in str(caught.value) and "krb5-user" in str(caught.value)
