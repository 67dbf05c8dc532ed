"""No traceback reaches a user: every failure is one `Error: ...` line and an exit code
(2 for bad input, 1 for the rest), in-process (CliRunner) and as a real process."""
import sys

import pytest
from click.testing import CliRunner

from conftest import subm, write_job
from submarine_py.cli import main

JOB = """\
    name: hello
    roles:
      worker: {command: "echo hi"}
"""


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result


@pytest.fixture
def no_skein(monkeypatch):
    """As if skein were not installed (the yarn extra left out)."""
    monkeypatch.setitem(sys.modules, "skein", None)


@pytest.mark.unit
@pytest.mark.parametrize("extra", [[], ["--dry-run"]])
def test_yarn_without_skein_says_what_to_install(tmp_path, no_skein, extra):
    job = write_job(tmp_path / "job", JOB)
    result = invoke("run", str(job), "--backend", "yarn", *extra)
    assert result.exit_code == 1
    assert result.output.startswith("Error: the YARN backend needs skein")
    assert "pip install 'submarine-py[yarn]'" in result.output
    assert result.output.count("\n") == 1


@pytest.mark.unit
def test_a_directory_or_a_missing_file_as_the_job_is_bad_input(tmp_path):
    result = invoke("validate", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in result.output
    result = invoke("run", str(tmp_path / "nope.yaml"), "--backend", "local")
    assert result.exit_code == 2 and result.output.startswith("Error: cannot read")


@pytest.mark.unit
def test_binary_and_empty_job_files_are_bad_input(tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    result = invoke("validate", str(tmp_path / "bin.yaml"))
    assert result.exit_code == 2 and "not UTF-8" in result.output
    (tmp_path / "empty.yaml").write_text("")
    result = invoke("validate", str(tmp_path / "empty.yaml"))
    assert result.exit_code == 2 and result.output.startswith("Error: ")


@pytest.mark.unit
def test_an_unwritable_hadoop_conf_folder_is_one_error(tmp_path):
    (tmp_path / "file").write_text("")
    result = invoke("hadoop-conf", str(tmp_path / "file" / "conf"))
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "file" in result.output


@pytest.mark.unit
def test_an_unexpected_error_is_one_line_too(monkeypatch):
    import submarine_py.client as client

    def broken(app_id):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(client, "_backend_for", broken)
    result = invoke("status", "local_x")
    assert result.exit_code == 1
    assert result.output == "Error: unexpected ZeroDivisionError: a bug (SUBM_DEBUG=1 shows the traceback)\n"


@pytest.mark.local
def test_errors_are_one_line_in_a_real_process_too(tmp_path):
    """The same, as a person sees it in a shell."""
    for args, code in [(["init", "--path", "/missing/dir/job.yaml"], 2),
                       (["init", "--name", "bad name!"], 2),
                       (["validate", str(tmp_path)], 2),
                       (["hadoop-conf", "/proc/no/such/place"], 1)]:
        rc, out, err = subm(*args, cwd=tmp_path)
        assert rc == code, (args, err)
        assert "Error: " in err and "Traceback" not in err, (args, err)
    rc, _, err = subm("-c", "pass", cwd=tmp_path)  # an unknown option: click's usage error
    assert rc == 2 and "Traceback" not in err
