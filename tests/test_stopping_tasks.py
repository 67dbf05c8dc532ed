"""Stopping tasks on the local backend: SIGTERM, then SIGKILL after timeouts.stop_grace_seconds.

Two tasks run until stopped: one exits on SIGTERM (as a task that checkpoints and leaves),
one ignores it (as TensorFlow does once its strategy is up). They are stopped twice: by a
gang restart, then at the job's end (they are untracked, so the job ends with the third).
"""
import pytest

from conftest import run_json, write_job

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
