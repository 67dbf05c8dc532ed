"""Tasks in Docker images on the local backend: real containers, real daemon.

The image is built locally (no registry is reachable): ``scripts/test-image.sh``
makes ``localhost/subm-test:bookworm`` (bash + python3) from debootstrap.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import List

import pytest

from conftest import REPO, run_json, start_subm, subm, wait_for, write_job
from submarine_py.backends.local import docker as local_docker
from submarine_py.plan import make_plan
from submarine_py.jobfile import spec_from_dict

IMAGE = "localhost/subm-test:bookworm"


def _docker_ok() -> str:
    if not shutil.which("docker"):
        return "no docker client"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker daemon (scripts/docker-up.sh starts one)"
    return ""


@pytest.fixture(scope="module")
def image() -> str:
    why = _docker_ok()
    if why:
        pytest.skip(why)
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        built = subprocess.run(["bash", str(REPO / "scripts" / "test-image.sh")], capture_output=True, text=True)
        if built.returncode != 0:
            pytest.skip(f"could not build {IMAGE}: {built.stderr.strip().splitlines()[-1:]}")
    return IMAGE


def containers_of(job_id: str) -> List[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=subm.job={job_id}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


CHECK = """
    import json, os, sys
    assert os.path.exists("/.dockerenv"), "not inside a container"
    spec = json.loads(os.environ["SUBM_CLUSTER_SPEC"])
    assert len(spec["worker"]) == 2, spec
    rank = int(os.environ["RANK"])
    assert os.environ["WORLD_SIZE"] == "2"
    assert spec["worker"][0] == os.environ["MASTER_ADDR"] + ":" + os.environ["MASTER_PORT"]
    assert open("/data/input.txt").read() == "shared data\\n"
    try:
        open("/data/written", "w")
        sys.exit("the :ro mount is writable")
    except OSError:
        pass
    print("inside", os.environ["SUBM_ROLE"], rank, "of", os.environ["WORLD_SIZE"])
"""


@pytest.mark.docker
@pytest.mark.local
def test_tasks_run_inside_the_image_with_cluster_spec_and_mounts(image, tmp_path, no_leftovers):
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("shared data\n")
    job = write_job(tmp_path / "job", f"""
        name: in-docker
        framework: pytorch
        docker: {{image: {image}, mounts: ["{data}:/data:ro"]}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: python3 check.py
        files: {{check.py: check.py}}
    """, {"check.py": CHECK})
    rc, report, err = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0, err + json.dumps(report, indent=1)
    assert report["state"] == "SUCCEEDED"
    for task in report["tasks"]:
        text = Path(task["log"]).read_text()
        assert text.startswith("[subm] job=")
        assert f"inside worker {task['index']} of 2" in text
    assert containers_of(report["app_id"]) == []


@pytest.mark.docker
@pytest.mark.local
def test_a_failing_task_exit_code_reaches_the_report(image, tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", f"""
        name: fails-in-docker
        docker: {{image: {image}}}
        restart: {{policy: never}}
        roles:
          worker:
            instances: 2
            command: "if [ $SUBM_INDEX = 1 ]; then exit 7; fi; sleep 30"
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1
    assert report["state"] == "FAILED"
    failed = [t for t in report["tasks"] if t["state"] == "FAILED"]
    assert [(t["role"], t["index"], t["exit_code"]) for t in failed] == [("worker", 1, 7)]
    assert "worker:1 failed with exit code 7" in report["diagnostics"]
    assert containers_of(report["app_id"]) == []


SLEEPER = """
    name: sleeps-in-docker
    docker: {{image: {image}}}
    roles:
      worker:
        instances: 2
        command: sleep 300
"""


def _running(app_id: str):
    rc, report, _ = run_json("status", app_id)
    tasks = report.get("tasks") or []
    return report if len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks) else None


@pytest.mark.docker
@pytest.mark.local
def test_subm_kill_leaves_no_container(image, tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", SLEEPER.format(image=image))
    rc, out, err = subm("run", str(job), "--backend", "local", "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    wait_for(lambda: _running(app_id), what="both tasks running")
    assert len(containers_of(app_id)) == 2
    rc, report, err = run_json("kill", app_id)
    assert rc == 0, err
    assert report["state"] == "KILLED"
    assert containers_of(app_id) == []


@pytest.mark.docker
@pytest.mark.local
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_subm_run_leaves_no_container(image, tmp_path, subm_home, no_leftovers, sig):
    job = write_job(tmp_path / "job", SLEEPER.format(image=image))
    proc = start_subm("run", str(job), "--backend", "local", "--output", "json")
    app_id = wait_for(lambda: next((p.name for p in (subm_home / "local").glob("local_*")), None),
                      what="the job directory")
    no_leftovers.append(app_id)
    wait_for(lambda: _running(app_id), what="both tasks running")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert json.loads(out)["state"] == "KILLED"
    assert containers_of(app_id) == []


@pytest.mark.unit
def test_docker_run_command_line_carries_job_label_host_network_mounts_and_env():
    spec = spec_from_dict({
        "name": "j", "docker": {"image": "registry.example.com/team/train:1.0", "mounts": ["/data:/data"]},
        "roles": {"worker": {"command": "python3 t.py", "resources": {"gpus": 1, "memory": "1 GiB", "vcores": 2}}},
    })
    task = make_plan(spec).tasks[0]
    argv = local_docker.run_argv(task, {"SUBM_ROLE": "worker", "SUBM_TOKEN": "secret"}, "/w", "/x/executor.py", "local_1", "n", ["3"])
    line = " ".join(argv)
    assert "--label subm.job=local_1" in line
    assert "--network host" in line
    assert "-v /data:/data:ro" in line  # mounts default to read-only
    assert "-v /w:/w:rw -w /w" in line or ("-w /w" in line and "-v /w:/w:rw" in line)
    assert "-e SUBM_ROLE=worker -e SUBM_TOKEN " in line  # the secret through docker's environment
    assert "secret" not in line
    assert '--gpus "device=3"' in line
    assert "--memory 1024m" in line and "--cpus 2" in line
    # The image's python3 runs the executor and is the task's python (it writes the wrappers).
    assert argv[-4:-1] == ["registry.example.com/team/train:1.0", "sh", "-c"]
    assert "SUBM_PY=$(command -v python3)" in argv[-1]
    assert argv[-1].endswith(f'exec "$SUBM_PY" -S {local_docker.EXECUTOR_IN_CONTAINER}')
    assert "-e SUBM_PYTHON_WRAPPER=1" in line
    no_gpu = local_docker.run_argv(task, {}, "/w", "/x/executor.py", "local_1", "n", [])
    assert "--gpus" not in no_gpu


@pytest.mark.docker
@pytest.mark.local
def test_docker_tasks_share_the_jobs_shared_dir_and_read_nested_files(image, tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", f"""
        name: shared-in-docker
        docker: {{image: {image}}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: python3 pkg/hello.py
        files: {{pkg/hello.py: hello.py, data/in.txt: in.txt}}
    """, {"hello.py": """
        import os, pathlib, time
        shared = pathlib.Path(os.environ["SUBM_SHARED_DIR"])
        data = pathlib.Path("data/in.txt").read_text().strip()
        (shared / ("from-" + os.environ["SUBM_INDEX"])).write_text(data)
        while len(list(shared.glob("from-*"))) < 2:  # each sees what the other wrote
            time.sleep(0.05)
        """, "in.txt": "nested\n"})
    rc, report, err = run_json("run", str(job), "--backend", "local", timeout=180)
    no_leftovers.append(report["app_id"])
    assert rc == 0, err + json.dumps(report, indent=1)
    shared = subm_home / "local" / report["app_id"] / "shared"
    assert {p.name: p.read_text() for p in shared.iterdir()} == {"from-0": "nested", "from-1": "nested"}
    assert containers_of(report["app_id"]) == []


@pytest.fixture(scope="module")
def image_without_python3(image) -> str:
    """The test image with python3 removed (``docker commit``, no registry)."""
    tag = "localhost/subm-test-nopython:bookworm"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0:
        name = "subm-test-make-nopython"
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "run", "--name", name, "--network", "host", image, "sh", "-c",
                        "rm -f /usr/bin/python3*"], check=True, capture_output=True)
        subprocess.run(["docker", "commit", name, tag], check=True, capture_output=True)
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    return tag


@pytest.mark.docker
@pytest.mark.local
def test_python_in_a_task_is_the_images_python3(image, tmp_path, no_leftovers):
    """The test image, like Debian's and Ubuntu's, has python3 and no python."""
    job = write_job(tmp_path / "job", f"""
        name: python-in-docker
        docker: {{image: {image}}}
        roles:
          worker:
            command: python -c "import sys; print('python is', sys.executable)"
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0, report["diagnostics"]
    out = Path(report["tasks"][0]["log"]).read_text()
    assert "python is /usr/bin/python3" in out


@pytest.mark.docker
@pytest.mark.local
@pytest.mark.parametrize("case", ["image missing", "mount refused", "no python3"])
def test_a_refused_docker_run_fails_the_job_at_once(image, image_without_python3, tmp_path, no_leftovers, case):
    """No restart can help: the job fails on the first launch, with Docker's words and what to fix."""
    img, mounts, expect = {
        "image missing": ("localhost/no-such-image:1", "[]", "image localhost/no-such-image:1 is not on the node"),
        "mount refused": (image, '["/etc/hostname:/tmp:ro"]', "docker run refused mount /etc/hostname:/tmp"),
        "no python3": (image_without_python3, "[]", f"[subm] image {image_without_python3} has no python3"),
    }[case]
    job = write_job(tmp_path / "job", f"""
        name: refused-in-docker
        docker: {{image: "{img}", mounts: {mounts}}}
        restart: {{policy: gang, max_restarts: 5}}
        roles:
          worker:
            instances: 2
            command: python3 -c "print(1)"
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1
    assert report["state"] == "FAILED"
    assert report["attempts"] == 1, report["diagnostics"]  # no restart was tried
    assert expect in report["diagnostics"]
    assert report["diagnostics"].endswith("job failed (no restart can help)")
    assert containers_of(report["app_id"]) == []


@pytest.mark.docker
@pytest.mark.local
def test_a_sweeps_trials_in_docker_report_their_metric_from_their_log_files(image, tmp_path, no_leftovers):
    pytest.importorskip("optuna")
    job = write_job(tmp_path / "job", f"""
        name: sweep-in-docker
        docker: {{image: {image}}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: >-
              python -c "import os; x = float(os.environ['SUBM_PARAM_X']);
              print('step 1', flush=True); print(f'val_loss={{(x - 2) ** 2}}')"
        sweep:
          metric: val_loss
          algorithm: grid
          parallel: 2
          params:
            x: [1, 2, 3, 4]
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local", timeout=240)
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED", err + json.dumps(report, indent=1)
    assert sorted(t["params"]["x"] for t in report["trials"]) == [1, 2, 3, 4]
    assert all(t["state"] == "SUCCEEDED" and t["value"] is not None for t in report["trials"]), report["trials"]
    assert report["best"]["params"] == {"x": 2} and report["best"]["value"] == pytest.approx(0.0)
    assert containers_of(report["app_id"]) == []


@pytest.mark.docker
@pytest.mark.local
def test_a_silent_task_in_docker_is_stopped_as_hung_quoting_what_it_printed(image, tmp_path, no_leftovers):
    job = write_job(tmp_path / "job", f"""
        name: hangs-in-docker
        docker: {{image: {image}}}
        restart: {{policy: never}}
        timeouts: {{hang_seconds: 4, stop_grace_seconds: 1}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: echo "loaded batch 7"; sleep 120
    """)
    rc, report, err = run_json("run", str(job), "--backend", "local", timeout=180)
    no_leftovers.append(report["app_id"])
    assert rc == 1, err + json.dumps(report, indent=1)
    diag = report["diagnostics"]
    assert diag.startswith("worker:0 failed with no output for") and "hung (timeouts.hang_seconds 4)" in diag, diag
    assert "loaded batch 7" in diag
    assert report["tasks"][0]["cause"] == "hung"
    assert containers_of(report["app_id"]) == []
