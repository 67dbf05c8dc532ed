"""A failed task's diagnostics show the error: they name the log that holds it (its stderr)
and quote that log's last lines, bounded, from the failed attempt only."""
import os
import subprocess
import sys

import pytest

from conftest import run_json, write_job
from submarine_py.executor import main as executor
from submarine_py.executor import stderr as task_stderr
from submarine_py.am.diagnostics import STDERR_TAIL_BYTES, STDERR_TAIL_LINES, quote_tail

# Prints to stdout, then a traceback-like error to stderr only; the first attempt says "early".
FAILS = """\
import os, sys
attempt = int(os.environ["SUBM_ATTEMPT"])
print("all is fine on stdout", flush=True)
print(f"noise from attempt {attempt + 1}", file=sys.stderr, flush=True)
if os.environ.get("LONG"):
    for i in range(200):
        print(f"line {i} " + "x" * 40, file=sys.stderr)
print(f"ValueError: bad input in attempt {attempt + 1}", file=sys.stderr, flush=True)
sys.exit(4)
"""


@pytest.mark.unit
def test_the_executor_reads_what_an_attempt_wrote_bounded(tmp_path):
    path = tmp_path / "stderr"
    path.write_text("[subm] header of attempt 1\nold error\n")
    start = path.stat().st_size
    with open(path, "a") as f:
        f.write("".join(f"line {i}\n" for i in range(100)))
    tail = task_stderr.stderr_tail(str(path), start)
    assert tail.splitlines() == [f"line {i}" for i in range(80, 100)]
    assert len(tail.splitlines()) == task_stderr.TAIL_LINES == STDERR_TAIL_LINES
    assert task_stderr.stderr_tail(str(path), path.stat().st_size) == ""  # nothing new: nothing quoted
    assert task_stderr.stderr_tail(str(tmp_path / "gone"), 0) is None


@pytest.mark.unit
def test_a_long_line_is_cut_to_the_byte_bound():
    quoted = quote_tail("start\n" + "y" * 10000 + "\nlast words\n")
    assert quoted.endswith("    last words")
    assert "start" not in quoted and len(quoted) <= STDERR_TAIL_BYTES + 2 * 4
    assert task_stderr.TAIL_BYTES == STDERR_TAIL_BYTES


@pytest.mark.unit
def test_the_shipped_executor_files_run_on_their_own(tmp_path):
    """As a container gets them (``subm_*.py`` side by side, nothing else): with ``python3 -S``
    the executor imports its siblings and gets as far as its missing settings."""
    import shutil

    for name, path in executor.shipped_files().items():
        shutil.copy(path, tmp_path / name)
    env = {"PATH": os.environ.get("PATH", ""), "SUBM_AM_URL": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-S", "subm_executor.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "cannot start" in out.stderr and "Traceback" not in out.stderr

def failing_job(tmp_path, **env):
    env_yaml = ", ".join(f"{k}: '{v}'" for k, v in env.items())
    return write_job(tmp_path / "job", f"""\
        name: fails
        restart: {{policy: gang, max_restarts: 1}}
        roles:
          worker:
            instances: 2
            command: "if [ $SUBM_INDEX = 1 ]; then python fail.py; else sleep 60; fi"
            env: {{{env_yaml}}}
        files: {{fail.py: fail.py}}
    """, {"fail.py": FAILS})


@pytest.mark.local
def test_local_diagnostics_quote_the_stderr_of_the_failed_attempt(tmp_path, subm_home, no_leftovers):
    rc, report, err = run_json("run", str(failing_job(tmp_path)), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1 and report["state"] == "FAILED"
    stderr_log = subm_home / "local" / report["app_id"] / "logs" / "worker-1.stderr"
    head, _, quoted = report["diagnostics"].partition("\nlast lines of worker:1's stderr:\n")
    assert head.startswith("worker:1 failed with exit code 4 (attempt 2)")
    assert f"its stderr: {stderr_log}" in head  # the log that holds the error, not .stdout
    # Only what the failed (second) attempt wrote, not attempt 1's nor the header line.
    assert quoted.splitlines() == ["    noise from attempt 2", "    ValueError: bad input in attempt 2"]
    # The progress lines already showed the error of the first attempt.
    assert "; error: ValueError: bad input in attempt 1" in err


@pytest.mark.local
def test_a_long_stderr_is_quoted_by_its_last_lines_only(tmp_path, subm_home, no_leftovers):
    rc, report, _ = run_json("run", str(failing_job(tmp_path, LONG="1")), "--backend", "local")
    no_leftovers.append(report["app_id"])
    quoted = report["diagnostics"].split("stderr:\n", 2)[-1].splitlines()
    assert len(quoted) == STDERR_TAIL_LINES
    assert quoted[-1] == "    ValueError: bad input in attempt 2"
    assert quoted[-2].startswith("    line 199 ")


@pytest.mark.local
@pytest.mark.docker
def test_in_docker_the_backend_reads_the_tail_itself(tmp_path, subm_home, no_leftovers):
    from test_tasks_run_in_docker_images import IMAGE, _docker_ok

    if _docker_ok() or subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        pytest.skip(f"needs Docker and {IMAGE}")
    job = write_job(tmp_path / "job", f"""\
        name: fails-in-docker
        docker: {{image: {IMAGE}}}
        roles:
          worker:
            command: "echo fine; echo 'it broke here' >&2; exit 5"
    """)
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1
    assert report["diagnostics"].endswith("last lines of worker:0's stderr:\n    it broke here")
    assert "worker-0.stderr" in report["diagnostics"]
