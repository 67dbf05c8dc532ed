"""Hostile input and the job's secret on a real YARN: what the NodeManagers serve, leftovers,
hostile paths, big logs.

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_hostile_input_is_refused_on_yarn.py

Tests that look for processes or files assume the rig's nodes run on this machine.
"""
from __future__ import annotations

import glob
import html
import json
import os
import re
import secrets
import signal
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import requests

from conftest import (YARN_CONF_DIR, describe_processes, preinstalled_python, processes_of, run_json, start_subm, subm,
                      wait_for, write_job)
from test_jobs_run_end_to_end_on_yarn import (  # noqa: F401 (apps: a fixture)
    RM, YARN, apps, detach, nm_urls, rm_app, rm_get, running_tasks, status, wait_final)

from submarine_py.backends.yarn.hadoop import addresses  # where the NameNodes are

pytestmark = pytest.mark.yarn


def served_by_nodemanagers(app_id: str, user: str) -> Dict[str, str]:
    """Everything any NodeManager serves about the application's containers, without
    credentials: ``{url: text}`` (REST listings and files, the web UI's pages and files)."""
    out: Dict[str, str] = {}

    def get(url: str, **kw) -> Optional[requests.Response]:
        resp = requests.get(url, timeout=20, **kw)
        out[url] = resp.text
        return resp

    for node in nm_urls():
        app = requests.get(f"{node}/ws/v1/node/apps/{app_id}", headers={"Accept": "application/json"}, timeout=10)
        if app.status_code != 200:
            continue
        out[app.url] = app.text
        for cid in (app.json().get("app") or {}).get("containerids") or []:
            get(f"{node}/ws/v1/node/containers/{cid}", headers={"Accept": "application/json"})
            get(f"{node}/node/container/{cid}")
            listing = get(f"{node}/ws/v1/node/containers/{cid}/logs", headers={"Accept": "application/json"})
            files = re.findall(r'"fileName"\s*:\s*"([^"]+)"', listing.text)
            assert files, f"{node} lists no log file for {cid}: {listing.text[:300]}"
            page = get(f"{node}/node/containerlogs/{cid}/{user}")
            files += re.findall(rf"/node/containerlogs/{cid}/{user}/([^/?\"]+)", page.text)
            for name in sorted(set(files)):
                get(f"{node}/ws/v1/node/containers/{cid}/logs/{name}")
                get(f"{node}/node/containerlogs/{cid}/{user}/{name}/?start=0")
    return out


def staged_token(app_id: str, user: str) -> str:
    """The job's secret, from the job file the client gave skein, which staged it on HDFS for
    the application (``/user/<user>/.skein/<app_id>/<folder>/job.json``, there while the
    application runs), read through the NameNode's WebHDFS: whatever the rig's nodes share
    with this machine, isolated ones too. Fails the test where it is not found."""
    staging = f"/user/{user}/.skein/{app_id}"
    answers = {}
    for namenode in addresses.from_conf(YARN_CONF_DIR).namenode_urls:  # HA: the active one answers
        def webhdfs(path: str, op: str) -> requests.Response:
            return requests.get(f"{namenode}/webhdfs/v1{path}", params={"op": op, "user.name": user}, timeout=20)

        listing = webhdfs(staging, "LISTSTATUS")
        if listing.status_code != 200:
            answers[namenode] = f"{listing.status_code} {listing.text[:300]}"
            continue
        found = []
        for entry in listing.json()["FileStatuses"]["FileStatus"]:
            if entry["type"] == "DIRECTORY":
                job_file = webhdfs(f"{staging}/{entry['pathSuffix']}/job.json", "OPEN")
                if job_file.status_code == 200:
                    found.append(job_file.json()["token"])
        assert len(found) == 1, f"{namenode}: not one job.json with a token in {staging}: {listing.text[:1000]}"
        assert re.fullmatch(r"[0-9a-f]{64}", found[0]), found[0]
        return found[0]
    pytest.fail(f"no NameNode lists {staging}: {answers}")


# -- the AM's secret -------------------------------------------------------------------------

def test_nothing_the_nodemanagers_serve_drives_the_am_or_shows_a_task_environment(tmp_path, apps):
    secret_value = "role-secret-" + secrets.token_hex(8)
    job = write_job(tmp_path, f"""\
        name: secret-probe
        roles:
          worker:
            instances: 2
            resources: {{memory: 256 MiB}}
            command: echo started; sleep 300
            env: {{DB_PASSWORD: {secret_value}}}
    """)
    app_id = detach(job, apps)
    report = wait_for(lambda: running_tasks(app_id, 2), timeout=180, what="both tasks running", interval=0.5)
    user = rm_app(app_id)["user"]
    token = staged_token(app_id, user)
    served = served_by_nodemanagers(app_id, user)
    assert any("launch_container.sh" in url for url in served)
    everything = "\n".join(served.values())
    everything += "\n" + html.unescape(everything)
    assert secret_value not in everything, [u for u, t in served.items() if secret_value in t]
    assert token not in everything, [u for u, t in served.items() if token in t]
    # The AM's own open pages (through the RM's proxy) show no task environment either.
    proxy = f"{RM}/proxy/{app_id}/pages/subm"
    for path in ("/v1/status", "/", "/v1/am"):
        assert secret_value not in requests.get(proxy + path, timeout=10).text

    # Anything found in those files, tried as the job's secret, is refused.
    am = report["status_url"]
    words = set(re.findall(r"[A-Za-z0-9_+/=.-]{16,}", everything)) | {""}
    bogus = {"executor": "nobody", "attempt": 0, "exit_code": 3}
    for word in sorted(words):
        resp = requests.post(f"{am}/v1/exit", json=bogus, headers={"Authorization": f"Bearer {word}"}, timeout=10)
        assert resp.status_code == 401, f"the AM accepted {word!r} as its secret"
    # And the check itself works: the real secret is accepted (for a harmless call).
    ok = requests.post(f"{am}/v1/started", json={"executor": "nobody"},
                       headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert ok.status_code == 200, ok.text
    after = status(app_id)
    assert [t["state"] for t in after["tasks"]] == ["RUNNING", "RUNNING"] and after["attempts"] == 1
    rc, _, err = subm("kill", app_id, env=YARN)
    assert rc in (0, 1), err


# -- leftovers -------------------------------------------------------------------------------

ESCAPING_TASK = """\
    name: escaper
    roles:
      worker:
        instances: 2
        resources: {memory: 256 MiB}
        command: setsid sh -c 'trap "" TERM; while :; do sleep 1; done' & echo ready; wait
"""


def escaped_and_running(app_id: str) -> Optional[List[int]]:
    pids = processes_of(app_id)
    return pids if len([p for p in pids if "trap" in describe_processes([p])]) >= 2 else None


def test_subm_kill_leaves_no_process_that_left_its_group_and_ignores_sigterm(tmp_path, apps):
    app_id = detach(write_job(tmp_path, ESCAPING_TASK), apps)
    wait_for(lambda: escaped_and_running(app_id), timeout=180, what="the escaped processes", interval=0.5)
    rc, report, err = run_json("kill", app_id, env=YARN)
    assert report["state"] == "KILLED", err
    assert rm_app(app_id)["finalStatus"] == "KILLED"
    # The report says what became of each task, though YARN ended the AM.
    assert [(t["role"], t["state"]) for t in report["tasks"]] == [("worker", "KILLED")] * 2
    wait_for(lambda: not processes_of(app_id), timeout=60, what="no process of the job left",
             interval=0.5)


def test_sigterm_to_subm_run_leaves_no_process_of_the_job(tmp_path):
    proc = start_subm("run", str(write_job(tmp_path, ESCAPING_TASK)), "--backend", "yarn", "--output", "json",
                      env=YARN)
    app_id = None
    try:
        def submitted() -> Optional[str]:
            ids = [a["id"] for a in (rm_get("/ws/v1/cluster/apps", states="RUNNING,ACCEPTED").get("apps") or {})
                   .get("app", []) if a["name"] == "escaper"]
            return ids[0] if ids else None

        app_id = wait_for(submitted, timeout=120, what="the application", interval=0.5)
        wait_for(lambda: escaped_and_running(app_id), timeout=180, what="the escaped processes", interval=0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        if app_id and rm_app(app_id)["state"] not in ("FINISHED", "FAILED", "KILLED"):
            requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"})
    assert proc.returncode == 1 and "Traceback" not in err
    assert json.loads(out)["state"] == "KILLED"
    wait_for(lambda: not processes_of(app_id), timeout=60, what="no process of the job left", interval=0.5)


# -- hostile paths ---------------------------------------------------------------------------

def test_a_python_folder_full_of_shell_syntax_runs_nothing_in_the_container(tmp_path, shared_tmp_path, apps):
    folder = shared_tmp_path / "py$(touch pwned)`touch pwned2`"  # every node has it
    folder.mkdir()
    wrapper = folder / "python"  # an interpreter with subm (a symlink would lose the virtualenv)
    wrapper.write_text(f"#!/bin/sh\nexec {preinstalled_python()} \"$@\"\n")
    wrapper.chmod(0o755)
    job = write_job(tmp_path, f"""\
        name: hostile-python
        environment: {{python: '{folder}/python'}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: ls -a; test ! -e pwned && test ! -e pwned2
    """)
    rc, report, err = run_json("run", str(job), "--backend", "yarn", "--quiet", env=YARN, timeout=240)
    apps.append(report.get("app_id"))
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    assert not glob.glob(f"{shared_tmp_path}/pwned*") and not glob.glob("pwned*")


def test_a_missing_interpreter_full_of_shell_syntax_is_named_as_written_and_runs_nothing(
        tmp_path, shared_tmp_path, apps):
    """The launch line that says a node lacks environment.python quotes the path as data (issue
    42: inside its echo's double quotes a ``$(...)`` ran on the node)."""
    python = f"/opt/subm-absent/$(touch {shared_tmp_path}/pwned)/`touch {shared_tmp_path}/pwned2`/python3"
    job = write_job(tmp_path, f"""\
        name: hostile-absent-python
        environment: {{python: '{python}'}}
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: "true"
    """)
    rc, report, err = run_json("run", str(job), "--backend", "yarn", "--quiet", env=YARN, timeout=240)
    apps.append(report.get("app_id"))
    assert rc == 1 and report["state"] == "FAILED", (report, err)
    assert f"no {python} there" in report["diagnostics"], report["diagnostics"]
    assert not glob.glob(f"{shared_tmp_path}/pwned*")


def test_a_roles_variables_full_of_shell_syntax_reach_the_task_as_written(tmp_path, shared_tmp_path, apps):
    value = f"$(touch {shared_tmp_path}/pwned) `touch {shared_tmp_path}/pwned2` \"'\\ $HOME"
    job = write_job(tmp_path, f"""\
        name: hostile-variables
        roles:
          worker:
            resources: {{memory: 256 MiB}}
            command: printf '%s' "$HOSTILE" > {shared_tmp_path}/seen
            env: {{HOSTILE: {json.dumps(value)}}}
    """)
    rc, report, err = run_json("run", str(job), "--backend", "yarn", "--quiet", env=YARN, timeout=240)
    apps.append(report.get("app_id"))
    assert rc == 0 and report["state"] == "SUCCEEDED", f"{report.get('diagnostics')}\n{err}"
    assert (shared_tmp_path / "seen").read_text() == value
    assert not glob.glob(f"{shared_tmp_path}/pwned*")


def test_a_hostile_files_destination_is_refused_before_submission(tmp_path):
    (tmp_path / "t.py").write_text("")
    job = write_job(tmp_path, """\
        name: hostile-files
        roles: {worker: {command: "true"}}
        files: {"x$(touch pwned)": t.py}
    """)
    before = len((rm_get("/ws/v1/cluster/apps").get("apps") or {}).get("app", []))
    rc, out, err = subm("run", str(job), "--backend", "yarn", env=YARN)
    assert rc == 2 and "files.x$(touch pwned)" in err and "Traceback" not in err
    assert len((rm_get("/ws/v1/cluster/apps").get("apps") or {}).get("app", [])) == before


# -- logs --------------------------------------------------------------------------------------

def test_logs_and_follow_stream_every_line_of_a_task_in_order(tmp_path, apps):
    job = write_job(tmp_path, """\
        name: chatty
        roles:
          worker:
            resources: {memory: 256 MiB}
            command: python spew.py
        files: {spew.py: spew.py}
    """, {"spew.py": textwrap.dedent("""\
        import sys, time
        for i in range(60000):
            print("line %06d %s" % (i, "y" * 80))
            if i % 5000 == 0:
                sys.stdout.flush()
                time.sleep(0.5)
    """)})
    app_id = detach(job, apps)
    rc, followed, err = subm("logs", app_id, "--role", "worker", "--follow", env=YARN, timeout=300)
    assert rc == 0, err
    wait_final(app_id)
    rc, whole, err = subm("logs", app_id, "--role", "worker", env=YARN)
    assert rc == 0, err
    for text in (followed, whole):
        numbers = [int(m) for m in re.findall(r"^line (\d{6}) y+$", text, re.M)]
        assert numbers == list(range(60000))


# -- reports ----------------------------------------------------------------------------------

SLEEPERS = """\
    name: {name}
    roles:
      worker:
        instances: 2
        resources: {{memory: 256 MiB}}
        command: echo ready; sleep 300
"""


def am_pids(app_id: str) -> List[int]:
    """The Python AM's process of the application (the rig's nodes share this machine)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"backends.yarn.am.main" in cmdline and f"SKEIN_APPLICATION_ID={app_id}".encode() in environ:
            found.append(int(entry))
    return found


def test_list_shows_the_attempts_of_running_and_finished_jobs(tmp_path, apps):
    app_id = detach(write_job(tmp_path, SLEEPERS.format(name="listed")), apps)
    wait_for(lambda: running_tasks(app_id, 2), timeout=180, what="both tasks running", interval=0.5)
    rc, jobs, err = run_json("list", "--backend", "yarn", env=YARN)
    assert rc == 0, err
    assert [j["attempts"] for j in jobs if j["app_id"] == app_id] == [1]
    subm("kill", app_id, env=YARN)
    rc, jobs, err = run_json("list", "--all", "--backend", "yarn", env=YARN)
    assert [j["attempts"] for j in jobs if j["app_id"] == app_id] == [1]


def test_a_lost_am_still_leaves_a_report_with_the_tasks(tmp_path, apps):
    app_id = detach(write_job(tmp_path, SLEEPERS.format(name="am-lost")), apps)
    wait_for(lambda: running_tasks(app_id, 2), timeout=180, what="both tasks running", interval=0.5)
    pids = wait_for(lambda: am_pids(app_id), timeout=60, what="the AM's process")
    os.kill(pids[0], signal.SIGKILL)  # no chance to write a final report
    wait_final(app_id)
    report = status(app_id)
    assert report["state"] == "FAILED" == rm_app(app_id)["finalStatus"]
    assert [(t["role"], t["state"]) for t in report["tasks"]] == [("worker", "KILLED")] * 2
    wait_for(lambda: not processes_of(app_id), timeout=60, what="no process of the job left", interval=0.5)


def test_when_yarn_kills_the_am_container_its_log_claims_no_other_verdict(tmp_path, apps):
    """The NodeManager's SIGTERM reaches the whole AM container; YARN records FAILED (skein's
    AM died), so the AM's log must not say KILLED."""
    app_id = detach(write_job(tmp_path, SLEEPERS.format(name="am-sigterm")), apps)
    wait_for(lambda: running_tasks(app_id, 2), timeout=180, what="both tasks running", interval=0.5)
    pids = wait_for(lambda: am_pids(app_id), timeout=60, what="the AM's process")
    os.killpg(os.getpgid(pids[0]), signal.SIGTERM)  # as the NodeManager stops a container
    final = wait_final(app_id)
    rc, text, err = subm("logs", app_id, env=YARN)
    verdicts = re.findall(r"job (?:application_\S+ )?(SUCCEEDED|FAILED|KILLED)\b", text)
    yarn_says = final["finalStatus"] if final["state"] == "FINISHED" else final["state"]
    assert set(verdicts) <= {yarn_says}, (verdicts, yarn_says)
    assert "stopping every task" in text
