"""`subm validate`, `subm init` and the CLI's conventions (exit codes, Error: lines), in-process."""
import json

import pytest

from conftest import cli, job_dirs, write_job

pytestmark = pytest.mark.unit

PYTORCH_JOB = """\
    name: ddp
    framework: pytorch
    restart: {policy: gang, max_restarts: 2}
    roles:
      worker:
        instances: 2
        resources: {memory: 2 GiB, vcores: 1, gpus: 0}
        command: python train.py --epochs {{ epochs | default(2) }}
        env: {OMP_NUM_THREADS: "1"}
    files:
      train.py: train.py
"""


@pytest.fixture
def ddp_job(tmp_path):
    return write_job(tmp_path / "ddp", PYTORCH_JOB, {"train.py": "print('hi')\n"})


def test_validate_prints_the_plan_with_placeholder_addresses(ddp_job):
    rc, out, err = cli("validate", str(ddp_job))
    assert rc == 0, err
    assert "OK: the job is valid." in err
    assert "Job ddp: framework pytorch" in out and "restart gang (max_restarts 2, max_cluster_restarts 10)" in out
    assert "worker:1  tracked  2 GiB, 1 vcore, 0 GPUs" in out
    assert "command: python train.py --epochs 2" in out
    for line in ("MASTER_ADDR=<worker.0.host>", "MASTER_PORT=<worker.0.port>", "WORLD_SIZE=2", "RANK=1",
                 "SUBM_ATTEMPT=0", "SUBM_JOB_ID=<app_id>", "OMP_NUM_THREADS=1"):
        assert line in out


def test_validate_json_shows_the_plan_with_set_values(ddp_job):
    rc, out, err = cli("validate", str(ddp_job), "--set", "epochs=9", "--output", "json")
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["job"]["name"] == "ddp"
    tasks = {t["id"]: t for t in plan["tasks"]}
    assert tasks["worker:1"]["command"] == "python train.py --epochs 9"
    assert tasks["worker:1"]["env"]["RANK"] == "1"
    assert json.loads(tasks["worker:0"]["env"]["SUBM_CLUSTER_SPEC"]) == {
        "worker": ["<worker.0.host>:<worker.0.port>", "<worker.1.host>:<worker.1.port>"]}


def test_validate_tensorflow_shows_tf_config(tmp_path):
    job = write_job(tmp_path, """\
        name: tf
        framework: tensorflow
        roles:
          chief: {command: python t.py}
          ps: {command: python t.py}
          tensorboard: {command: tensorboard --logdir .}
    """)
    rc, out, _ = cli("validate", str(job), "-o", "json")
    tasks = {t["id"]: t for t in json.loads(out)["tasks"]}
    assert json.loads(tasks["ps:0"]["env"]["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}
    assert "TF_CONFIG" not in tasks["tensorboard:0"]["env"]
    assert [t["tracked"] for t in tasks.values()] == [True, False, False]


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "custom"])
def test_init_writes_a_job_file_that_validates(tmp_path, framework):
    rc, _, err = cli("init", "--framework", framework, "--name", f"my-{framework}", cwd=tmp_path)
    assert rc == 0, err
    text = (tmp_path / "job.yaml").read_text()
    assert text.startswith("#") and f"name: my-{framework}" in text
    rc, out, err = cli("validate", "job.yaml", cwd=tmp_path)
    assert rc == 0, err
    assert f"framework {framework}" in out


def test_init_does_not_overwrite(tmp_path):
    (tmp_path / "job.yaml").write_text("mine\n")
    rc, _, err = cli("init", cwd=tmp_path)
    assert rc == 2 and err.startswith("Error: --path: job.yaml exists")
    assert (tmp_path / "job.yaml").read_text() == "mine\n"
    rc, _, _ = cli("init", "--force", cwd=tmp_path)
    assert rc == 0 and (tmp_path / "job.yaml").read_text() != "mine\n"


def test_run_dry_run_submits_nothing(ddp_job, subm_home):
    rc, out, err = cli("run", str(ddp_job), "--backend", "local", "--dry-run")
    assert rc == 0, err
    assert "worker:1: process" in out
    assert job_dirs(subm_home) == []


def test_run_dry_run_with_output_json_prints_the_request_as_json(ddp_job, subm_home):
    import json

    rc, out, err = cli("run", str(ddp_job), "--backend", "local", "--dry-run", "--output", "json")
    assert rc == 0, err
    request = json.loads(out)
    assert request["backend"] == "local" and [t["id"] for t in request["tasks"]] == ["worker:0", "worker:1"]
    assert job_dirs(subm_home) == []


def test_version_and_help_name_every_command():
    rc, out, _ = cli("--version")
    assert rc == 0 and out.startswith("subm, version ")
    rc, out, _ = cli("--help")
    for command in ("init", "validate", "run", "status", "list", "kill", "logs"):
        assert command in out


def test_usage_errors_exit_2(ddp_job):
    rc, _, err = cli("run", str(ddp_job), "--backend", "mesos")
    assert rc == 2 and "Error:" in err and "Traceback" not in err
