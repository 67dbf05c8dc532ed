"""The YARN request is built whole by ``YarnBackend.request`` (the gang's containers included where
it fits at submission), so ``subm run --dry-run`` prints exactly what ``submit`` hands skein; and
one module (``backends/yarn/attempts.py``) says how many YARN attempts a job gets, names the AM's
report file and tells whether an earlier AM attempt already decided the job, for the application
spec, the AM of a later attempt and the client alike (issue 31). Pure logic: a stand-in RM and
skein client."""
from __future__ import annotations

import json

import pytest

from submarine_py.backends.yarn import attempts
from submarine_py.backends.yarn.am import main as am_main
from submarine_py.backends.yarn.client import app_logs
from submarine_py.backends.yarn.attempts import am_attempts, decided, last_left, saved_am_attempts
from submarine_py.backends.yarn.protocol import REPORT_FILE
from submarine_py.backends.yarn.protocol import GANG_ASKED_AT_SUBMISSION
from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan

pytestmark = pytest.mark.unit


def _res(mem: int, vc: int, gpu: int) -> dict:
    return {"memory": mem, "vCores": vc, "resourceInformations": {"resourceInformation": [
        {"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vc}, {"name": "yarn.io/gpu", "value": gpu}]}}


class FakeRM:
    """The RM's REST as the request and submit read it: two nodes with ``free_gpus`` each."""

    url = "http://rm:8088"
    urls = (url,)

    def active_first(self):
        return self.urls

    def __init__(self, free_gpus=(2, 2)):
        self.free_gpus = free_gpus

    def conf_value(self, key):
        return {"yarn.scheduler.minimum-allocation-mb": "1024"}.get(key)

    def nodes(self, running_only=False):
        return [{"nodeHostName": f"n{i}", "state": "RUNNING", "availableResource": _res(16384, 16, g),
                 "usedResource": _res(0, 0, 2 - g)} for i, g in enumerate(self.free_gpus)]

    running_nodes = nodes

    def scheduler(self):
        return {}

    def apps(self, tags, states, slim=False):
        return []

    def app(self, app_id):
        return {"id": app_id, "state": "ACCEPTED"}


def plan_of(workers: int, gpus: int = 1, **extra):
    return make_plan(spec_from_dict({"name": "t", **extra, "roles": {"worker": {
        "instances": workers, "command": "x", "resources": {"memory": "1 GiB", "vcores": 1, "gpus": gpus}}}}))


@pytest.fixture
def yarn(tmp_path, monkeypatch):
    """A YarnBackend on a plain (not Kerberized) cluster, its RM and skein's client stand-ins:
    ``submitted`` gets what skein was handed, with the job file as it was at that moment."""
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.backend import YarnBackend

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "yarn-site.xml").write_text("<configuration/>")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    submitted = []

    class Client:
        def submit(self, spec):
            submitted.append((spec, json.loads(open(request_of[0].job_file).read())))
            return "application_1_0001"

    request_of = []

    def make(rm):
        backend = YarnBackend()
        backend.rm = backend.rm_now = rm
        monkeypatch.setattr(backend, "_client", lambda: Client())
        return backend, request_of, submitted

    return make


def test_submit_hands_skein_the_very_spec_request_built_and_dry_run_printed_gang_included(yarn):
    backend, request_of, submitted = yarn(FakeRM((2, 2)))
    plan = plan_of(4)
    request = backend.request(plan)
    request_of.append(request)
    printed = request.describe()  # what `subm run --dry-run` prints
    # The gang fits now: the request asks for it with the application, and says so.
    assert request.gang_with_application and request.job[GANG_ASKED_AT_SUBMISSION] is True
    assert request.app_spec.services["worker"].instances == 4
    assert "asked for with the application" in printed
    before = request.app_spec.to_dict()

    assert backend.submit(request) == "application_1_0001"
    [(spec, job_file)] = submitted
    assert spec is request.app_spec and spec.to_dict() == before  # sent unchanged
    assert printed.endswith(spec.to_yaml())
    as_json = request.to_dict()  # what `subm run --dry-run --output json` prints
    assert as_json["application_spec"] == json.loads(json.dumps(before).replace(request.token, "<token>"))
    assert request.token not in json.dumps(as_json)
    # The job file the AM reads: the request's, with the moment of submission and the job's
    # secret only (the one file a job ships: it carries the token to the AM and the executors).
    assert {k: v for k, v in job_file.items() if k not in ("submitted_at", "token")} == dict(request.job)
    assert isinstance(job_file["submitted_at"], float) and job_file["token"] == request.token


def test_a_gang_that_does_not_fit_and_a_sweep_are_requested_with_no_task_container(yarn):
    backend, request_of, submitted = yarn(FakeRM((2, 1)))
    request = backend.request(plan_of(4))
    request_of.append(request)
    assert not request.gang_with_application and GANG_ASKED_AT_SUBMISSION not in request.job
    assert request.app_spec.services["worker"].instances == 0
    assert "asked for with the application" not in request.describe()
    backend.submit(request)
    [(spec, job_file)] = submitted
    assert spec.services["worker"].instances == 0 and GANG_ASKED_AT_SUBMISSION not in job_file

    sweep = plan_of(1, sweep={"metric": "loss", "trials": 2, "params": {"x": [1, 2]}, "algorithm": "grid"})
    backend, _, _ = yarn(FakeRM((2, 2)))
    assert backend.request(sweep).app_spec.services["worker"].instances == 0


class ClusterFiles:
    """The cluster's filesystem as submission uses it (``travel/webhdfs.Files``): a set of paths."""

    def __init__(self, there=()):
        from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem

        self.where = ClusterFilesystem(uri="hdfs://nn:8020", namenode_urls=("http://nn:9870",))
        self.there, self.puts = set(there), []

    def exists(self, path):
        return path in self.there

    def put(self, local, path):
        self.puts.append((open(local).read(), path))
        self.there.add(path)

    def path(self, uri):
        return uri[len(self.where.uri):]


def test_the_executor_is_kept_once_on_the_cluster_filesystem_and_every_job_names_that_copy(yarn, monkeypatch):
    """Named by its bytes under the user's folder, uploaded by the first job that lacks it, then
    localized PRIVATE (the node's cache keeps it): a job ships one file of its own, the job file."""
    from submarine_py.backends.yarn.client.app_spec import EXECUTOR_FILE, JOB_FILE
    from submarine_py.executor.bundle import bundle_source

    files = ClusterFiles()
    backend, request_of, submitted = yarn(FakeRM((2, 2)))
    monkeypatch.setattr(backend, "_cluster_files", lambda: files)
    monkeypatch.setenv("HADOOP_USER_NAME", "alice")
    for n in range(2):
        request = backend.request(plan_of(2))
        request_of[:] = [request]
        shipped = request.app_spec.services["worker"].files[EXECUTOR_FILE]
        assert shipped.source.startswith("hdfs://nn:8020/user/alice/.subm/executors/executor-")
        assert shipped.visibility == "private" and request.executor_bundle is None
        assert request.shared_executor.present is (n == 1)
        assert ("uploaded at submission" in request.describe()) is (n == 0)
        backend.submit(request)
        local = {name for name, f in request.app_spec.services["worker"].files.items() if f.source.startswith("file:")}
        assert local == {JOB_FILE}
    assert files.puts == [(bundle_source(), files.path(shipped.source))]  # once


def test_where_the_cluster_filesystem_is_not_hdfs_the_executor_travels_with_each_job(yarn):
    from submarine_py.backends.yarn.client.app_spec import EXECUTOR_FILE

    backend, request_of, submitted = yarn(FakeRM((2, 2)))  # its conf names no fs.defaultFS
    request = backend.request(plan_of(2))
    shipped = request.app_spec.services["worker"].files[EXECUTOR_FILE]
    assert request.shared_executor is None and shipped.visibility == "application"
    assert shipped.source.endswith(request.executor_bundle)


# -- attempts.py ---------------------------------------------------------------------------------

SWEEP = {"metric": "loss", "trials": 2, "params": {"x": [1, 2]}, "algorithm": "grid"}


@pytest.mark.parametrize("extra, expected", [
    ({}, 1),                                                              # the default: no restart
    ({"restart": {"policy": "gang", "max_restarts": 2}}, 2),
    ({"restart": {"policy": "never"}}, 1),
    ({"restart": {"policy": "task", "max_restarts": 0}}, 1),
    ({"restart": {"policy": "task", "max_restarts": 3}}, 2),
    ({"sweep": SWEEP}, 2),                                                # a sweep always has a second
    ({"sweep": SWEEP, "restart": {"policy": "never"}}, 2),
])
def test_the_application_spec_and_a_finished_jobs_saved_spec_give_the_same_attempts(tmp_path, extra, expected):
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.app_spec import YarnOptions, build_application_spec

    plan = plan_of(1, gpus=0, **extra)
    assert am_attempts(plan.job.restart, sweep=plan.job.sweep is not None) == expected
    assert saved_am_attempts(plan.job.to_dict()) == expected  # what the client reads back
    opts = YarnOptions(job_file="job.json", rm_urls=("http://rm:8088",))
    assert build_application_spec(plan, opts).max_attempts == expected
    assert saved_am_attempts(None) == 1 and saved_am_attempts({"restart": {"policy": "bogus"}}) == 1


def test_the_report_file_has_one_name():
    assert REPORT_FILE == "subm-report.json"
    assert am_main.REPORT_FILE is REPORT_FILE and app_logs.REPORT_FILE is REPORT_FILE


class AttemptsRM:
    def __init__(self, rows):
        self.rows = rows

    def app_attempts(self, app_id):
        return self.rows


def saved(state: str, phase: str, **spec) -> bytes:
    return json.dumps({"app_id": "application_1_1", "state": state, "phase": phase, "attempts": 1,
                       "spec": {"name": "t", **spec}}).encode()


def with_reports(monkeypatch, reports):
    """Attempts 1..n of one application, each AM's report as ``reports`` says (None: unreadable)."""
    monkeypatch.setattr(attempts, "node_log", lambda node, cid, name, **kw: reports.get(cid) if name == REPORT_FILE
                        else None)
    return AttemptsRM([{"id": i, "nodeHttpAddress": "n1:8042", "containerId": f"c{i}"}
                       for i in range(1, len(reports) + 1)])


def test_an_earlier_attempts_verdict_is_read_once_for_the_am_and_the_client(monkeypatch):
    assert decided({"phase": "DONE", "state": "FAILED"}) and decided({"phase": "FINISHING", "state": "KILLED"})
    assert not decided({"phase": "RUNNING", "state": "RUNNING"}) and not decided({"phase": "DONE"})

    # Attempt 1 decided a failure; attempt 2's AM repeats it, and the client takes it as the end.
    rm = with_reports(monkeypatch, {"c1": saved("FAILED", "DONE", restart={"policy": "gang", "max_restarts": 5}),
                                    "c2": None})
    left = last_left(rm, "application_1_1", before=2)
    assert (left.attempt, left.container, left.decided, left.repeated()) == (1, "c1", True, True)
    kind, report, lost = am_main.earlier_attempts(rm, "application_1_1", 2)
    assert (kind, report["state"], lost) == ("final", "FAILED", 1)

    # An AM lost mid-job: the next goes on from its report, counting the attempts lost since.
    rm = with_reports(monkeypatch, {"c1": saved("RUNNING", "RUNNING"), "c2": None})
    assert am_main.earlier_attempts(rm, "application_1_1", 3) == ("state", json.loads(saved("RUNNING", "RUNNING")), 2)
    rm = with_reports(monkeypatch, {"c1": None})
    assert am_main.earlier_attempts(rm, "application_1_1", 2) == (None, None, 1)


def test_a_sweep_that_failed_in_its_first_attempt_is_ended_for_the_client_with_one_restart_policy(monkeypatch):
    # A sweep's application has two YARN attempts whatever its restart section says (before,
    # the client read one from a sweep with `never` and waited for YARN's repeat).
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.backend import YarnBackend

    rm = with_reports(monkeypatch, {"c1": saved("FAILED", "DONE", restart={"policy": "never", "max_restarts": 0},
                                                sweep=SWEEP)})
    backend = YarnBackend()
    backend.rm = rm
    found = backend._decided("application_1_1")
    assert found is not None and found.state.value == "FAILED"
