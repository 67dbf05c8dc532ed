"""Issue 32: a job that waits holds no task container, and when YARN says otherwise nobody says
"holding no task container": its report counts what the cluster still lists for it (its AM's
reading of skein's list, or the ResourceManager's count on `subm status`), and the words of the
jobs waiting behind it name the GPU it holds. Pure logic: stand-in reports and RM rows."""
from __future__ import annotations

import pytest

from submarine_py.admission import Gang, Need, Room, admit
from submarine_py.backends.yarn.capacity import room_words, waiting_gangs
from submarine_py.output import format_progress, format_report
from submarine_py.report import JobReport
from submarine_py.states import JobState, Phase

pytestmark = pytest.mark.unit


def queued(held=None) -> JobReport:
    return JobReport(app_id="application_1_0002", state=JobState.RUNNING, phase=Phase.QUEUED, total=4,
                     waiting_for="waiting for 6 GPUs: 5 free in the cluster", held_containers=held)


def test_a_queued_job_says_holding_no_task_container_only_when_the_cluster_lists_none():
    assert "Queued, holding no task container: waiting for 6 GPUs" in format_report(queued(0))
    assert "holding no task container" in format_progress(queued(None), 3.0)
    text, line = format_report(queued(1)), format_progress(queued(1), 3.0)
    assert "holding no task container" not in text and "holding no task container" not in line
    assert "still holding 1 task container (giving it back)" in text and "still holding 1" in line
    again = JobReport.from_dict(queued(2).to_dict())
    assert again.held_containers == 2 and again.public()["held_containers"] == 2


def test_subm_status_on_yarn_counts_what_the_resource_manager_says_the_waiting_job_holds():
    from submarine_py.backends.yarn.client.backend import YarnBackend

    class RM:
        def app(self, app_id):
            return {"id": app_id, "state": "RUNNING", "runningContainers": 2, "startedTime": 1000, "user": "bob",
                    "queue": "teamb"}

        def proxy_get(self, app_id, path):
            return queued(0).to_dict()  # the AM's word: none (it forgot the container)

    backend = YarnBackend.__new__(YarnBackend)
    backend.rm = RM()
    report = backend.status("application_1_0002")
    assert report.held_containers == 1
    assert "holding no task container" not in format_report(report)


def apps_with_a_waiting_holder():
    """The RM's rows: a 6-GPU gang of teama waiting (older), and a 4-GPU gang of teamb that waits
    too (progress 1 %) while the RM counts its AM and one task container."""
    head = {"id": "application_1_0001", "state": "RUNNING", "progress": 1.0, "startedTime": 10_000,
            "runningContainers": 1, "queue": "teama", "applicationTags": "submarine,subm-gang:6x1024m1c1g"}
    holder = {"id": "application_1_0007", "state": "RUNNING", "progress": 1.0, "startedTime": 20_000,
              "runningContainers": 2, "queue": "teamb", "applicationTags": "submarine,subm-gang:4x1024m1c1g"}
    return head, holder


def test_the_words_of_a_waiting_job_name_a_gpu_held_by_a_job_that_waits_itself():
    head, holder = apps_with_a_waiting_holder()
    others = waiting_gangs([head, holder], me="application_1_0001")
    assert [(g.job, len(g.holding)) for g in others] == [("application_1_0007", 1)]
    nodes = {"n0": Need(8192, 8, 2), "n1": Need(8192, 8, 2), "n2": Need(8192, 8, 1)}
    me = Gang("application_1_0001", "teama", 10.0, (Need(1024, 1, 1),) * 6)
    verdict = admit(me, Room(nodes=nodes, others=others), now=100.0)
    assert not verdict.fits
    assert "waiting for 6 GPUs: 5 free" in verdict.why
    assert "1 GPU, 1024 MiB, 1 vcores held by application_1_0007, which waits itself" in verdict.why
    assert "application_1_0007 waits while holding 1 container(s), 1 GPU(s)" in room_words(
        Room(nodes=nodes, others=others), "teama")
