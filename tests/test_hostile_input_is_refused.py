"""Hostile or oversized input, and what the job's secret may reach.

Every value a job file or ``--set`` gives either is refused with exit 2 naming its field,
or reaches YARN's launch script only where nothing of it can run; the job's token is
never in the skein spec's environment (YARN writes that into a log anyone may read).
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from click.testing import CliRunner

from conftest import describe_processes, job_dirs, processes_of, run_json, start_subm, subm, wait_for, write_job

from submarine_py.backends.yarn.client.backend import _killed_tasks_settled as _settled
from submarine_py.backends.yarn.client.app_spec import JOB_FILE, YarnOptions, build_application_spec
from submarine_py.backends.yarn.client.rules import problems as yarn_rules
from submarine_py.cli import main as cli
from submarine_py.errors import SpecError
from submarine_py.output import format_progress
from submarine_py.plan import make_plan
from submarine_py.report import JobReport, TaskReport, replace
from submarine_py.am.master import ApplicationMaster
from fake_containers import IdleContainers
from submarine_py.states import JobState, Phase, TaskState
from submarine_py.jobfile import JobSpec, load_job, parse_set_options
from submarine_py.jobfile.fields import MAX_ARG_STRLEN
from submarine_py.jobfile import spec_from_dict

skein = pytest.importorskip("skein")

HOSTILE = "x$(touch pwned)`touch pwned2`\"';\\"


def spec_of(tmp_path: Path, rules=None, **job) -> JobSpec:
    """``job`` (over a one-role job) as a spec; ``rules``: a backend's too (YARN's: ``yarn_rules``)."""
    data = {"name": "j", "roles": {"worker": {"command": "python t.py"}}}
    data.update(job)
    return spec_from_dict(data, base_dir=str(tmp_path), rules=rules)


def problems(tmp_path: Path, rules=None, **job) -> dict:
    with pytest.raises(SpecError) as info:
        spec_of(tmp_path, rules=rules, **job)
    return dict(info.value.problems)


def app_spec(tmp_path: Path, spec: JobSpec, python: str = "/opt/py/bin/python3"):
    return build_application_spec(make_plan(spec), YarnOptions(
        job_file=str(tmp_path / "job.json"), rm_urls=("http://rm:8088",), python=python))


# -- --set values are one scalar --------------------------------------------------------------

@pytest.mark.unit
def test_a_set_value_with_a_newline_cannot_add_keys(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: {{ name }}\nroles:\n  worker:\n    command: echo {{ msg | default('hi') }}\n")
    with pytest.raises(SpecError) as info:
        load_job(str(job), parse_set_options(["name=x\ntags: [injected]"]))
    assert [path for path, _ in info.value.problems] == ["name"]  # one (bad) name, no tags
    spec = load_job(str(job), parse_set_options(["name=ok", "msg=a\nroles: {}\nqueue: evil"]))
    assert spec.queue == "default" and set(spec.roles) == {"worker"}
    assert spec.roles["worker"].command == "echo a\nroles: {}\nqueue: evil"  # inside its scalar


@pytest.mark.unit
@pytest.mark.parametrize("template, value, expected", [
    ("{A: {{ v }}}", "1, B: 2", "1, B: 2"),                      # flow mapping: still one value
    ("{A: {{ v }}}", "1}\nqueue: {x", "1}\nqueue: {x"),
    ("{A: '{{ v }}'}", "a', B: 'b", "a', B: 'b"),                # inside a quoted scalar
    ('{A: "{{ v }}"}', 'a", B: "b', 'a", B: "b'),
    ("{A: x-{{ v }}}", "#c, B: d", "x-#c, B: d"),
])
def test_set_values_stay_inside_the_scalar_they_land_in(tmp_path, template, value, expected):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\nroles:\n  worker:\n    command: run\n    env: " + template + "\n")
    spec = load_job(str(job), parse_set_options([f"v={value}"]))
    assert dict(spec.roles["worker"].env) == {"A": expected}
    assert spec.queue == "default"


@pytest.mark.unit
def test_one_line_set_values_are_still_typed_where_they_are_the_whole_scalar(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: '{{ name }}'\nroles:\n  worker:\n    instances: {{ n }}\n    command: run {{ n }}\n"
                   "    env: {FLAG: {{ flag }}, TEXT: {{ text }}}\n")
    spec = load_job(str(job), parse_set_options(["name=007", "n=3", "flag=true", "text=a:b"]))
    assert spec.name == "007" and spec.roles["worker"].instances == 3
    assert dict(spec.roles["worker"].env) == {"FLAG": "true", "TEXT": "a:b"}


@pytest.mark.unit
def test_the_cli_refuses_an_injecting_set_with_exit_2(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: {{ name }}\nroles: {worker: {command: run}}\n")
    result = CliRunner().invoke(cli, ["validate", str(job), "--set", "name=x\ntags: [injected]"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "name:" in result.output and "injected" in result.output


# -- fields that reach YARN's launch script -----------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("dest", ["x$(touch pwned)", "a`id`", 'q"uote', "back\\slash", "new\nline",
                                  "-rf", "sub/$(id)", "trailing\n", "semi;colon", "c:olon", "h#sh", "pct%41"])
def test_hostile_files_destinations_are_refused(tmp_path, dest):
    (tmp_path / "t.py").write_text("")
    found = problems(tmp_path, rules=yarn_rules, files={dest: "t.py"})
    assert list(found) == [f"files.{dest}"]


@pytest.mark.unit
def test_hostile_url_source_names_are_refused_since_yarn_names_the_copy_after_them(tmp_path):
    found = problems(tmp_path, rules=yarn_rules, files={"b.py": "hdfs://nn:8020/data/b`id`.py"})
    assert "source's name" in found["files.b.py"]
    # Local sources travel inside one archive subm packs: their own names reach no script.
    odd = tmp_path / "a$(x) (1).py"
    odd.write_text("")
    assert set(spec_of(tmp_path, rules=yarn_rules, files={"a.py": odd.name}).files) == {"a.py"}


@pytest.mark.unit
def test_plain_file_names_with_spaces_and_subfolders_are_fine(tmp_path):
    (tmp_path / "my data.csv").write_text("")
    spec = spec_of(tmp_path, rules=yarn_rules,
                   files={"data/my data.csv": "my data.csv", "conf/a+b=c@d,e~.yaml": "my data.csv"})
    assert set(spec.files) == {"data/my data.csv", "conf/a+b=c@d,e~.yaml"}


@pytest.mark.unit
@pytest.mark.parametrize("mount", ["/data$(touch pwned):/data", "/data:/d`id`", '/a"b:/c', "/a,b:/c",
                                   "/a b:/c", "/a\n:/c", "/a:/c\n", "/a;b:/c"])
def test_hostile_docker_mounts_are_refused(tmp_path, mount):
    found = problems(tmp_path, rules=yarn_rules, docker={"image": "localhost/img:1", "mounts": [mount]})
    assert list(found) == ["docker.mounts[0]"]


@pytest.mark.unit
@pytest.mark.parametrize("field, value", [
    ("shared_dir", "/mnt/nfs/x$(touch pwned)"), ("shared_dir", "/mnt/a,b"),
    ("queue", "default$(touch pwned)"), ("queue", "a b"), ("queue", "default\n"), ("name", HOSTILE),
    ("name", "job\n"),
    ("tags", ["ok", "t\u00e9g"]), ("tags", ["x" * 101]),
])
def test_hostile_job_fields_are_refused(tmp_path, field, value):
    found = problems(tmp_path, rules=yarn_rules, **{field: value})
    assert any(path.split("[")[0] == field for path in found), found


@pytest.mark.unit
@pytest.mark.parametrize("field, value", [
    ("node_label", "gpu$(touch pwned)"), ("node_label", "gpu && fast"),
    ("docker", {"image": "img; touch pwned"}), ("docker", {"image": "img:$(id)"}),
    ("env", {"A$(id)": "x"}), ("env", {"A B": "x"}), ("env", {"A\n": "x"}), ("node_label", "gpu\n"),
])
def test_hostile_role_fields_are_refused(tmp_path, field, value):
    found = problems(tmp_path, rules=yarn_rules, roles={"worker": {"command": "run", field: value}})
    assert any(path.startswith(f"roles.worker.{field}") for path in found), found


@pytest.mark.unit
def test_hostile_archive_names_are_refused(tmp_path):
    archive = tmp_path / "env$(touch pwned).tar.gz"
    archive.write_bytes(b"")
    found = problems(tmp_path, rules=yarn_rules, environment={"archive": str(archive)})
    assert list(found) == ["environment.archive"]
    assert list(problems(tmp_path, rules=yarn_rules,
                         environment={"python": "/usr/bin/python3\ntouch pwned"})) == ["environment.python"]
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    found = problems(tmp_path, rules=yarn_rules,
                     environment={"archive": str(archive), "cache_dir": "/var/cache/x$(touch pwned)"})
    assert list(found) == ["environment.cache_dir"]


@pytest.mark.local
def test_what_only_yarn_refuses_runs_locally_and_yarn_refuses_it_all_at_once(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path, """\
        name: yarn-only
        queue: my queue
        tags: [Team-A, "a,b", "é"]
        shared_dir: /mnt/a b
        files:
          x$(touch pwned): t.txt
          -rf: t.txt
          sub/semi;colon: t.txt
        roles:
          worker:
            node_label: gpu && fast
            command: test -f './x$(touch pwned)' && test -f ./-rf && test -f 'sub/semi;colon' && echo files-ok
    """, files={"t.txt": "x\n"})
    for args in (["validate"], ["run", "--dry-run"], ["run"]):
        rc, out, err = subm(*args, "--backend", "yarn", str(job))
        assert rc == 2 and err.startswith("Error: 8 problems:"), (args, err)
        for path in ("queue", "tags[1]", "tags[2]", "shared_dir", "files.x$(touch pwned)", "files.-rf",
                     "files.sub/semi;colon"):
            assert f"  {path}: " in err, (path, err)
        assert "roles.worker.node_label: expected one YARN node label" in err
    rc, report, err = run_json("run", "--backend", "local", str(job))
    no_leftovers.append(report.get("app_id"))
    assert rc == 0 and report["state"] == "SUCCEEDED", err
    logs = subm_home / "local" / report["app_id"] / "logs"
    assert "files-ok" in (logs / "worker-0.stdout").read_text()
    assert not list(tmp_path.rglob("pwned")) and not list(subm_home.rglob("pwned"))


@pytest.mark.unit
def test_env_values_and_commands_never_reach_the_skein_spec(tmp_path):
    spec = spec_of(tmp_path, roles={"worker": {"command": "echo $(hostname) `id`",
                                               "env": {"SECRET": "hunter2-" + HOSTILE}}})
    text = app_spec(tmp_path, spec).to_yaml()
    assert "hunter2" not in text and "$(hostname)" not in text  # they go to the executor over HTTP


@pytest.mark.local
def test_a_hostile_python_folder_is_quoted_in_the_launch_script(tmp_path):
    """The script YARN runs in the container, run here by bash: nothing in the path runs."""
    folder = tmp_path / "x$(touch pwned)`touch pwned2`"
    folder.mkdir()
    (folder / "python").symlink_to(sys.executable)
    spec = app_spec(tmp_path, spec_of(tmp_path), python=str(folder / "python"))
    script = spec.services["worker"].script.replace("subm_executor.py", "-c 'import os, sys; print(sys.executable); "
                                                    "print(os.environ[\"PATH\"])'")
    work = tmp_path / "container"
    work.mkdir()
    out = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not list(work.glob("pwned*")) and not list(tmp_path.glob("pwned*"))
    assert f":{folder}:" in out.stdout.splitlines()[1]  # the folder itself, literally, in PATH


# -- the job's secret -------------------------------------------------------------------------

@pytest.mark.unit
def test_the_token_travels_in_the_localized_job_file_never_in_the_environment(tmp_path):
    """The job file is the one file a job ships: the AM and every executor get it, private."""
    from submarine_py.backends.yarn.client.request import build_request

    request = build_request(make_plan(spec_of(tmp_path)), ["http://rm:8088"])
    spec = request.app_spec
    assert request.token not in spec.to_yaml() and request.token not in request.describe()
    for env, files in [(spec.master.env, spec.master.files)] + [(s.env, s.files) for s in spec.services.values()]:
        assert "SUBM_TOKEN" not in env
        assert files[JOB_FILE].source.endswith(request.job_file)
    for s in spec.services.values():
        assert s.env["SUBM_TOKEN_FILE"] == JOB_FILE


@pytest.mark.unit
@pytest.mark.parametrize("content", ["s3cret\n", json.dumps({"name": "j", "spec": {}, "token": "s3cret"})])
def test_the_executor_reads_the_token_file_then_drops_its_link(tmp_path, content):
    """A file of the token alone, or YARN's job file that carries it (``token``)."""
    from submarine_py.executor.am_client import read_token

    private = tmp_path / "filecache" / "subm_job.json"
    private.parent.mkdir()
    private.write_text(content)
    link = tmp_path / JOB_FILE
    link.symlink_to(private)
    assert read_token({"SUBM_TOKEN_FILE": str(link)}) == "s3cret"
    assert not link.exists() and private.exists()  # the task's directory no longer shows it
    assert read_token({"SUBM_TOKEN": "t", "SUBM_TOKEN_FILE": str(link)}) == "t"


# -- sizes the kernel would refuse --------------------------------------------------------------

@pytest.mark.unit
def test_an_env_value_past_max_arg_strlen_is_refused_naming_it(tmp_path):
    found = problems(tmp_path, roles={"worker": {"command": "run", "env": {"BIG": "x" * 200_000}}})
    assert list(found) == ["roles.worker.env.BIG"] and "MAX_ARG_STRLEN" in found["roles.worker.env.BIG"]
    # the limit counts NAME=value and its terminating NUL, in bytes
    ok = "x" * (MAX_ARG_STRLEN - len("BIG=") - 1)
    spec_of(tmp_path, roles={"worker": {"command": "run", "env": {"BIG": ok}}})
    found = problems(tmp_path, roles={"worker": {"command": "run", "env": {"BIG": ok[:-1] + "\u00e9"}}})
    assert list(found) == ["roles.worker.env.BIG"]


@pytest.mark.unit
def test_a_command_past_max_arg_strlen_is_refused(tmp_path):
    found = problems(tmp_path, roles={"worker": {"command": "echo " + "x" * 140_000}})
    assert list(found) == ["roles.worker.command"]


@pytest.mark.unit
def test_all_variables_of_a_task_together_are_bounded(tmp_path):
    env = {f"V{i}": "x" * 100_000 for i in range(12)}
    found = problems(tmp_path, roles={"worker": {"command": "run", "env": env}})
    assert list(found) == ["roles.worker.env"] and "ARG_MAX" in found["roles.worker.env"]


@pytest.mark.unit
def test_validate_exits_2_naming_the_oversized_variable(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\nroles:\n  worker:\n    command: run\n    env: {BIG: '{{ big }}'}\n")
    result = CliRunner().invoke(cli, ["validate", str(job), "--set", "big=" + "y" * 200_000])
    assert result.exit_code == 2 and "roles.worker.env.BIG" in result.output


# -- reports that told small lies -----------------------------------------------------------------

@pytest.mark.unit
def test_progress_without_any_task_from_the_am_shows_no_task_counts():
    gone = JobReport(app_id="application_1_1", state=JobState.FAILED, final=True)
    assert format_progress(gone, 12.0) == "[  12.0s] job FAILED"
    silent = JobReport(app_id="application_1_1", state=JobState.RUNNING, phase=Phase.RUNNING)
    line = format_progress(silent, 3.0)
    assert "0/0" not in line and "does not answer" in line


@pytest.mark.unit
def test_a_snapshot_report_of_a_killed_job_keeps_its_tasks_as_killed():
    snapshot = JobReport(app_id="application_1_1", phase=Phase.RUNNING, state=JobState.RUNNING, running=1, tasks=(
        TaskReport("worker", 0, state=TaskState.RUNNING), TaskReport("worker", 1, state=TaskState.SUCCEEDED)))
    settled = _settled(snapshot)
    assert [t.state for t in settled.tasks] == [TaskState.KILLED, TaskState.SUCCEEDED]
    assert settled.running == 0 and settled.phase == Phase.DONE
    final = replace(snapshot, phase=Phase.DONE)
    assert _settled(final) == final  # the AM's own final report is kept as it is


@pytest.mark.unit
def test_the_report_file_names_the_roles_variables_but_hides_their_values(tmp_path):
    from submarine_py.am.reporting import spec_without_secrets

    spec = spec_of(tmp_path, roles={"worker": {"command": "run", "env": {"DB_PASSWORD": "hunter2"}}})
    written = spec_without_secrets(make_plan(spec))
    assert "hunter2" not in json.dumps(written)
    assert list(written["roles"]["worker"]["env"]) == ["DB_PASSWORD"]


class _PendingCluster(IdleContainers):
    """Containers the AM asks for that YARN never allocates."""

    name = "fake"

    def __init__(self):
        self.described: List[str] = []
        self.asked = 0

    def launch(self, task, env):
        self.asked += 1
        return f"container_{self.asked}"

    def describe(self, executor):
        self.described.append(executor)
        return "REQUESTED (pending: the queue is full, a long story)"


@pytest.mark.unit
def test_a_gang_timeout_says_what_the_cluster_says_of_each_missing_task(tmp_path):
    spec = spec_of(tmp_path, roles={"worker": {"command": "run", "instances": 13}, "ps": {"command": "serve"}},
                   timeouts={"gang_seconds": 1})
    cluster = _PendingCluster()
    report = ApplicationMaster(make_plan(spec), "application_1_1", cluster).run()
    assert report.state == JobState.FAILED
    assert report.diagnostics.count("a long story") == 14 and len(set(cluster.described)) == 14
    assert "worker:12 (REQUESTED (pending: the queue is full, a long story))" in report.diagnostics


# -- leftovers, locally -------------------------------------------------------------------------

@pytest.mark.local
@pytest.mark.parametrize("how", ["subm kill", "SIGTERM to subm run"])
def test_a_process_that_left_its_group_and_ignores_sigterm_dies_with_the_job(tmp_path, subm_home,
                                                                              no_leftovers, how):
    job = write_job(tmp_path, """\
        name: escaper
        roles:
          worker:
            instances: 2
            resources: {memory: 256 MiB}
            command: setsid sh -c 'trap "" TERM; while :; do sleep 1; done' & echo ready; wait
    """)
    proc = start_subm("run", str(job), "--backend", "local", "--output", "json")
    try:
        app_id = wait_for(lambda: next((d.name for d in job_dirs(subm_home)), None), timeout=60,
                          what="the job's directory")
        no_leftovers.append(app_id)
        wait_for(lambda: len([p for p in processes_of(app_id) if "trap" in describe_processes([p])]) >= 2,
                 timeout=60, what="the escaped processes")
        if how == "subm kill":
            rc, killed, err = run_json("kill", app_id)
            assert killed["state"] == "KILLED", err
        else:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(out)["state"] == "KILLED"
    wait_for(lambda: not processes_of(app_id), timeout=30, what="no process of the job left")
