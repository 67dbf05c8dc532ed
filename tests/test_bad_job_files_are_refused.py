"""A corpus of malformed job files (tests/jobfiles/bad/*.yaml), each refused the same way.

Each file starts with one or more ``# expect: <text>`` lines; ``subm validate``
must exit 2, print ``Error: ...`` on stderr with every expected text, and no traceback.
"""
from pathlib import Path

import pytest

from conftest import JOBFILES, cli, job_dirs, subm

BAD = sorted((JOBFILES / "bad").glob("*.yaml"))


def expectations(path: Path):
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("# expect:"):
            break
        out.append(line[len("# expect:"):].strip())
    return out


@pytest.mark.unit
def test_the_corpus_is_large_and_every_file_says_what_it_expects():
    assert len(BAD) >= 25
    for path in BAD:
        assert expectations(path), f"{path.name} has no '# expect:' first line"


@pytest.mark.unit
@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_validate_refuses_each_bad_job_file(path):
    rc, out, err = cli("validate", str(path))
    assert rc == 2, f"exit code {rc}\nstdout:\n{out}\nstderr:\n{err}"
    assert err.startswith("Error:"), err
    assert "Traceback" not in err + out
    for text in expectations(path):
        assert text in err, f"expected {text!r} in:\n{err}"
    assert out == ""


@pytest.mark.unit
def test_every_problem_is_reported_at_once():
    rc, _, err = cli("validate", str(JOBFILES / "bad" / "multiple-errors.yaml"))
    assert rc == 2
    problem_lines = [line for line in err.splitlines() if line.startswith("  ")]
    assert len(problem_lines) == 4


@pytest.mark.unit
def test_a_missing_job_file_is_bad_input(tmp_path):
    rc, _, err = cli("validate", str(tmp_path / "nope.yaml"))
    assert rc == 2 and err.startswith("Error: ") and "cannot read" in err and "Traceback" not in err


@pytest.mark.unit
def test_a_bad_set_option_is_bad_input():
    rc, _, err = cli("validate", str(JOBFILES / "bad" / "undefined-template-variable.yaml"), "--set", "epochs")
    assert rc == 2 and err.startswith("Error: --set: expected key=value")


@pytest.mark.local
@pytest.mark.parametrize("name", ["gpus-not-a-number", "undefined-template-variable", "alias-bomb",
                                  "multiple-errors"])
def test_run_refuses_a_bad_spec_before_creating_a_job(name, subm_home):
    rc, out, err = subm("run", str(JOBFILES / "bad" / f"{name}.yaml"), "--backend", "local")
    assert rc == 2, err
    assert err.startswith("Error:") and "Traceback" not in err
    assert job_dirs(subm_home) == []
