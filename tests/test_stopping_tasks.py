"""Stopping tasks on the local backend: SIGTERM, then SIGKILL after timeouts.stop_grace_seconds.

Two tasks run until stopped: one exits on SIGTERM (as a task that checkpoints and leaves),
one ignores it (as TensorFlow does once its strategy is up). They are stopped twice: by a
gang restart, then at the job's end (they are untracked, so the job ends with the third).
"""
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_json, write_job

pytestmark = pytest.mark.local

TASK = """\
import os, pathlib, signal, sys, time

mode, shared = sys.argv[1], pathlib.Path(sys.argv[2])
attempt = int(os.environ["SUBM_ATTEMPT"])

def on_term(signum, frame):
    if mode == "stubborn":
        print(f"attempt {attempt}: got SIGTERM, ignoring it", flush=True)
    else:
        print(f"attempt {attempt}: got SIGTERM, exiting", flush=True)
        sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
if mode == "quitter":
    while not all((shared / f"started-{m}-{attempt}").exists() for m in ("stubborn", "polite")):
        time.sleep(0.02)
    sys.exit(3 if attempt == 0 else 0)
(shared / f"started-{mode}-{attempt}").touch()
while True:
    time.sleep(0.1)
"""


def test_a_task_ignoring_sigterm_is_killed_after_the_grace_and_one_that_exits_is_not_waited_for(
        tmp_path, no_leftovers):
    shared = tmp_path / "shared"
    shared.mkdir()
    roles = "\n".join(f"""\
          {mode}:
            resources: {{memory: 128 MiB}}
            command: python task.py {mode} {shared}
            tracked: {'true' if mode == 'quitter' else 'false'}""" for mode in ("quitter", "stubborn", "polite"))
    job = write_job(tmp_path / "job", f"""\
        name: stops
        restart: {{policy: gang, max_restarts: 1}}
        timeouts: {{stop_grace_seconds: 1}}
        files: {{task.py: task.py}}
        roles:
{roles}
    """, {"task.py": TASK})
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0 and report["state"] == "SUCCEEDED" and report["attempts"] == 2, report
    tasks = {t["role"]: t for t in report["tasks"]}

    def log(role):
        path = tasks[role]["log"]
        return open(path).read() + open(path.replace(".stdout", ".stderr")).read()

    stubborn, polite = log("stubborn"), log("polite")
    # Stopped at the gang restart (attempt 0) and at the job's end (attempt 1), each time
    # after SIGTERM: the stubborn one only by SIGKILL once the 1 s grace was over ...
    assert [f"attempt {a}: got SIGTERM, ignoring it" in stubborn for a in (0, 1)] == [True, True]
    assert stubborn.count("did not exit within the 1 s grace after SIGTERM: sent SIGKILL") == 2
    assert "exited on SIGTERM" not in stubborn
    # ... the polite one on its own, with no SIGKILL and no wait for the grace.
    assert [f"attempt {a}: got SIGTERM, exiting" in polite for a in (0, 1)] == [True, True]
    assert polite.count("the task exited on SIGTERM in") == 2
    assert "SIGKILL" not in polite
    # The report keeps how they ended: killed (137) versus exited by itself (its own code,
    # or 143 from the shell that ran its command and also got SIGTERM).
    assert tasks["stubborn"]["state"] == tasks["polite"]["state"] == "STOPPED"
    assert tasks["stubborn"]["exit_code"] == 137 and tasks["polite"]["exit_code"] in (0, 143)


def test_a_task_killed_by_a_sigkill_its_executor_did_not_send_fails_with_137_a_second_later(
        tmp_path, no_leftovers):
    # The second lets a dying machine take the executor too, whose silence then says the node was
    # lost (tests/test_node_and_container_failures_on_yarn.py); here the executor lives on.
    job = write_job(tmp_path / "job", """\
        name: killed
        restart: {max_restarts: 0}
        roles:
          worker:
            resources: {memory: 128 MiB}
            command: kill -9 $$
    """)
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1 and report["state"] == "FAILED", report
    [task] = report["tasks"]
    assert task["state"] == "FAILED" and task["exit_code"] == 137
    stderr = open(task["log"].replace(".stdout", ".stderr")).read()
    assert "the task was killed (SIGKILL) by someone else: its end is reported in 1 s" in stderr


KILL_WHILE_POLLING = """\
import os, subprocess, sys, threading, time
from submarine_py.executor import processes, proctree
processes.KILL_WAIT_SECONDS = 0.5
task = processes.TaskProcesses("sleep 60", [dict(os.environ)], ".", subprocess, proctree, 1024)
popen = task.processes[0].popen
popen._waitpid_lock.acquire()  # held, as by the Popen.poll() that a SIGTERM interrupted
killer = threading.Thread(target=task.kill, daemon=True)
killer.start()
killer.join(10)
popen._waitpid_lock.release()
print("kill() returned" if not killer.is_alive() else "kill() waits forever", flush=True)
popen.wait()
print("the task was killed" if popen.returncode == -9 else f"the task ended with {popen.returncode}")
"""


def test_killing_a_task_does_not_wait_for_the_waitpid_lock_of_the_poll_a_sigterm_interrupted(tmp_path):
    # The executor's SIGTERM handler stops the task wherever its main loop was. Inside
    # Popen.poll() that frame holds Popen's waitpid lock until the handler is done: a kill()
    # that waited for the lock left the executor orphaned, and its job's processes behind.
    # In a process of its own: kill() signals every process below the one that runs it.
    out = subprocess.run([sys.executable, "-c", KILL_WHILE_POLLING], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.stdout.splitlines() == ["kill() returned", "the task was killed"], out.stderr


LEAVING_BEFORE_KNOWING_THE_TASK = """\
import os, subprocess, time
from submarine_py.executor import proctree
proctree.become_subreaper()
# Started as start() starts a task, but not yet the executor's task: a signal came first.
shell = subprocess.Popen(["/bin/sh", "-c", "echo started; sleep 300; echo never"], stdout=subprocess.PIPE,
                         preexec_fn=proctree.dying_with_this_process())
shell.stdout.readline()
while len(proctree.descendants()) < 2:  # the shell and the sleep it forked
    time.sleep(0.01)
print(*proctree.descendants(), flush=True)
proctree.kill_everything_below()
"""


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_an_executor_leaving_on_a_signal_kills_what_it_started_even_before_it_knows_it_as_its_task(tmp_path):
    # The executor's signal handler stops its task, then kills every process below it. A
    # signal that lands inside start() finds the shell started but not yet the task: the shell
    # dies with the executor (PR_SET_PDEATHSIG), and the command it forked did not, until the
    # handler killed everything below (a CI run saw `sleep 300` outlive its killed AM).
    out = subprocess.run([sys.executable, "-c", LEAVING_BEFORE_KNOWING_THE_TASK], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if not gone(p)] == []
