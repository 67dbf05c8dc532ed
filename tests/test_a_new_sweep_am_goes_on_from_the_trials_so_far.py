"""A sweep's ApplicationMaster lost and started again (a new YARN attempt) goes on from the
trials so far: the study file in the job's shared folder, else the trials of the earlier AM's
report; finished trials are kept, running ones run again (docs/sweeps.md)."""
import pytest

from fake_containers import IdleContainers
from submarine_py.am.sweep.search import STUDY_FILE, save_trials
from submarine_py.am.sweep.master import SweepMaster
from submarine_py.jobfile.validate import spec_from_dict
from submarine_py.plan import make_plan
from submarine_py.report import JobReport, SweepReport, TrialReport
from submarine_py.states import JobState, TrialState

pytestmark = pytest.mark.unit

PLAN = make_plan(spec_from_dict({"name": "s", "roles": {"w": {"command": "c"}},
                                 "sweep": {"metric": "loss", "trials": 4, "params": {"x": [1, 2, 3, 4]},
                                           "algorithm": "grid"}}))
DONE = TrialReport(number=0, params={"x": 1}, state=TrialState.SUCCEEDED, value=5.0, container="c1")
RUNNING = TrialReport(number=1, params={"x": 2}, state=TrialState.RUNNING, container="c2")


class NoContainers(IdleContainers):
    name = "test"


def test_the_study_file_in_the_shared_folder_is_read_first(tmp_path):
    save_trials(str(tmp_path / STUDY_FILE), [DONE, RUNNING])
    am = SweepMaster(PLAN, "job", NoContainers(), shared_dir=str(tmp_path))
    am.take_over(JobReport(app_id="job", sweep=SweepReport(metric="loss", goal="minimize")), 1)
    assert am.earlier == [DONE, RUNNING]


def test_without_a_study_file_the_earlier_reports_trials_are_used(tmp_path):
    am = SweepMaster(PLAN, "job", NoContainers(), shared_dir=str(tmp_path))
    previous = JobReport(app_id="job", state=JobState.RUNNING,
                         sweep=SweepReport(metric="loss", goal="minimize", trials=(DONE, RUNNING)))
    am.take_over(JobReport.from_dict(previous.to_dict()), 1)
    assert [t.number for t in am.earlier] == [0, 1] and am.earlier[0].value == 5.0


def test_finished_trials_are_kept_and_the_rest_of_the_grid_runs(tmp_path):
    from submarine_py.am.sweep.search import Search

    search = Search(PLAN.job.sweep, [DONE, RUNNING])
    assert search.remaining() == 3  # the running one runs again, with the two never started
    asked = [search.ask("c", "h").params["x"] for _ in range(3)]
    assert sorted(asked) == [2, 3, 4]
