"""A failed task's diagnostics quote the error before the last lines of its stderr: the last
traceback's exception with its last frame (or, without a traceback, the last line that names an
error), found in the last 64 KiB of stderr, so that a dump printed after the traceback does not
hide it. The executor sends only the error it found and the short tail, never the 64 KiB."""
import json
import re
import subprocess
import sys

import pytest

from conftest import subm, write_job
from submarine_py.am.diagnostics import STDERR_TAIL_LINES, StderrQuote, quote_stderr
from submarine_py.executor import stderr as task_stderr

# A program that fails as programs do: an uncaught exception two calls deep, and an exit hook
# that dumps a tensor after Python has printed the traceback.
FAILS_THEN_DUMPS = """\
import atexit, sys

def dump():
    for i in range(ROWS):
        print(" ".join(f"{(i * j) % 997 / 997:.4f}" for j in range(12)), file=sys.stderr)

def load(path):
    raise FileNotFoundError(f"no checkpoint at {path}")

def main():
    print("epoch 1 loss 0.25", file=sys.stderr, flush=True)
    load("ckpt/last.pt")

atexit.register(dump)
main()
"""
ERROR = "FileNotFoundError: no checkpoint at ckpt/last.pt"


def failed_program(tmp_path, rows: int):
    """Run the program (as a task's command would run), its stderr appended to a log that an
    earlier attempt already wrote to; returns (log path, where this attempt began)."""
    script = tmp_path / "train.py"
    script.write_text(FAILS_THEN_DUMPS.replace("ROWS", str(rows)))
    log = tmp_path / "stderr"
    log.write_text("[subm] attempt 1\nValueError: an older attempt's error\n")
    start = log.stat().st_size
    with open(log, "a") as err:
        assert subprocess.run([sys.executable, str(script)], stderr=err).returncode == 1
    return log, start


# -- finding the error ---------------------------------------------------------------------

@pytest.mark.unit
def test_the_last_traceback_gives_its_exception_and_last_frame():
    lines = ["step 1", "Traceback (most recent call last):",
             '  File "train.py", line 40, in <module>', "    main()",
             '  File "train.py", line 12, in main', "    x = model(batch)", "        ^^^^^^^^^^^^",
             "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)",
             "tensor([[0.1, 0.2],", "        [0.3, 0.4]])"]
    at, error = task_stderr.find_error(lines)
    assert at == 1
    assert error == ["Traceback (most recent call last):", "  ...", '  File "train.py", line 12, in main',
                     "    x = model(batch)", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)"]


@pytest.mark.unit
def test_a_chained_exception_is_quoted_by_the_last_one():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 3, in load', "KeyError: 'w'", "",
             "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "a.py", line 9, in main', "    load()",
             "ValueError: the checkpoint lacks 'w'"]
    assert task_stderr.find_error(lines)[1][-1] == "ValueError: the checkpoint lacks 'w'"


@pytest.mark.unit
def test_a_message_of_several_lines_keeps_its_indented_lines_not_what_follows():
    lines = ["Traceback (most recent call last):", '  File "t.py", line 3, in <module>', "    m.load(sd)",
             "RuntimeError: Error(s) in loading state_dict for Net:", '\tMissing key(s) in state_dict: "w".',
             "array([[0.1, 0.2],", "       [0.3, 0.4]])"]
    assert task_stderr.find_error(lines)[1][-2:] == ["RuntimeError: Error(s) in loading state_dict for Net:",
                                                  '\tMissing key(s) in state_dict: "w".']


@pytest.mark.unit
@pytest.mark.parametrize("lines, said", [
    (["epoch 3", "bash: line 1: trian.py: command not found", "0.1 0.2"], "bash: line 1: trian.py: command not found"),
    (["epoch 3", "Killed"], "Killed"),
    (["NCCL WARN ok", "Fatal Python error: Segmentation fault", "", "Current thread 0x1 (most recent call first):",
      '  File "x.py", line 3 in f'], "Fatal Python error: Segmentation fault"),
    (["a ValueError: early", "Traceback (most recent call last):", '  File "t.py", line 3, in <module>'],
     "a ValueError: early"),  # a traceback cut off before its exception: the last error line instead
    (['  File "t.py", line 3', "    foo(", "       ^", "SyntaxError: '(' was never closed"],
     "SyntaxError: '(' was never closed"),
])
def test_without_a_complete_traceback_the_last_line_that_names_an_error(lines, said):
    assert task_stderr.find_error(lines)[1] == [said]


@pytest.mark.unit
def test_a_stream_that_names_no_error_gives_nothing():
    assert task_stderr.find_error(["loss 0.3", "loss 0.2", "0.5 0.25"]) == (3, [])
    assert task_stderr.find_error([]) == (0, [])


@pytest.mark.unit
def test_lines_that_only_inform_or_warn_are_no_error():
    """As TensorFlow starts (glog's I and W lines), and Python's warnings: what ended the task
    here is a ``sys.exit("...")`` message, the last line, which names no error."""
    lines = ["I0000 00:00:1795553107.943104   25286 port.cc:153] oneDNN custom operations are on. You may see "
             "slightly different numerical results due to floating-point round-off errors.",
             "W0000 00:00:1795553108.1 1 grpc.cc:12] connection failed, retrying",
             "[W socket.cpp:663] [c10d] The client socket has failed to connect",
             "2026-11-24 10:00:00 WARNING root: the last batch failed",
             "train.py:3: UserWarning: this will be an Error in the future",
             "worker 1 gives up"]
    assert task_stderr.find_error(lines) == (len(lines), [])
    assert quote_stderr("\n".join(lines)).summary() == "last stderr line: worker 1 gives up"


@pytest.mark.unit
def test_a_huge_exception_line_is_cut():
    at, error = task_stderr.find_error(["ValueError: " + "9" * 100_000])
    assert len(error[0]) <= task_stderr.LINE_CHARS + 4


# -- what the executor sends and the AM quotes -----------------------------------------------

@pytest.mark.local  # runs a real Python program
def test_a_dump_after_the_traceback_does_not_hide_the_error(tmp_path):
    log, start = failed_program(tmp_path, rows=500)  # 42 KB of numbers after the traceback
    sent = task_stderr.stderr_tail(str(log), start)
    assert len(sent.encode()) < 4096  # the error and the short tail, not the 64 KiB searched
    said = quote_stderr(sent)
    assert said.error[0] == "Traceback (most recent call last):" and said.error[-1] == ERROR
    assert re.fullmatch(r'  File ".*train\.py", line 8, in load', said.error[-3])
    assert said.error[-2] == '    raise FileNotFoundError(f"no checkpoint at {path}")'
    assert len(said.tail) == STDERR_TAIL_LINES and said.tail[-1].startswith("0.0000 ")
    assert said.summary() == f'error: {ERROR} ({said.error[-3].strip()})'
    quoted = said.quoted("worker:1").splitlines()
    assert quoted[0] == "the error in worker:1's stderr:" and quoted[len(said.error)] == f"    {ERROR}"
    assert quoted[len(said.error) + 1] == "last lines of worker:1's stderr:"
    # What the executor keeps of a process's stderr where a task has several (the last 64 KiB
    # of its pipe), and what the local backend reads itself under Docker: the same quote.
    assert task_stderr.stderr_report(log.read_text()[start:]) == sent
    assert quote_stderr(log.read_text()[start:]) == said


@pytest.mark.local
def test_the_error_is_looked_for_in_the_last_64_KiB_only(tmp_path):
    log, start = failed_program(tmp_path, rows=1000)  # 84 KB of numbers after the traceback
    said = quote_stderr(task_stderr.stderr_tail(str(log), start))
    assert said.error == () and len(said.tail) == STDERR_TAIL_LINES
    assert said.summary() == f"last stderr line: {said.tail[-1]}"
    assert task_stderr.ERROR_SEARCH_BYTES == 64 * 1024


@pytest.mark.unit
def test_a_traceback_that_begins_before_the_last_lines_is_sent_whole(tmp_path):
    """Its header before the last 20 lines, its exception among them: the executor sends the
    error first all the same, and the AM finds the same error in what it sent."""
    frames = [f'  File "lib.py", line {n}, in f{n}\n    f{n + 1}()\n' for n in range(30)]
    log = tmp_path / "stderr"
    log.write_text("Traceback (most recent call last):\n" + "".join(frames) + "RecursionError: too deep\n")
    sent = task_stderr.stderr_tail(str(log), 0)
    assert sent.splitlines()[:5] == ["Traceback (most recent call last):", "  ...", '  File "lib.py", line 29, in f29',
                                     "    f30()", "RecursionError: too deep"]
    assert sent.splitlines()[5] == task_stderr.SKIPPED
    said = quote_stderr(sent)
    assert said.error == tuple(sent.splitlines()[:5]) and said.tail[-1] == "RecursionError: too deep"


@pytest.mark.unit
def test_the_error_is_quoted_first_even_when_it_ends_the_stream():
    lines = ["noise", "Traceback (most recent call last):", '  File "t.py", line 1, in <module>', "ValueError: bad"]
    said = quote_stderr("\n".join(lines))
    assert said.error == tuple(lines[1:]) and said.tail == tuple(lines)
    assert said.quoted("w:0").startswith("the error in w:0's stderr:\n    Traceback")
    # A stream that is its error alone is quoted once.
    assert quote_stderr("ValueError: bad").quoted("w:0") == "last lines of w:0's stderr:\n    ValueError: bad"
    assert StderrQuote().summary() == "" and StderrQuote().quoted("w:0") == ""


# -- where people read it --------------------------------------------------------------------

@pytest.mark.local
def test_the_report_the_progress_and_status_show_the_error_first(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: dumps
        roles:
          worker: {command: python train.py}
        files: {train.py: train.py}
    """, {"train.py": FAILS_THEN_DUMPS.replace("ROWS", "300")})
    rc, out, err = subm("run", str(job), "--backend", "local", "--output", "json")
    report = json.loads(out)
    no_leftovers.append(report["app_id"])
    assert rc == 1 and report["state"] == "FAILED"
    diagnostics = report["diagnostics"].splitlines()
    assert diagnostics[0].startswith("worker:0 failed with exit code 1 (attempt 1); its stderr: ")
    assert diagnostics[1] == "the error in worker:0's stderr:"
    assert diagnostics[2:4] == ["    Traceback (most recent call last):", "      ..."]
    assert diagnostics[6] == f"    {ERROR}"
    assert diagnostics[7] == "last lines of worker:0's stderr:" and diagnostics[-1].startswith("    0.0000 ")
    # The progress line of the failure names the error, where it was raised.
    failed = next(line for line in err.splitlines() if "AM: worker:0 failed" in line)
    assert re.search(rf'; error: {ERROR} \(File ".*train\.py", line 8, in load\)$', failed), failed
    rc, status, _ = subm("status", report["app_id"])
    assert rc == 0 and "the error in worker:0's stderr:\n" in status and f"    {ERROR}\n" in status
