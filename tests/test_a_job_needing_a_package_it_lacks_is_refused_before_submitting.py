"""A job file's features need packages where the job runs (:mod:`submarine_py.extras`): a sweep
needs Optuna where its ApplicationMaster runs, a ``tensorboard`` section TensorBoard where its
task runs. Where that is the interpreter ``subm`` runs with, a missing package refuses the job
before anything is submitted (exit 2), naming the field and what to install, instead of an AM
that fails on the cluster.
"""
from __future__ import annotations

import pytest

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


def test_a_kerberized_cluster_without_requests_gssapi_is_refused_before_submitting(monkeypatch, tmp_path):
    """The client's REST calls answer SPNEGO with requests-gssapi, and the environment that
    submits is the one that travels to the nodes: exit 2 naming the extra, before any login."""
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.backend import YarnBackend
    from submarine_py.plan import make_plan

    (tmp_path / "yarn-site.xml").write_text("<configuration/>")
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value>"
        "</property></configuration>")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.setattr(extras, "importable", lacking("requests_gssapi"))
    with pytest.raises(SpecError) as caught:
        YarnBackend(rm_urls=("http://rm.invalid:8088",)).check_cluster(make_plan(spec()))
    assert caught.value.exit_code == 2
    assert "kerberos: the cluster is Kerberized and requests-gssapi is not installed" in str(caught.value)
    assert "submarine-py[yarn]" in str(caught.value)
