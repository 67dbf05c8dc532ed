"""The AM's side of GPU use: it asks tasks with GPUs to sample, keeps their figures,
flags a task idle, and shows all that in the report, the text report and the status page."""
import json
import urllib.error
import urllib.request

import pytest

from submarine_py.output import format_report, public_report
from submarine_py.plan import make_plan
from submarine_py.report import JobReport
from submarine_py.am.master import ApplicationMaster
from fake_containers import IdleContainers
from submarine_py.am.server import serve
from submarine_py.templating import render
from submarine_py.jobfile import spec_from_dict

pytestmark = pytest.mark.unit

SPEC = {"name": "gpu-job", "roles": {"worker": {"instances": 1, "command": "train",
                                                "resources": {"gpus": 2}},
                                     "ps": {"instances": 1, "command": "serve"}}}


class Quiet(IdleContainers):
    name = "fake"

    def __init__(self):
        self.launched = 0

    def launch(self, task, env):  # e0, e1, ...: their executors register when the test says
        self.launched += 1
        return f"e{self.launched - 1}"


def gang(monkeypatch, idle="60"):
    monkeypatch.setenv("SUBM_GPU_IDLE_SECONDS", idle)
    am = ApplicationMaster(make_plan(spec_from_dict(SPEC)), "local_gpu", Quiet())
    for ts in am.allocation.launches():  # the gang admitted, its executors started
        am.supervision.launch(ts)
    for i, role in enumerate(("worker", "ps")):
        am.on_register({"executor": f"e{i}", "role": role, "index": 0, "host": "127.0.0.1", "port": 4000 + i})
    return am


def samples(*utils, start=0.0, every=10.0):
    return [{"time": start + every * k, "devices": [{"id": "0", "utilization": u, "memory_used_mb": 3000,
                                                    "memory_total_mb": 16000},
                                                   {"id": "1", "utilization": u, "memory_used_mb": 1000,
                                                    "memory_total_mb": 16000}]}
            for k, u in enumerate(utils)]


def test_only_tasks_with_gpus_are_asked_to_sample(monkeypatch):
    am = gang(monkeypatch)
    runs = {ex: am.next_instructions(ex, 0, 0)[0] for ex in ("e0", "e1")}
    assert runs["e0"]["op"] == "run" and runs["e0"]["gpus"] == 2 and runs["e0"]["gpu_sample_seconds"] > 0
    assert runs["e1"]["gpus"] == 0


def test_samples_become_the_tasks_gpu_summary_in_every_view(monkeypatch):
    am = gang(monkeypatch)
    am.on_gpu({"executor": "e0", "samples": samples(40, 80)})
    report = am.report()
    worker = next(t for t in report.tasks if t.role == "worker")
    ps = next(t for t in report.tasks if t.role == "ps")
    assert worker.gpu.mean_utilization == 60.0 and worker.gpu.peak_utilization == 80
    assert worker.gpu.peak_memory_mb == 4000 and worker.gpu.idle is False
    assert ps.gpu is None
    public = public_report(report)["tasks"][0]["gpu"]
    assert public["mean_utilization"] == 60.0 and public["devices"] == ["0", "1"]
    assert JobReport.from_dict(json.loads(json.dumps(report.to_dict()))).tasks[0].gpu == worker.gpu
    text = format_report(report)
    assert "GPU MEAN/PEAK" in text and "60%/80%" in text
    html = render("status.html.j2", report=report)
    assert "60.0% / 80%" in html


def test_a_task_with_gpus_at_zero_for_the_threshold_is_flagged_once(monkeypatch):
    am = gang(monkeypatch, idle="60")
    am.on_gpu({"executor": "e0", "samples": samples(50, 0, 0, 0)})
    assert not am.report().tasks[0].gpu.idle  # 20 s at 0 %
    am.on_gpu({"executor": "e0", "samples": samples(0, 0, 0, 0, start=40)})
    am.on_gpu({"executor": "e0", "samples": samples(0, start=80)})
    report = am.report()
    worker = report.tasks[0]
    assert worker.gpu.idle and worker.gpu.idle_seconds >= 60
    flagged = [e.message for e in report.events if "0 % utilization" in e.message]
    assert flagged == ["worker:0 holds 2 GPU(s) at 0 % utilization for 60 s"]
    assert "IDLE" in format_report(report) and "at 0 % utilization" in format_report(report)


def test_gpu_samples_need_the_jobs_token(monkeypatch):
    am = gang(monkeypatch)
    server, port = serve(am, host="127.0.0.1")
    try:
        body = json.dumps({"executor": "e0", "samples": samples(30)}).encode()

        def post(token):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/gpu", data=body, method="POST")
            req.add_header("Authorization", f"Bearer {token}")
            return urllib.request.urlopen(req, timeout=10).status

        with pytest.raises(urllib.error.HTTPError) as refused:
            post("wrong")
        assert refused.value.code == 401
        assert am.report().tasks[0].gpu is None
        assert post(am.token) == 200
        assert am.report().tasks[0].gpu.samples == 1
    finally:
        server.shutdown()
