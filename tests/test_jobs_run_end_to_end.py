"""End to end on the local backend: real AM, executor and task processes.

Tasks are small Python scripts (no framework) that print what they see and
exit as the test tells them through their role's ``env``.
"""
import json
import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest

from conftest import job_dirs, processes_of, run_json, start_subm, subm, wait_for, write_job

pytestmark = pytest.mark.local

# A task that reports what it got, then behaves as MODE says (worker:1 is the one that fails).
TASK = """\
import json, os, pathlib, subprocess, sys, time

env = os.environ
role, index, attempt = env["SUBM_ROLE"], int(env["SUBM_INDEX"]), int(env["SUBM_ATTEMPT"])
print(f"task {role}:{index} attempt {attempt}", flush=True)
print("cwd files " + ",".join(sorted(str(p) for p in pathlib.Path('.').rglob('*') if p.is_file())), flush=True)
print("env " + json.dumps({k: v for k, v in env.items() if k.startswith("SUBM_") or k in ("GREETING", "MODE")}), flush=True)
mode = env.get("MODE", "ok")
shared = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else None
if shared:
    (shared / f"started-{role}-{index}-{attempt}").touch()

if mode == "fail-once" and attempt == 0:
    if index == 1:
        # Fail only once the other task of this attempt is up, so both logs show attempt 0.
        while not (shared / f"started-{role}-0-0").exists():
            time.sleep(0.02)
        print("failing on purpose", flush=True)
        sys.exit(3)
    time.sleep(float(env.get("HOLD_SECONDS", "0")))  # under `gang`: stopped by the restart
elif mode == "fail-always" and index == 1:
    print("failing on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
elif mode == "sleep":
    subprocess.Popen(["sleep", "300"])  # a child of the task must not survive it either
    if os.fork() == 0:  # nor a daemon that left the task's session (double fork + setsid)
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    print("ready", flush=True)
    time.sleep(300)
print("done", flush=True)
"""


def two_workers(tmp_path, mode="ok", policy="gang", max_restarts=0, hold_seconds=0):
    return write_job(tmp_path / "job", f"""\
        name: two-workers
        restart: {{policy: {policy}, max_restarts: {max_restarts}}}
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: python task.py {{{{ shared | default('') }}}}
            env: {{MODE: {mode}, GREETING: "hello world", HOLD_SECONDS: {hold_seconds}}}
        files:
          task.py: task.py
          data/input.txt: input.txt
    """, {"task.py": TASK, "input.txt": "some data\n"})


def log_text(report, role, index, stream="stdout"):
    task = next(t for t in report["tasks"] if (t["role"], t["index"]) == (role, index))
    path = task["log"] if stream == "stdout" else task["log"].replace(".stdout", "." + stream)
    return Path(path).read_text()


def headers(text):
    return [line for line in text.splitlines() if line.startswith("[subm] ")]


# -- a job that succeeds ----------------------------------------------------------------------

def test_two_workers_succeed(tmp_path, subm_home, no_leftovers):
    job = two_workers(tmp_path)
    rc, report, err = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 0, report
    assert report["app_id"].startswith("local_")
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 1 and not report["diagnostics"]
    assert set(report["timings"]) >= {"gang_ready_seconds", "total_seconds"}
    assert 0 < report["timings"]["gang_ready_seconds"] <= report["timings"]["total_seconds"]
    assert [(t["role"], t["index"], t["state"], t["exit_code"], t["restarts"]) for t in report["tasks"]] == [
        ("worker", 0, "SUCCEEDED", 0, 0), ("worker", 1, "SUCCEEDED", 0, 0)]
    job_dir = subm_home / "local" / report["app_id"]
    for t in report["tasks"]:
        assert t["host"] == "127.0.0.1"
        assert Path(t["log"]).parent == job_dir / "logs"
    # Progress for people on stderr while waiting.
    assert f"Submitted two-workers as {report['app_id']}" in err and "gang" in err

    ports = set()
    for index in (0, 1):
        out = log_text(report, "worker", index)
        # The log starts with the header line: role, index, attempt, host, command.
        first = out.splitlines()[0]
        assert first.startswith("[subm] ")
        for part in ("role=worker", f"index={index}", "attempt=1", "host=127.0.0.1", "command: python task.py"):
            assert part in first
        assert headers(log_text(report, "worker", index, "stderr"))[0] == first
        # The working directory holds the spec's files.
        assert "cwd files data/input.txt,task.py" in out
        assert (job_dir / "tasks" / f"worker-{index}" / "data" / "input.txt").read_text() == "some data\n"
        env = json.loads(re.search(r"^env (.*)$", out, re.M).group(1))
        assert env["SUBM_JOB_ID"] == report["app_id"]
        assert (env["SUBM_ROLE"], env["SUBM_INDEX"], env["SUBM_ATTEMPT"]) == ("worker", str(index), "0")
        assert env["GREETING"] == "hello world"
        cluster = json.loads(env["SUBM_CLUSTER_SPEC"])
        assert list(cluster) == ["worker"] and len(cluster["worker"]) == 2
        assert cluster["worker"][index] == f"127.0.0.1:{env['SUBM_PORT']}"
        ports.add(env["SUBM_PORT"])
        assert "done" in out
    assert len(ports) == 2

    am_log = (job_dir / "am.log").read_text()
    assert "gang ready" in am_log and "every tracked task succeeded" in am_log
    assert json.loads((job_dir / "report.json").read_text())["state"] == "SUCCEEDED"


def test_text_output_and_set_values_reach_the_command(tmp_path, subm_home):
    job = two_workers(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    rc, out, err = subm("run", str(job), "--backend", "local", "--set", f"shared={shared}")
    assert rc == 0, err
    assert re.match(r"Job two-workers \(local_\S+\) SUCCEEDED after 1 attempt in [\d.]+ s", out)
    assert re.search(r"worker:1\s+SUCCEEDED\s+0\s+0\s+127\.0\.0\.1", out)
    # --set reached the command: each task marked its start in the shared directory.
    assert sorted(p.name for p in shared.iterdir()) == ["started-worker-0-0", "started-worker-1-0"]


# -- restarts --------------------------------------------------------------------------------------

def test_a_task_failing_once_restarts_the_gang(tmp_path, subm_home, no_leftovers):
    # worker:0 holds on in its first attempt, so the restart has a running task to stop.
    job = two_workers(tmp_path, mode="fail-once", policy="gang", max_restarts=2, hold_seconds=120)
    shared = tmp_path / "shared"
    shared.mkdir()
    rc, report, _ = run_json("run", str(job), "--backend", "local", "--set", f"shared={shared}")
    no_leftovers.append(report["app_id"])
    assert rc == 0, report
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    assert [(t["state"], t["restarts"]) for t in report["tasks"]] == [("SUCCEEDED", 1), ("SUCCEEDED", 1)]
    for index in (0, 1):
        out = log_text(report, "worker", index)
        # Both tasks ran twice: SUBM_ATTEMPT 0 then 1, each attempt under its own header.
        assert re.findall(r"^task worker:\d attempt (\d)$", out, re.M) == ["0", "1"]
        # People count attempts from 1: the headers say attempt=1, attempt=2.
        assert [re.search(r"attempt=(\d)", h).group(1) for h in headers(out)] == ["1", "2"]
    assert "failing on purpose" in log_text(report, "worker", 1)
    # worker:0 was still running its first attempt when the gang restarted: it was stopped, not finished.
    attempt0 = log_text(report, "worker", 0).split("attempt=2")[0]
    assert "task worker:0 attempt 0" in attempt0 and "done" not in attempt0
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert "worker:1 failed with exit code 3 (attempt 1)" in am_log
    assert "restarting the gang: attempt 2 of at most 3" in am_log


def test_a_task_failing_always_fails_the_job(tmp_path, subm_home, no_leftovers):
    job = two_workers(tmp_path, mode="fail-always", policy="gang", max_restarts=1)
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    no_leftovers.append(report["app_id"])
    assert rc == 1
    assert report["state"] == "FAILED" and report["attempts"] == 2
    diag = report["diagnostics"]
    # The diagnostics name the log that holds the error (stderr) and quote its last lines.
    log = str(subm_home / "local" / report["app_id"] / "logs" / "worker-1.stderr")
    assert "worker:1" in diag and "exit code 3" in diag and f"its stderr: {log}" in diag
    assert diag.endswith("last lines of worker:1's stderr:\n    failing on purpose")
    failed = report["tasks"][1]
    assert (failed["role"], failed["index"], failed["state"], failed["exit_code"]) == ("worker", 1, "FAILED", 3)
    assert "failing on purpose" in log_text(report, "worker", 1, "stderr")


def test_text_output_of_a_failed_job_has_the_diagnostics(tmp_path):
    job = two_workers(tmp_path, mode="fail-always", policy="never")
    rc, out, err = subm("run", str(job), "--backend", "local")
    assert rc == 1 and "Traceback" not in err
    assert "FAILED" in out.splitlines()[0]
    assert re.search(r"^Diagnostics: worker:1 failed with exit code 3", out, re.M)


def test_task_policy_restarts_only_the_failed_task(tmp_path, subm_home, no_leftovers):
    job = two_workers(tmp_path, mode="fail-once", policy="task", max_restarts=1)
    shared = tmp_path / "shared"
    shared.mkdir()
    rc, report, _ = run_json("run", str(job), "--backend", "local", "--set", f"shared={shared}")
    no_leftovers.append(report["app_id"])
    assert rc == 0, report
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2
    tasks = {t["index"]: t for t in report["tasks"]}
    assert (tasks[0]["restarts"], tasks[1]["restarts"]) == (0, 1)
    # The healthy task ran once: a single header, a single attempt.
    assert len(headers(log_text(report, "worker", 0))) == 1
    assert re.findall(r"^task worker:0 attempt (\d)$", log_text(report, "worker", 0), re.M) == ["0"]
    assert re.findall(r"^task worker:1 attempt (\d)$", log_text(report, "worker", 1), re.M) == ["0", "1"]
    am_log = (subm_home / "local" / report["app_id"] / "am.log").read_text()
    assert "restarting worker:1 alone" in am_log


# -- gang timeout ---------------------------------------------------------------------------------

# Loaded by every Python process started with this PYTHONPATH; it hangs the executor of
# ps:0 before it can register (the executor is the only process with SUBM_EXECUTOR_ID).
HANG_EXECUTOR = """\
import os, time
if os.environ.get("SUBM_EXECUTOR_ID") and os.environ.get("SUBM_ROLE") == "ps":
    time.sleep(600)
"""


def test_gang_timeout_names_the_missing_task(tmp_path, subm_home, no_leftovers):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HANG_EXECUTOR)
    job = write_job(tmp_path / "job", """\
        name: gang-timeout
        timeouts: {gang_seconds: 2}
        roles:
          worker: {instances: 2, command: "echo never started"}
          ps: {command: sleep 600}
    """)
    env = {"PYTHONPATH": str(hook) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rc, report, _ = run_json("run", str(job), "--backend", "local", env=env)
    no_leftovers.append(report["app_id"])
    assert rc == 1
    assert report["state"] == "FAILED"
    diag = report["diagnostics"]
    assert "gang not complete within timeouts.gang_seconds (2 s)" in diag
    missing = diag.split("missing:", 1)[1]
    assert "ps:0" in missing and "worker:" not in missing
    for index in (0, 1):  # the gang never completed, so no command ran
        assert "never started" not in log_text(report, "worker", index)
    assert processes_of(report["app_id"]) == []


# -- stopping -------------------------------------------------------------------------------------

def sleeping_job(tmp_path):
    return two_workers(tmp_path, mode="sleep")


def wait_until_running(home: Path) -> str:
    """The id of the (only) job under ``home`` once both its tasks printed 'ready'."""
    def ready():
        dirs = job_dirs(home)
        if not dirs:
            return None
        logs = [dirs[0] / "logs" / f"worker-{i}.stdout" for i in (0, 1)]
        if all(p.exists() and "ready" in p.read_text() for p in logs):
            return dirs[0].name
        return None

    return wait_for(ready, timeout=60, what="both tasks to be running")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_subm_run_stops_every_task(tmp_path, subm_home, no_leftovers, sig):
    proc = start_subm("run", str(sleeping_job(tmp_path)), "--backend", "local", "--output", "json")
    try:
        app_id = wait_until_running(subm_home)
        no_leftovers.append(app_id)
        assert len(processes_of(app_id)) >= 8  # per task: executor, task (maybe a shell), sleep, daemon
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["state"] == "KILLED"
    assert {t["state"] for t in report["tasks"]} == {"KILLED"}
    assert processes_of(app_id) == []


def test_sigkill_of_subm_run_still_leaves_nothing_behind(tmp_path, subm_home, no_leftovers):
    """`subm run` cannot catch SIGKILL; its AM notices its parent died and stops every task."""
    proc = start_subm("run", str(sleeping_job(tmp_path)), "--backend", "local")
    try:
        app_id = wait_until_running(subm_home)
        no_leftovers.append(app_id)
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    report_file = subm_home / "local" / app_id / "report.json"
    wait_for(report_file.exists, timeout=60, what="the AM's final report")
    assert json.loads(report_file.read_text())["state"] == "KILLED"
    rc, report, _ = run_json("status", app_id)
    assert report["state"] == "KILLED"
    assert processes_of(app_id) == []


def test_subm_kill_from_another_process(tmp_path, subm_home, no_leftovers):
    proc = start_subm("run", str(sleeping_job(tmp_path)), "--backend", "local", "--output", "json")
    try:
        app_id = wait_until_running(subm_home)
        no_leftovers.append(app_id)
        # While it runs, status comes from the AM itself, and so does its status page.
        rc, running, _ = run_json("status", app_id)
        assert running["state"] == "RUNNING" and {t["state"] for t in running["tasks"]} == {"RUNNING"}
        with urllib.request.urlopen(running["status_url"], timeout=10) as page:
            html = page.read().decode()
        assert app_id in html and "worker" in html
        rc, jobs, _ = run_json("list")
        assert [j["app_id"] for j in jobs] == [app_id]
        rc, killed, err = run_json("kill", app_id)
        assert rc == 0, err
        assert killed["state"] == "KILLED"
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert json.loads(out)["state"] == "KILLED"
    assert processes_of(app_id) == []
    # Killing a finished job just reports it.
    rc, again, _ = run_json("kill", app_id)
    assert again["state"] == "KILLED"


# -- status, list, logs ---------------------------------------------------------------------------

def test_a_detached_job_has_status_list_and_logs(tmp_path, subm_home, no_leftovers):
    rc, out, err = subm("run", str(two_workers(tmp_path)), "--backend", "local", "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    assert re.fullmatch(r"local_\S+", app_id)

    def finished():
        rc, report, _ = run_json("status", app_id)
        return report if report["state"] in ("SUCCEEDED", "FAILED", "KILLED") else None

    report = wait_for(finished, timeout=60, what="the detached job to finish", interval=0.2)
    assert report["state"] == "SUCCEEDED" and report["app_id"] == app_id

    rc, out, _ = subm("status", app_id)
    assert rc == 0 and f"({app_id}) SUCCEEDED" in out and "worker:1" in out

    rc, jobs, _ = run_json("list", "--all")
    assert [(j["app_id"], j["name"], j["state"]) for j in jobs] == [(app_id, "two-workers", "SUCCEEDED")]
    rc, jobs, _ = run_json("list")
    assert jobs == []  # finished jobs only with --all
    rc, out, err = subm("list", "--all")
    assert rc == 0 and app_id in out and "SUCCEEDED" in out

    rc, out, err = subm("logs", app_id, "--role", "worker")
    assert rc == 0, err
    for index in (0, 1):
        assert f"==> logs/worker-{index}.stdout <==" in out
        assert f"task worker:{index} attempt 0" in out
    assert "am.log" not in out
    rc, out, _ = subm("logs", app_id, "--role", "worker", "--index", "1")
    assert "worker-1.stdout" in out and "worker-0" not in out
    rc, out, _ = subm("logs", app_id)
    assert "==> am.log <==" in out and "gang ready" in out


def test_logs_of_a_role_does_not_mix_in_roles_sharing_its_prefix(tmp_path, subm_home):
    job = write_job(tmp_path / "job", """\
        name: prefixes
        roles:
          worker: {command: echo I am the worker}
          worker-eval: {command: echo I am the evaluator}
    """)
    rc, report, _ = run_json("run", str(job), "--backend", "local")
    assert rc == 0
    rc, out, _ = subm("logs", report["app_id"], "--role", "worker")
    assert "I am the worker" in out and "I am the evaluator" not in out


@pytest.mark.parametrize("args", [["status", "local_20000101-000000_abcdef"], ["logs", "local_nope"],
                                  ["status", "nonsense"], ["kill", "local_nope"]])
def test_unknown_jobs_are_errors_without_traceback(args):
    rc, out, err = subm(*args)
    assert rc != 0 and err.startswith("Error: ") and "Traceback" not in err


def test_logs_follow_prints_until_the_job_ends(tmp_path, subm_home, no_leftovers):
    job = write_job(tmp_path / "job", """\
        name: follow
        roles:
          worker: {command: "echo first; sleep 1; echo last"}
    """)
    rc, out, err = subm("run", str(job), "--backend", "local", "--detach")
    assert rc == 0, err
    app_id = out.strip()
    no_leftovers.append(app_id)
    wait_for(lambda: (subm_home / "local" / app_id / "logs" / "worker-0.stdout").exists(), what="the log")
    rc, out, err = subm("logs", app_id, "--role", "worker", "--follow", timeout=60)
    assert rc == 0, err
    assert out.index("first") < out.index("last")


def test_the_local_backend_refuses_url_files_it_cannot_fetch(tmp_path, subm_home):
    job = write_job(tmp_path / "job", """\
        name: url
        roles:
          worker: {command: ls}
        files:
          data.csv: hdfs:///user/me/data.csv
    """)
    rc, _, err = subm("validate", str(job), "--backend", "yarn")
    assert rc == 0, err  # a URL is fine for YARN
    for command in ("validate", "run"):  # the local backend's own rule: validate says it too
        rc, _, err = subm(command, str(job), "--backend", "local")
        assert rc == 2 and err.startswith("Error: files.data.csv: the local backend"), (command, err)
    assert job_dirs(subm_home) == []
