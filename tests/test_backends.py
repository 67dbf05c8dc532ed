"""One registry of backends: the CLI's choices and default, app-id routing and history
collection all read it, and reading it imports no backend. Each backend checks the spec
against its own rules, offline; the job-file package knows no backend."""
import subprocess
import sys

import pytest

from conftest import REPO, cli

from submarine_py.backends import registry

pytestmark = pytest.mark.unit


def test_the_cli_offers_exactly_the_registered_backends():
    from submarine_py.cli import main

    for command in ("validate", "run", "list", "cluster"):
        option = next(p for p in main.commands[command].params if p.name == "backend")
        assert list(option.type.choices) == registry.names() == sorted(e.name for e in registry.BACKENDS)


@pytest.mark.parametrize("env, expected", [({}, "local"), ({"HADOOP_CONF_DIR": ""}, "local"),
                                           ({"HADOOP_CONF_DIR": "/etc/hadoop"}, "yarn"),
                                           ({"SUBM_YARN_RM_URL": "http://rm:8088"}, "local")])
def test_the_default_backend_is_the_first_whose_condition_holds(env, expected):
    assert registry.default_entry(env).name == expected
    assert registry.default_help() == "yarn where HADOOP_CONF_DIR is set, else local"


def test_every_entrys_example_id_routes_to_it_and_others_are_refused():
    for e in registry.BACKENDS:
        assert registry.backend_for_app(e.app_id_example) == e.name
    rc, _, err = cli("status", "job_1")
    assert rc == 2 and err == ("Error: APP_ID: 'job_1' is not a job id: YARN ids look like "
                               "application_1700000000000_0001, local ones like local_20260101-120000_ab12\n")


@pytest.mark.parametrize("env, expected", [({}, ["local"]), ({"HADOOP_CONF_DIR": "/c"}, ["local", "yarn"]),
                                           ({"SUBM_YARN_RM_URL": "http://rm:8088"}, ["local", "yarn"])])
def test_history_collects_from_the_backends_the_registry_names(env, expected):
    assert registry.collected(env) == expected


def test_each_entry_builds_its_backend_and_an_unknown_name_is_bad_input():
    for e in registry.BACKENDS:
        assert registry.get_backend(e.name).name == e.name
    with pytest.raises(registry.SpecError, match="--backend: expected one of local, yarn, got 'mesos'"):
        registry.get_backend("mesos")


def test_reading_the_registry_and_the_history_imports_no_backend():
    code = ("import sys, submarine_py.backends, submarine_py.history, submarine_py.home; "
            "print(sorted(m for m in sys.modules if m.startswith('submarine_py.backends.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['submarine_py.backends.registry']"


def test_the_job_file_package_imports_no_backend():
    code = ("import sys, submarine_py.jobfile, submarine_py.plan; "
            "print(sorted(m for m in sys.modules if m.startswith('submarine_py.backends')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_yarns_rules_need_neither_skein_nor_a_cluster(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "skein", None)  # as if the yarn extra were left out
    job = tmp_path / "job.yaml"
    job.write_text("name: j\nqueue: my queue\nroles: {w: {command: 'true', node_label: 'a b'}}\n")
    rc, out, err = cli("validate", "--backend", "yarn", str(job))
    assert rc == 2 and err.startswith("Error: 2 problems:\n  queue: expected a YARN queue name"), err
    assert "  roles.w.node_label: expected one YARN node label" in err
    job.write_text("name: j\nroles: {w: {command: 'true'}}\n")
    rc, out, err = cli("validate", "--backend", "yarn", str(job))
    assert rc == 0 and err == "OK: the job is valid. Backend: yarn\n", err
    rc, out, err = cli("validate", str(job), env={"HADOOP_CONF_DIR": str(tmp_path)})
    assert rc == 0 and err == "OK: the job is valid. Backend: yarn (HADOOP_CONF_DIR is set)\n", err


def test_a_backends_problems_come_with_the_job_files_own_at_once(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\nqueue: a b\nroles: {w: {command: 'true', instances: -1}}\n"
                   "files: {data.csv: 'hdfs:///d.csv'}\n")
    rc, _, err = cli("validate", "--backend", "yarn", str(job))
    assert rc == 2 and err.splitlines()[1:] == [
        "  roles.w.instances: expected a whole number >= 0, got -1",
        "  queue: expected a YARN queue name or path (letters, digits, '_', '-', '@', '+', parts joined by '.', "
        "no spaces), got 'a b'"], err
    rc, _, err = cli("validate", "--backend", "local", str(job))
    assert rc == 2 and err.splitlines()[1:] == [
        "  roles.w.instances: expected a whole number >= 0, got -1",
        "  files.data.csv: the local backend copies files from this machine and cannot fetch hdfs:///d.csv; "
        "give a local path (or run on YARN)"], err
