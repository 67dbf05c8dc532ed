"""The plan as a skein ApplicationSpec: a pure function, checked without a cluster."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from submarine_py.backends.yarn.client.app_spec import (EXECUTOR_FILE, JOB_FILE,
                                                  YarnOptions, build_application_spec)
from submarine_py.admission import Need
from submarine_py.backends.yarn.capacity import parse_gang_tag
from submarine_py.backends.yarn.client.shipping import FILES_ARCHIVE
from submarine_py.executor import protocol
from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

skein = pytest.importorskip("skein", reason="skein is not installed (pip install '.[yarn]')")
pytestmark = pytest.mark.unit


def build(tmp_path, **job):
    (tmp_path / "train.py").write_text("print('hi')\n")
    data = {
        "name": "gpu-job", "framework": "tensorflow", "queue": "research", "tags": ["team-a"],
        "restart": {"policy": "gang", "max_restarts": 2},
        "roles": {
            "chief": {"command": "python train.py", "resources": {"memory": "4 GiB", "vcores": 2, "gpus": 1}},
            "worker": {"instances": 3, "command": "python train.py",
                       "resources": {"memory": "8 GiB", "vcores": 4, "gpus": 2}, "node_label": "gpu"},
            "ps": {"instances": 2, "command": "python train.py", "resources": {"memory": "2 GiB"}},
        },
        "files": {"train.py": "train.py"},
    }
    data.update(job)
    plan = make_plan(spec_from_dict(data, base_dir=str(tmp_path)))
    opts = YarnOptions(job_file=str(tmp_path / "job.json"), rm_urls=("http://rm:8088",),
                       node_hosts=["node1", "node2"], python="/opt/py/bin/python3")
    return build_application_spec(plan, opts)


def test_each_role_is_a_service_with_its_resources_and_no_container_asked_at_submission(tmp_path):
    """The AM asks for the containers once the whole gang fits (gang admission): a job that
    waits for room holds none."""
    spec = build(tmp_path)
    assert set(spec.services) == {"chief", "worker", "ps"}
    worker = spec.services["worker"]
    assert worker.instances == 0
    assert (worker.resources.memory, worker.resources.vcores, worker.resources.gpus) == (8192, 4, 2)
    assert spec.services["chief"].resources.gpus == 1
    assert spec.services["ps"].resources.gpus == 0


def test_the_application_carries_queue_tags_and_name(tmp_path):
    spec = build(tmp_path)
    assert spec.queue == "research"
    assert spec.name == "gpu-job"
    # The gang, for other jobs' admission: 1 chief, 3 workers and 2 ps, each as YARN asks it.
    gang = next(t for t in spec.tags if t.startswith("subm-gang:"))
    assert set(spec.tags) == {"submarine", "team-a", gang}
    assert sorted(parse_gang_tag([gang]), key=repr) == sorted(
        [Need(4096, 2, 1)] + [Need(8192, 4, 2)] * 3 + [Need(2048, 1, 0)] * 2, key=repr)


def test_a_lost_am_is_retried_by_yarn_only_when_restarts_are_allowed(tmp_path):
    # gang, max_restarts 2: YARN may start the AM once more.
    assert build(tmp_path).max_attempts == 2
    assert build(tmp_path, restart={"policy": "never"}).max_attempts == 1
    assert build(tmp_path, restart={"policy": "task", "max_restarts": 0}).max_attempts == 1


def test_node_hints_with_relaxed_locality_except_for_labelled_roles(tmp_path):
    spec = build(tmp_path)
    ps = spec.services["ps"]
    assert list(ps.nodes) == ["node1", "node2"] and ps.relax_locality
    worker = spec.services["worker"]
    assert worker.node_label == "gpu" and not worker.nodes


def test_the_am_alone_replaces_containers_and_a_failure_never_ends_the_application(tmp_path):
    for policy in ("gang", "never"):
        for service in build(tmp_path, restart={"policy": policy}).services.values():
            assert service.max_restarts == 0  # replacements go through admission, in the AM
            assert service.allow_failures  # a failed container must not end the application


def test_containers_get_the_executor_the_spec_files_and_how_to_reach_the_am(tmp_path):
    spec = build(tmp_path)
    worker = spec.services["worker"]
    # The job's files travel as one archive that the executor unpacks as real files.
    assert set(worker.files) == {EXECUTOR_FILE, JOB_FILE, FILES_ARCHIVE}
    assert worker.env["SUBM_FILES_ARCHIVE"] == FILES_ARCHIVE
    assert worker.env["SUBM_ROLE"] == "worker"
    assert worker.env["SUBM_TOKEN_FILE"] == JOB_FILE  # the job file carries the token
    assert worker.env["SUBM_AM_DISCOVERY"] == "http://rm:8088/proxy/{app}/pages/subm/v1/am"
    assert worker.script.startswith("SUBM_PY=/opt/py/bin/python3\n")
    assert worker.script.endswith(f'exec "$SUBM_PY" -S {EXECUTOR_FILE}')
    # `python` is a wrapper that starts the interpreter by its own path (a venv's pyvenv.cfg holds),
    # which the executor writes when its first command starts: no mkdir or chmod process in each
    # container's launch script while the gang assembles. The AM runs no `python` of a job's.
    assert worker.env["SUBM_PYTHON_WRAPPER"] == "1"  # for the interpreter the script starts it with
    assert 'export PATH="$PWD/.subm-bin":/opt/py/bin:"$PATH"\n' in worker.script
    for script in (worker.script, spec.master.script):
        assert "mkdir" not in script and "chmod" not in script and "ln -s" not in script


def test_the_executor_travels_as_one_file_with_the_modules_it_imports(tmp_path):
    """One file for YARN to localize per container (each costs the NodeManager's work before
    the process starts), written at submission; no job file may take its modules' names."""
    from submarine_py.jobfile.files import RESERVED_FILES
    from submarine_py.executor import main as executor

    opts = YarnOptions(job_file="job.json", rm_urls=("http://rm:8088",),
                       executor_bundle=str(tmp_path / EXECUTOR_FILE))
    plan = make_plan(spec_from_dict({"name": "j", "roles": {"worker": {"command": "true"}}}))
    worker = build_application_spec(plan, opts).services["worker"]
    assert [name for name in worker.files if name.startswith("subm_") and name.endswith(".py")] == [EXECUTOR_FILE]
    assert worker.files[EXECUTOR_FILE].source.replace("file://", "") == str(tmp_path / EXECUTOR_FILE)
    assert set(executor.shipped_files()) | {executor.shipped_name(executor.ENVCACHE)} <= set(RESERVED_FILES)
    from submarine_py.executor.bundle import bundle_source

    embedded = next(line for line in bundle_source().splitlines() if line.startswith("SUBM_EMBEDDED = "))
    for module in ("executor", "proctree", "processes", "nvml", "am_client", "envcache"):
        assert f"'{module}': " in embedded


def test_nested_destinations_and_url_sources_never_reach_skein_as_paths(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("x\n")
    spec = build(tmp_path, files={"train.py": "train.py", "data/input.txt": "data/input.txt",
                                  "lib/big.bin": "hdfs://nn/data/big.bin"})
    worker = spec.services["worker"]
    assert set(worker.files) == {EXECUTOR_FILE, JOB_FILE, FILES_ARCHIVE, ".subm-url-0"}
    assert worker.files[".subm-url-0"].source == "hdfs://nn/data/big.bin"
    assert worker.env["SUBM_FILES_LINKS"] == ".subm-url-0:lib/big.bin"  # no quotes: YARN's launch script
    assert protocol.decode_links(worker.env["SUBM_FILES_LINKS"]) == {"lib/big.bin": ".subm-url-0"}


def test_a_shared_dir_is_mounted_into_yarn_docker_containers(tmp_path):
    spec = build(tmp_path, shared_dir="/mnt/nfs/jobs", docker={"image": "team/train:1"})
    assert spec.services["worker"].env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"] == "/mnt/nfs/jobs:/mnt/nfs/jobs:rw"


def test_the_master_runs_the_python_am_with_the_job_file(tmp_path):
    spec = build(tmp_path)
    assert set(spec.master.files) == {JOB_FILE}
    assert spec.master.script.endswith(f"-m submarine_py.backends.yarn.am.main {JOB_FILE}")


def test_a_packed_environment_reaches_tasks_as_a_plain_file_and_never_the_am(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    spec = build(tmp_path, environment={"archive": str(archive), "cache_dir": "/var/cache/subm-envs"})
    # The AM neither localizes nor waits for the archive: it runs with the submitting interpreter.
    assert set(spec.master.files) == {JOB_FILE}
    assert "SUBM_PY=/opt/py/bin/python3" in spec.master.script
    worker = spec.services["worker"]
    # YARN copies it as a file (no per-container unpack); the executor unpacks it once per node.
    assert worker.files["subm-environment.tar.gz"].type == "FILE"
    assert "subm_envcache.py" not in worker.files  # embedded in the executor's one file
    assert worker.env["SUBM_ENV_ARCHIVE"] == "subm-environment.tar.gz"
    assert worker.env["SUBM_ENV_CACHE"] == "/var/cache/subm-envs"
    assert 'exec "$SUBM_PY" -S subm_executor.py' in worker.script
    # skein uploads a local archive into the application's staging directory: per job.
    assert worker.files["subm-environment.tar.gz"].visibility == "APPLICATION"


def test_an_archive_on_the_cluster_filesystem_is_kept_in_the_nodes_cache_across_jobs(tmp_path):
    spec = build(tmp_path, environment={"archive": "hdfs://nn:8020/envs/py311.tar.gz"})
    shipped = spec.services["worker"].files["subm-environment.tar.gz"]
    # PRIVATE: the NodeManager's per-user cache keeps it for later jobs with the same file.
    assert (shipped.source, shipped.type, shipped.visibility) == \
        ("hdfs://nn:8020/envs/py311.tar.gz", "FILE", "PRIVATE")


def test_the_archive_checksum_computed_at_submission_keys_the_cache(tmp_path):
    archive = tmp_path / "env.zip"
    archive.write_bytes(b"")
    (tmp_path / "train.py").write_text("")
    plan = make_plan(spec_from_dict({"name": "j", "roles": {"worker": {"command": "true"}},
                                        "environment": {"archive": str(archive)}}))
    opts = YarnOptions(job_file="job.json", rm_urls=("http://rm:8088",), archive_sha256="ab" * 32)
    worker = build_application_spec(plan, opts).services["worker"]
    assert worker.env["SUBM_ENV_SHA256"] == "ab" * 32
    assert worker.env["SUBM_ENV_ARCHIVE"] == "subm-environment.zip"
    assert "SUBM_ENV_CACHE" not in worker.env  # the executor's default: /tmp/subm-envs-<uid>


def test_the_stop_grace_reaches_every_executor(tmp_path):
    spec = build(tmp_path, timeouts={"stop_grace_seconds": 0.5})
    assert {s.env["SUBM_STOP_GRACE"] for s in spec.services.values()} == {"0.5"}


def test_the_spec_round_trips_through_skeins_yaml(tmp_path):
    spec = build(tmp_path)
    again = skein.ApplicationSpec.from_yaml(spec.to_yaml()).to_dict()
    expected = spec.to_dict()
    assert sorted(again.pop("tags")) == sorted(expected.pop("tags"))  # skein keeps tags as a set
    assert again == expected


HOSTILE_PYTHONS = ["/tmp/bars-py/$(touch {mark})/python3", "/tmp/bars-py/`touch {mark}`/python3",
                   "/tmp/it's \"$(touch {mark})\" $HOME/python3", "/tmp/a b/'$(touch {mark})'/python3"]


@pytest.mark.parametrize("python", HOSTILE_PYTHONS)
@pytest.mark.parametrize("where", ["environment.python", "the submitting interpreter", "with an archive"])
def test_an_interpreter_path_holding_shell_syntax_reaches_every_launch_script_as_data(tmp_path, python, where):
    """Each launch script (the AM's, each role's) is run for real by bash where the path does
    not exist: it fails saying so, and nothing in the path ran (issue 42: a path inside an
    echo's double quotes ran its ``$(...)``)."""
    mark = tmp_path / "ran"
    path = python.format(mark=mark)
    job = {"environment": {"python": path}} if where == "environment.python" else {}
    if where == "with an archive":
        (tmp_path / "env.tar.gz").write_bytes(b"")
        job = {"environment": {"archive": str(tmp_path / "env.tar.gz")}}
    plan = make_plan(spec_from_dict({"name": "j", "roles": {"worker": {"command": "python -V"}}, **job},
                                    base_dir=str(tmp_path)))
    opts = YarnOptions(job_file=str(tmp_path / "job.json"), rm_urls=("http://rm:8088",), python=path)
    spec = build_application_spec(plan, opts)
    for who, script in [("the AM", spec.master.script), ("worker", spec.services["worker"].script)]:
        run = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "NM_HOST": "nm1", "HOME": str(tmp_path)})
        assert not mark.exists(), f"{who}'s launch script ran the path as shell:\n{script}"
        assert run.returncode != 0, f"{who}: {run.stdout}"
        if who == "the AM" and where != "with an archive":
            assert f"[subm] node nm1: no {path} there" in run.stderr, run.stderr


def test_an_am_without_a_travelling_environment_imports_the_tree_that_submitted(tmp_path):
    """Where the environment does not travel, the AM's PYTHONPATH names the folder that holds
    this very package (a source tree that is not installed works too)."""
    import submarine_py

    [folder] = build(tmp_path).master.env["PYTHONPATH"].split(":")
    assert os.path.samefile(os.path.join(folder, "submarine_py", "__init__.py"), submarine_py.__file__)
