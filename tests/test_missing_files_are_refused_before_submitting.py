"""A source listed under ``files:`` that cannot be shipped (missing, a broken link, a folder
holding a pipe, unreadable) is refused before anything is submitted, with exit 2 and the field
(``files.data/x.csv: ...``), on both backends: not found by a launch that fails and costs a
restart. A source that goes between validation and submission is refused the same way when
the backend submits, and nothing is left half-submitted."""
import os
from typing import Tuple

import pytest

from conftest import cli, job_dirs, write_job
from submarine_py.errors import SpecError
from submarine_py.jobfile import load_job
from submarine_py.plan import make_plan
from unprivileged import as_unprivileged, reachable_tmp_path  # noqa: F401 (a fixture)

pytestmark = pytest.mark.unit

JOB = """\
    name: reads-data
    roles:
      worker: {command: python train.py}
    files:
      train.py: train.py
      data/x.csv: SOURCE
"""


def job_with(tmp_path, source="x.csv"):
    job = write_job(tmp_path / "job", JOB.replace("SOURCE", source), {"train.py": "print('hi')\n"})
    return job, job.parent


def refused(job, *args):
    """``subm run`` on both backends (YARN's --dry-run needs no cluster to refuse) and ``subm
    validate``: each exits 2 with the one problem; returns that line."""
    lines = set()
    for command in (["run", str(job), "--backend", "local"], ["run", str(job), "--backend", "yarn", "--dry-run"],
                    ["validate", str(job)]):
        rc, out, err = cli(*command)
        assert rc == 2 and out == "", (command, out, err)
        lines.add(err.strip())
    [line] = lines
    return line


def test_a_missing_source_is_refused_naming_the_field(tmp_path, subm_home):
    job, folder = job_with(tmp_path)
    assert refused(job) == f"Error: files.data/x.csv: source {folder / 'x.csv'} does not exist"
    assert job_dirs(subm_home) == []  # no job, no AM, no restart spent


def test_a_broken_link_is_refused_naming_where_it_points(tmp_path, subm_home):
    job, folder = job_with(tmp_path)
    (folder / "x.csv").symlink_to(tmp_path / "moved-away.csv")
    assert refused(job) == (f"Error: files.data/x.csv: source {folder / 'x.csv'} is a symbolic link to "
                            f"{tmp_path / 'moved-away.csv'}, which does not exist")


def test_a_folder_holding_what_cannot_be_copied_is_refused(tmp_path, subm_home):
    job, folder = job_with(tmp_path, source="data")
    (folder / "data" / "part").mkdir(parents=True)
    (folder / "data" / "part" / "a.csv").write_text("1,2\n")
    (folder / "data" / "link.csv").symlink_to("part/a.csv")  # links are shipped as links
    assert cli("validate", str(job))[0] == 0
    os.mkfifo(folder / "data" / "part" / "feed")  # the local copy would fail at launch
    assert refused(job) == (f"Error: files.data/x.csv: source folder {folder / 'data'} holds "
                            f"{folder / 'data' / 'part' / 'feed'}, which is not a regular file or a folder")


def test_an_unreadable_folder_is_refused(reachable_tmp_path, subm_home):
    job, folder = job_with(reachable_tmp_path, source="data")
    # The same refusal, of a folder not there yet, here: what it imports on the way is imported
    # (the user below could not reach this interpreter's library).
    assert refused(job) == f"Error: files.data/x.csv: source {folder / 'data'} does not exist"
    locked = folder / "data" / "locked"
    locked.mkdir(parents=True)
    locked.chmod(0o600)  # no x: its files cannot be reached

    def refused_to_a_user_who_may_not_go_in() -> Tuple[bool, str]:
        return os.access(folder / "data", os.R_OK | os.X_OK), refused(job)

    reached, line = as_unprivileged(refused_to_a_user_who_may_not_go_in)
    assert reached  # the folders above are open to that user: only `locked` is not
    assert line == f"Error: files.data/x.csv: source folder {folder / 'data'} holds {locked}, a folder that is not readable"
    assert job_dirs(subm_home) == []  # nothing was submitted


# -- a source that goes between validation and submission -----------------------------------

def validated_then_gone(tmp_path, backend):
    job, folder = job_with(tmp_path)
    (folder / "x.csv").write_text("1,2\n")
    plan = make_plan(load_job(str(job), {}, rules=backend.check))
    request = backend.request(plan)
    (folder / "x.csv").unlink()
    return request, folder


def test_locally_a_source_gone_since_validation_is_refused_when_submitting(tmp_path, subm_home):
    from submarine_py.backends.local.backend import LocalBackend

    backend = LocalBackend()
    request, folder = validated_then_gone(tmp_path, backend)
    with pytest.raises(SpecError) as refusal:
        backend.submit(request)
    assert str(refusal.value) == f"files.data/x.csv: source {folder / 'x.csv'} does not exist"
    assert refusal.value.exit_code == 2 and job_dirs(subm_home) == []  # no AM started


def test_on_yarn_a_source_gone_since_validation_is_refused_when_packing(tmp_path, monkeypatch):
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.backend import YarnBackend

    class NoCluster:  # the request names the RM and asks for its nodes; nothing else is needed
        url = "http://rm.invalid:8088"
        urls = (url,)

        def active_first(self):
            return self.urls

        def running_nodes(self):
            return []

    backend = YarnBackend()
    backend.__dict__["rm"] = NoCluster()
    request, folder = validated_then_gone(tmp_path, backend)
    monkeypatch.setattr(backend, "_client", lambda: pytest.fail("submitted to YARN"))
    with pytest.raises(SpecError) as refusal:
        backend.submit(request)
    assert str(refusal.value) == f"files.data/x.csv: source {folder / 'x.csv'} does not exist"
    assert not os.path.exists(os.path.dirname(request.job_file))  # the staging folder is gone too
