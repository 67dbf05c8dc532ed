"""``tensorboard: {}`` on a job: TensorBoard runs beside it as the untracked task
``tensorboard:0``, every task finds the log folder it reads in ``SUBM_TENSORBOARD_DIR``, and its
URL is in the report (``tensorboard_url``), the text status and the AM's page while it runs. It
never decides the job: not its success (untracked), nor its failure (its own exit is said, not
restarted). Each backend refuses what it could not run, before submitting.

What TensorBoard shows of real PyTorch and TensorFlow jobs: test_tensorboard_shows_what_tasks_write.py.
"""
import pytest

from submarine_py.am.master import ApplicationMaster
from submarine_py import extras
from submarine_py.backends.local.backend import LocalBackend
from submarine_py.backends.yarn.client.backend import YarnBackend
from submarine_py.errors import SpecError
from submarine_py.jobfile import spec_from_dict
from submarine_py.output import format_report, public_report
from submarine_py.plan import TENSORBOARD_COMMAND, make_plan
from submarine_py.report import JobReport
from submarine_py.states import JobState
from submarine_py.templating import render
from test_gang_scheduling_and_restart_policies import FakeContainers

pytestmark = pytest.mark.unit

WORKERS = {"name": "tb", "framework": "pytorch", "roles": {"worker": {"instances": 2, "command": "python train.py"}}}


def job(**fields):
    return dict(WORKERS, **fields)


def problems(data, rules=None):
    with pytest.raises(SpecError) as info:
        spec_from_dict(data, rules=rules)
    return dict(info.value.problems)


# -- the job file and the plan -----------------------------------------------------------------

def test_the_field_adds_an_untracked_tensorboard_task_running_tensorboard():
    plan = make_plan(spec_from_dict(job(tensorboard={}, docker="localhost/train:1")))
    tb = plan.task("tensorboard", 0)
    assert plan.tensorboard_task is tb and not tb.tracked and tb.processes == 1
    assert tb.command == TENSORBOARD_COMMAND
    assert '--logdir "$SUBM_TENSORBOARD_DIR" --port "$SUBM_PORT" --bind_all' in tb.command
    assert tb.docker.image == "localhost/train:1"  # the job's image, as any role without its own
    assert [t.id for t in plan.tasks] == ["worker:0", "worker:1", "tensorboard:0"]


def test_the_field_with_nothing_after_the_colon_also_starts_tensorboard():
    assert spec_from_dict(job(tensorboard=None)).tensorboard is not None
    assert spec_from_dict(WORKERS).tensorboard is None and "tensorboard" not in spec_from_dict(WORKERS).roles


def test_every_task_finds_the_log_folder_in_its_environment():
    plan = make_plan(spec_from_dict(job(tensorboard={})))
    envs = plan.preview_envs(shared_dir="/jobs/app_1/shared")
    assert {e["SUBM_TENSORBOARD_DIR"] for task in envs.values() for e in task} == {"/jobs/app_1/shared/tensorboard"}
    for logdir in ("/nfs/tb/run-7", "hdfs://nn:8020/user/me/tb"):
        plan = make_plan(spec_from_dict(job(tensorboard={"logdir": logdir})))
        envs = plan.preview_envs(shared_dir=None)
        assert {e["SUBM_TENSORBOARD_DIR"] for task in envs.values() for e in task} == {logdir}


def test_without_the_field_no_task_gets_a_log_folder():
    envs = make_plan(spec_from_dict(WORKERS)).preview_envs(shared_dir="/jobs/app_1/shared")
    assert not any("SUBM_TENSORBOARD_DIR" in e for task in envs.values() for e in task)


def test_the_tensorboard_role_spells_out_its_resources_and_may_bring_its_own_command():
    spelled = job(tensorboard={}, roles=dict(WORKERS["roles"], tensorboard={
        "resources": {"memory": "4 GiB", "vcores": 2}, "node_label": "cpu", "env": {"TF_CPP_MIN_LOG_LEVEL": "3"}}))
    tb = make_plan(spec_from_dict(spelled)).task("tensorboard", 0)
    assert (tb.resources.memory_mb, tb.resources.vcores, tb.node_label) == (4096, 2, "cpu")
    assert tb.command == TENSORBOARD_COMMAND and tb.env == {"TF_CPP_MIN_LOG_LEVEL": "3"}
    own = 'tensorboard --logdir "$SUBM_TENSORBOARD_DIR" --port "$SUBM_PORT" --bind_all --samples_per_plugin scalars=0'
    spelled["roles"]["tensorboard"]["command"] = own
    assert make_plan(spec_from_dict(spelled)).task("tensorboard", 0).command == own


def test_a_tensorboard_role_without_the_field_still_needs_its_command():
    data = job(roles=dict(WORKERS["roles"], tensorboard={"resources": {"vcores": 2}}))
    assert problems(data) == {"roles.tensorboard.command": "is required"}


@pytest.mark.parametrize("tensorboard,role,where,says", [
    ({"logdir": "runs/tb"}, None, "tensorboard.logdir", "expected an absolute path (without '..') that every task"),
    ({"logdir": "/nfs/../tb"}, None, "tensorboard.logdir", "without '..'"),
    ({"logdir": "/nfs/tb", "port": 6006}, None, "tensorboard.port", "unknown field"),
    ("yes", None, "tensorboard", "expected a mapping"),
    ({}, {"instances": 2}, "roles.tensorboard.instances", "the job's TensorBoard (the tensorboard field) is one task"),
    ({}, {"tracked": True}, "roles.tensorboard.tracked", "it cannot be tracked"),
])
def test_what_the_field_refuses(tensorboard, role, where, says):
    roles = dict(WORKERS["roles"], **({"tensorboard": role} if role else {}))
    found = problems(job(tensorboard=tensorboard, roles=roles))
    assert says in found[where], found


def test_tensorboard_runs_one_process_whatever_the_framework():
    roles = {"trainer": {"command": "t"}, "tensorboard": {"processes": 2}}
    found = problems({"name": "tb", "tensorboard": {}, "roles": roles})
    assert found == {"roles.tensorboard.processes": "TensorBoard runs one process: at most 1, got 2"}


@pytest.mark.parametrize("fields", [
    {"tensorboard": {}},
    {"tensorboard": {"logdir": "hdfs://nn/tb"}},
    {"tensorboard": {}, "roles": dict(WORKERS["roles"], tensorboard={"resources": {"vcores": 2}})},
])
def test_the_spec_round_trips(fields):
    spec = spec_from_dict(job(**fields))
    assert spec_from_dict(spec.to_dict()) == spec


# -- each backend refuses what it could not run ----------------------------------------------------

def test_yarn_refuses_a_log_folder_only_one_node_would_see():
    found = problems(job(tensorboard={}), rules=YarnBackend().check)
    assert "set shared_dir" in found["tensorboard"] and "tensorboard.logdir" in found["tensorboard"]
    for fields in ({"shared_dir": "/nfs/jobs"}, {"tensorboard": {"logdir": "hdfs://nn/tb"}}):
        spec = spec_from_dict(job(**dict({"tensorboard": {}}, **fields)), rules=YarnBackend().check)
        assert spec.tensorboard is not None


def test_the_local_backend_says_what_to_install_when_tensorboard_is_missing(monkeypatch):
    real = extras.importable
    monkeypatch.setattr(extras, "importable", lambda name: name != "tensorboard" and real(name))
    found = problems(job(tensorboard={}), rules=LocalBackend().check)
    assert "TensorBoard is not installed for" in found["tensorboard"]
    assert "pip install tensorboard" in found["tensorboard"]
    # Not this interpreter's business: TensorBoard in an image, or a command of the job's own.
    for role in ({"docker": "localhost/tb:1"}, {"command": "/opt/tb/bin/tensorboard --logdir x"}):
        data = job(tensorboard={}, roles=dict(WORKERS["roles"], tensorboard=role))
        assert spec_from_dict(data, rules=LocalBackend().check).tensorboard is not None


# -- the ApplicationMaster ---------------------------------------------------------------------------

class WorkersSeeTheReport(FakeContainers):
    """Workers run until stopped; each start keeps the report as it was (``seen``). Once
    ``workers_end_when`` says so, they exit 0."""

    def __init__(self, outcome, workers_end_when=lambda am: True):
        super().__init__(outcome)
        self.seen = []
        self.workers_end_when = workers_end_when
        self.ended = set()

    def poll(self):
        ended = super().poll()
        started = [ex_id for ex_id, ex in self.executors.items() if ex["task"].role == "worker"
                   and any(run[0] == ex["task"].id for run in self.runs) and ex_id not in self.ended]
        if started and not self.seen:
            self.seen.append(self.am.report())
        if started and self.workers_end_when(self.am):
            for ex_id in started:
                self.ended.add(ex_id)
                self.am.on_exit({"executor": ex_id, "attempt": 0, "exit_code": 0})
        return ended

    def stderr_tail(self, task, executor):
        return "Traceback (most recent call last):\nModuleNotFoundError: No module named 'tensorboard'"


def run_am(spec, fake):
    am = ApplicationMaster(make_plan(spec_from_dict(spec)), "local_test", fake, shared_dir="/jobs/t/shared")
    fake.am = am
    return am.run()


def test_the_url_is_the_tensorboard_tasks_address_while_it_runs():
    fake = WorkersSeeTheReport(lambda role, index, attempt: None)
    report = run_am(job(tensorboard={}), fake)
    running = fake.seen[0]
    address = next(t.address for t in running.tasks if t.role == "tensorboard")
    assert running.tensorboard_url == f"http://{address}/"
    messages = [e.message for e in running.events]
    assert f"tensorboard:0 starts TensorBoard at http://{address}/, reading /jobs/t/shared/tensorboard" in messages
    # The job ends when the workers have succeeded; TensorBoard is stopped, its URL gone.
    assert report.state == "SUCCEEDED" and report.tensorboard_url is None
    assert {t.id: t.state for t in report.tasks}["tensorboard:0"] == "STOPPED"


def test_tensorboard_exiting_neither_fails_nor_restarts_the_job():
    spec = job(tensorboard={}, restart={"policy": "gang", "max_restarts": 2})
    tensorboard_failed = lambda am: am.job.tasks[("tensorboard", 0)].state == "FAILED"  # noqa: E731
    fake = WorkersSeeTheReport(lambda role, index, attempt: 1 if role == "tensorboard" else None,
                               workers_end_when=tensorboard_failed)
    report = run_am(spec, fake)
    assert report.state == "SUCCEEDED" and report.attempts == 1, report.diagnostics
    tb = {t.id: t for t in report.tasks}["tensorboard:0"]
    assert (tb.state, tb.exit_code, tb.restarts) == ("FAILED", 1, 0)
    assert [run[:2] for run in fake.runs if run[0] == "tensorboard:0"] == [("tensorboard:0", 0)]
    said = [e.message for e in report.events if e.message.startswith("tensorboard:0 (TensorBoard)")]
    assert said == ["tensorboard:0 (TensorBoard) exited with code 1 (attempt 1); the job goes on without it; "
                    "last stderr line: ModuleNotFoundError: No module named 'tensorboard'"]


def test_a_tensorboard_role_of_ones_own_without_the_field_is_any_untracked_role():
    plan = make_plan(spec_from_dict(job(roles=dict(WORKERS["roles"], tensorboard={"command": "tensorboard"}))))
    assert plan.tensorboard_task is None and not plan.task("tensorboard", 0).tracked


def test_the_text_status_the_json_and_the_ams_page_show_the_url():
    report = JobReport(app_id="local_1", name="tb", state=JobState.RUNNING, tensorboard_url="http://node7:41234/")
    assert "TensorBoard: http://node7:41234/" in format_report(report).splitlines()
    assert public_report(report)["tensorboard_url"] == "http://node7:41234/"
    assert JobReport.from_dict(report.to_dict()) == report
    assert '<a href="http://node7:41234/">' in render("status.html.j2", report=report)
    assert "tensorboard_url" not in public_report(JobReport(app_id="local_1"))
