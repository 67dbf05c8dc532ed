"""test_tensorboard_shows_what_tasks_write.py on the YARN rig: a short PyTorch DDP training and a
short TensorFlow one log their loss into SUBM_TENSORBOARD_DIR, ``tensorboard/`` in the job's
subfolder of ``shared_dir`` (in the folder the rig mounts on every node: shared_tmp_path). While
they run, ``tensorboard_url`` serves the losses; the text status shows the URL, and so does the
AM's page that YARN's tracking URL links to. The job ends SUCCEEDED when its training tasks do,
TensorBoard stopped with it.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_tensorboard_shows_what_tasks_write_on_yarn.py
"""
from __future__ import annotations

import importlib.util
import textwrap
from urllib.parse import urlparse

import pytest
import requests

from conftest import (describe_processes, processes_of, require_yarn, run_json, subm,
                      wait_for, write_job)
from test_tensorboard_shows_what_tasks_write import JOBS, PROGRAM, losses_while_running, python_for

require_yarn()

from test_jobs_run_end_to_end_on_yarn import (  # noqa: E402,F401 (apps: a fixture)
    APP_ID, FINAL_YARN_STATES, YARN, apps, rm_app, rm_proxy_url)

pytestmark = [pytest.mark.yarn,
              pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                                 reason="TensorBoard is not installed")]


@pytest.mark.parametrize("kind", [pytest.param("torch", marks=pytest.mark.torch),
                                  pytest.param("tensorflow", marks=pytest.mark.tensorflow)])
def test_tensorboard_serves_the_losses_tasks_write_while_the_job_runs_on_yarn(kind, tmp_path, shared_tmp_path, apps,
                                                                               request):
    if importlib.util.find_spec(kind) is None:
        pytest.skip(f"{kind} is not installed")
    spec, runs = JOBS[kind]
    shared_root = shared_tmp_path / "nfs"
    shared_root.mkdir()
    extra = f"shared_dir: {shared_root}\ntags: [subm-test]\n"
    files = {"tensorboard_scalars.py": PROGRAM.read_text()}
    python = python_for(kind, request)
    if python:  # the job's own environment (the AM's, its tasks', TensorBoard's), as its users' is
        extra += f"environment: {{python: {python}}}\n"
    # write_job dedents the whole text: the spec's own indentation must go before adding to it.
    job = write_job(tmp_path / "job", textwrap.dedent(spec) + extra, files=files)
    rc, out, err = subm("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    app_id = out.strip()
    assert APP_ID.match(app_id), f"--detach printed {out!r}"
    apps.append(app_id)

    def logs() -> str:
        return subm("logs", app_id, env=YARN, timeout=60)[1][-6000:]

    report, series = wait_for(lambda: losses_while_running(app_id, runs, env=YARN), timeout=300, interval=1.0,
                              what="TensorBoard to serve the tasks' losses", explain=logs)
    url = report["tensorboard_url"]
    tensorboard = next(t for t in report["tasks"] if t["role"] == "tensorboard")
    assert urlparse(url).hostname == tensorboard["host"]  # the NodeManager's host, where it runs
    for run, rows in series.items():
        assert [step for _, step, _ in rows] == list(range(len(rows))), run
        assert rows[-1][2] < rows[0][2] / 2, f"{run}: the loss did not fall: {rows}"
    assert (shared_root / app_id / "tensorboard" / runs[0]).is_dir()

    rc, text, _ = subm("status", app_id, env=YARN)
    assert f"TensorBoard: {url}" in text.splitlines()
    # YARN's tracking URL (skein's UI) links the AM's page, which links TensorBoard.
    tracking = rm_proxy_url(rm_app(app_id)["trackingUrl"])
    page = requests.get(tracking.rstrip("/") + "/pages/subm/", timeout=10).text
    assert f'<a href="{url}">' in page

    (shared_root / app_id / "done").touch()
    app = wait_for(lambda: (lambda a: a if a["state"] in FINAL_YARN_STATES else None)(rm_app(app_id)),
                   timeout=120, interval=0.5, what=f"{app_id} to end", explain=logs)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app
    rc, final, err = run_json("status", app_id, env=YARN)
    assert final["state"] == "SUCCEEDED", err
    states = {f"{t['role']}:{t['index']}": t["state"] for t in final["tasks"]}
    assert states == dict({run.replace("-", ":"): "SUCCEEDED" for run in runs}, **{"tensorboard:0": "STOPPED"})
    assert "tensorboard_url" not in final
    # The rig's containers are processes of this machine: none of the job's is left.
    wait_for(lambda: not processes_of(app_id), timeout=60, interval=0.5, what="the job's processes to end",
             explain=lambda: describe_processes(processes_of(app_id)))
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=5)
