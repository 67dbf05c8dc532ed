"""``tensorboard: {}`` on real jobs: a short PyTorch DDP training (``SummaryWriter``) and a
short TensorFlow one (``tf.summary``) log their loss into ``SUBM_TENSORBOARD_DIR``, and while
they run, the ``tensorboard_url`` of ``subm status --output json`` serves those losses through
TensorBoard's scalars API; the text status and the AM's page show the same URL. The job still
ends SUCCEEDED when its workers do, with TensorBoard stopped and nothing left running.

Each job runs in an environment shaped like its framework's users': the PyTorch one without
TensorFlow (conftest's ``torch_only_python``), the TensorFlow one in the project's venv.

The same on YARN: test_tensorboard_shows_what_tasks_write_on_yarn.py.
"""
import importlib.util
from pathlib import Path

import pytest
import requests

from conftest import describe_processes, processes_of, run_json, subm, wait_for, write_job
from submarine_py.procs import pid_alive

PROGRAM = Path(__file__).resolve().parent / "programs" / "tensorboard_scalars.py"
STEPS = 20
#: Each kind's job file, and the TensorBoard runs its tasks write (``<role>-<index>``).
JOBS = {
    "torch": ("""\
        name: tb-torch
        framework: pytorch
        tensorboard: {}
        roles:
          worker:
            instances: 2
            resources: {memory: 1 GiB}
            command: python tensorboard_scalars.py torch %d
        files: [tensorboard_scalars.py]
        """ % STEPS, ["worker-0", "worker-1"]),
    "tensorflow": ("""\
        name: tb-tensorflow
        framework: tensorflow
        tensorboard: {}
        roles:
          chief:
            command: python tensorboard_scalars.py tensorflow %d
            env: {TF_CPP_MIN_LOG_LEVEL: "3"}
        files: [tensorboard_scalars.py]
        """ % STEPS, ["chief-0"]),
}
#: The fixture giving the interpreter each kind's job runs (None: the one running the tests).
#: torch and TensorFlow in one process kill DDP's workers (see conftest.torch_only_python).
PYTHONS = {"torch": "torch_only_python", "tensorflow": None}


def python_for(kind: str, request: pytest.FixtureRequest):
    """The interpreter for ``kind``'s job (see PYTHONS); None for the one running the tests."""
    return request.getfixturevalue(PYTHONS[kind]) if PYTHONS[kind] else None


pytestmark = [pytest.mark.local,
              pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                                 reason="TensorBoard is not installed")]


def tensorboard_get(url: str, path: str):
    resp = requests.get(url + path, timeout=10)
    resp.raise_for_status()
    return resp.json()


def losses_while_running(app_id: str, runs, env=None):
    """Once TensorBoard serves every run's STEPS losses: (the running job's report, run -> its
    [wall time, step, loss] rows), read through the job's tensorboard_url."""
    _, report, _ = run_json("status", app_id, env=env)
    if report["state"] == "ACCEPTED":  # YARN: the AM is not up yet
        return None
    if report["state"] != "RUNNING":
        pytest.fail(f"the job ended before TensorBoard showed its losses: {report}")
    url = report.get("tensorboard_url")
    if not url:
        return None
    try:
        tags = tensorboard_get(url, "data/plugin/scalars/tags")
        if sorted(run for run, run_tags in tags.items() if "loss" in run_tags) != runs:
            return None
        series = {run: tensorboard_get(url, f"data/plugin/scalars/scalars?run={run}&tag=loss") for run in runs}
    except requests.RequestException:  # TensorBoard is still starting
        return None
    return (report, series) if all(len(rows) == STEPS for rows in series.values()) else None


@pytest.mark.parametrize("kind", [pytest.param("torch", marks=pytest.mark.torch),
                                  pytest.param("tensorflow", marks=pytest.mark.tensorflow)])
def test_tensorboard_serves_the_losses_tasks_write_while_the_job_runs(kind, tmp_path, subm_home, no_leftovers,
                                                                      request):
    if importlib.util.find_spec(kind) is None:
        pytest.skip(f"{kind} is not installed")
    spec, runs = JOBS[kind]
    job = write_job(tmp_path, spec, files={"tensorboard_scalars.py": PROGRAM.read_text()})
    # Locally a job's tasks (TensorBoard's too) run the interpreter that runs subm.
    rc, out, err = subm("run", str(job), "--backend", "local", "--detach", python=python_for(kind, request))
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    job_dir = subm_home / "local" / app_id

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((job_dir / "logs").glob("*")))

    report, series = wait_for(lambda: losses_while_running(app_id, runs), timeout=240, interval=0.5,
                              what="TensorBoard to serve the tasks' losses", explain=logs)
    url = report["tensorboard_url"]
    tensorboard = next(t for t in report["tasks"] if t["role"] == "tensorboard")
    assert url == f"http://{tensorboard['host']}:{url.rsplit(':', 1)[1]}" and not tensorboard["tracked"]
    for run, rows in series.items():
        assert [step for _, step, _ in rows] == list(range(STEPS)), run
        assert rows[-1][2] < rows[0][2] / 2, f"{run}: the loss did not fall: {rows}"
    assert (job_dir / "shared" / "tensorboard" / runs[0]).is_dir()  # SUBM_TENSORBOARD_DIR's default

    # The same URL in the text status and on the AM's page.
    rc, text, _ = subm("status", app_id)
    assert f"TensorBoard: {url}" in text.splitlines()
    page = requests.get(report["status_url"], timeout=10).text
    assert f'<a href="{url}">' in page

    # TensorBoard never holds the job up: the workers' success ends it, and stops TensorBoard.
    (job_dir / "shared" / "done").touch()

    def final():
        _, report, _ = run_json("status", app_id)
        return report if report["state"] not in ("ACCEPTED", "RUNNING") else None

    report = wait_for(final, timeout=60, interval=0.2, what="the job to end", explain=logs)
    assert report["state"] == "SUCCEEDED", report
    states = {f"{t['role']}:{t['index']}": t["state"] for t in report["tasks"]}
    assert states == dict({run.replace("-", ":"): "SUCCEEDED" for run in runs}, **{"tensorboard:0": "STOPPED"})
    assert "tensorboard_url" not in report
    # Once the AM is gone (it leaves after every executor and task), so is TensorBoard.
    am_pid = int((job_dir / "am.pid").read_text())
    wait_for(lambda: not pid_alive(am_pid), timeout=30, what="the AM to exit", explain=logs)
    left = processes_of(app_id)
    assert left == [], describe_processes(left)
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=5)
