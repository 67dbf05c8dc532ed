"""The YARN backend against a real ResourceManager and NodeManager.

Every test runs ``subm ... --backend yarn`` as a real process and checks what YARN
itself says (RM and NM REST APIs), not only what ``subm`` reports. The cluster is
the one ``HADOOP_CONF_DIR`` names; ``scripts/rig.sh up DIR`` starts one
whose node offers 16 GiB, 16 vcores and 4 ``yarn.io/gpu``. Job files are in
``tests/yarn_jobs/``. Some jobs wait for a marker file the test creates, so they
assume tasks and tests share a filesystem (true on a single-node rig).

    source /tmp/yarn-rig/env.sh && python3 -m pytest -m yarn tests/test_jobs_run_end_to_end_on_yarn.py
"""
from __future__ import annotations

import getpass
import json
import re
import secrets
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import urlparse

import pytest
import requests

from conftest import REPO, YARN_CONF_DIR, require_yarn, run_json, start_subm, subm, wait_for

RM = require_yarn()

from submarine_py.units import format_memory  # noqa: E402


pytestmark = pytest.mark.yarn

JOBS = Path(__file__).resolve().parent / "yarn_jobs"
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR}
GPU = "yarn.io/gpu"
FINAL_YARN_STATES = ("FINISHED", "FAILED", "KILLED")
APP_ID = re.compile(r"^application_\d+_\d+$")


# -- what YARN says ---------------------------------------------------------------------

def rm_get(path: str, **params: Any) -> Dict[str, Any]:
    resp = requests.get(RM + path, params=params or None, headers={"Accept": "application/json"}, timeout=10)
    resp.raise_for_status()
    return resp.json()


def rm_app(app_id: str) -> Dict[str, Any]:
    return rm_get(f"/ws/v1/cluster/apps/{app_id}")["app"]


def rm_nodes() -> List[Dict[str, Any]]:
    return ((rm_get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node")) or []


def resources(block: Optional[Dict[str, Any]]) -> Dict[str, int]:
    """``{name: value}`` of a REST ``resourceInformations`` block."""
    infos = ((block or {}).get("resourceInformations") or {}).get("resourceInformation") or []
    return {i["name"]: int(i.get("value") or 0) for i in infos}


def node_total(key: str) -> int:
    """The largest node's capacity (YARN 3.1 gives used + available, no total)."""
    return max(resources(n.get("usedResource")).get(key, 0) + resources(n.get("availableResource")).get(key, 0)
               for n in rm_nodes() if n.get("state") == "RUNNING")


def max_per_container(key: str, conf_key: Optional[str] = None) -> int:
    """What YARN grants one container at most: the configured maximum, capped by the largest node."""
    most = node_total(key)
    if conf_key:
        props = rm_get("/conf", name=conf_key).get("properties") or []
        most = min([most] + [int(p["value"]) for p in props if p.get("key") == conf_key])
    return most


def nm_urls() -> List[str]:
    return [f"http://{n['nodeHTTPAddress']}" for n in rm_nodes() if n.get("state") == "RUNNING"]


def nm_containers_of(app_id: str) -> List[Dict[str, Any]]:
    """The containers every NodeManager still lists for the application."""
    tail = "_" + app_id[len("application_"):] + "_"  # container_[e<epoch>_]<cluster>_<app>_<attempt>_<n>
    found = []
    for url in nm_urls():
        data = requests.get(f"{url}/ws/v1/node/containers", headers={"Accept": "application/json"},
                            timeout=10).json()
        found += [c for c in ((data.get("containers") or {}).get("container") or [])
                  if tail in c["id"]]
    return found


def no_running_container(app_id: str) -> bool:
    return not [c for c in nm_containers_of(app_id) if c.get("state") in ("NEW", "LOCALIZING", "RUNNING")]


def container_log(task: Dict[str, Any], name: str) -> str:
    """A task's log file through its NodeManager's REST API, without the NM's framing."""
    node, cid = split_log_url(task["log"])
    text = requests.get(f"{node}/ws/v1/node/containers/{cid}/logs/{name}", timeout=10).text
    return text.split("LogContents:\n", 1)[1].rsplit("End of LogType:", 1)[0] if "LogContents:\n" in text else text


def split_log_url(url: str):
    """``http://nm:8042/node/containerlogs/<cid>/<user>`` -> (``http://nm:8042``, ``<cid>``)."""
    node, _, rest = url.partition("/node/containerlogs/")
    return node, rest.split("/")[0]


def rm_proxy_url(tracking_url: str) -> str:
    """A tracking URL through the RM this test talks to: YARN names an RM listening on any
    loopback address (a rig's 127.0.0.x) "localhost" in the tracking URLs it hands out."""
    url, rm = urlparse(tracking_url), urlparse(RM)
    if url.hostname in ("localhost", "127.0.0.1") and url.port == rm.port:
        return url._replace(netloc=rm.netloc).geturl()
    return tracking_url


def wait_final(app_id: str, timeout: float = 120) -> Dict[str, Any]:
    return wait_for(lambda: (lambda a: a if a["state"] in FINAL_YARN_STATES else None)(rm_app(app_id)),
                    timeout=timeout, what=f"{app_id} to end", interval=0.25)


# -- running subm -------------------------------------------------------------------------

def sets(**variables: Any) -> List[str]:
    out = []
    for key, value in variables.items():
        out += ["--set", f"{key}={value}"]
    return out


def run_job(job: Path, *args: str, timeout: float = 180, **variables: Any):
    """``subm run JOB --backend yarn --output json``: (exit code, report, stderr)."""
    return run_json("run", str(job), "--backend", "yarn", "--quiet", *sets(**variables), *args,
                    env=YARN, timeout=timeout)


def detach(job: Path, apps: List[str], **variables: Any) -> str:
    rc, out, err = subm("run", str(job), "--backend", "yarn", "--detach", *sets(**variables), env=YARN)
    assert rc == 0, err
    app_id = out.strip()
    assert APP_ID.match(app_id), f"--detach printed {out!r}"
    apps.append(app_id)
    return app_id


def status(app_id: str) -> Dict[str, Any]:
    rc, report, err = run_json("status", app_id, env=YARN)
    assert rc == 0, err
    return report


def running_tasks(app_id: str, n: int) -> Optional[Dict[str, Any]]:
    report = status(app_id)
    states = [t["state"] for t in report["tasks"]]
    return report if states.count("RUNNING") == n else None


@pytest.fixture
def apps():
    """Application ids a test started; any still alive afterwards is killed through the RM."""
    started: List[str] = []
    yield started
    for app_id in started:
        try:
            if rm_app(app_id)["state"] not in FINAL_YARN_STATES:
                requests.put(f"{RM}/ws/v1/cluster/apps/{app_id}/state", json={"state": "KILLED"}, timeout=10,
                             params={"user.name": getpass.getuser()})  # clusters with simple auth want a user
        except requests.RequestException:
            pass


# -- tests ---------------------------------------------------------------------------------

@pytest.mark.torch
def test_the_pytorch_ddp_example_succeeds_on_yarn(apps):
    example = REPO / "examples" / "pytorch-ddp" / "job.yaml"
    if not example.exists():
        pytest.skip("examples/pytorch-ddp/job.yaml is not there yet")
    pytest.importorskip("torch", reason="the DDP example trains with PyTorch")
    rc, report, err = run_job(example, epochs=2)
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED"
    assert [(t["role"], t["index"], t["state"]) for t in report["tasks"]] == [
        ("worker", 0, "SUCCEEDED"), ("worker", 1, "SUCCEEDED")]
    assert rm_app(report["app_id"])["finalStatus"] == "SUCCEEDED"


def test_the_resource_manager_accounts_the_gpus_of_running_tasks(shared_tmp_path, apps):
    marker = shared_tmp_path / "go"
    # Both workers wait for the marker (or 10 minutes): on a fresh rig the node a worker lands on
    # may first unpack the travelling environment, for minutes on a loaded machine, while the
    # other worker already runs; a worker ending on its own before then would never be seen
    # beside the other.
    app_id = detach(JOBS / "wait-for-marker.yaml", apps, name="gpus", gpus=1, instances=2,
                    marker=marker, max_seconds=600)
    try:
        wait_for(lambda: running_tasks(app_id, 2), timeout=420, what="both workers running", interval=2,
                 explain=lambda: json.dumps(status(app_id).get("tasks"), indent=1))
        used_on_nodes = sum(resources(n.get("usedResource")).get(GPU, 0) for n in rm_nodes())
        app = rm_app(app_id)
        used_by_app = resources((app["resourceInfo"]["resourceUsagesByPartition"][0])["used"]).get(GPU, 0)
    finally:
        marker.touch()
    assert used_on_nodes >= 2, "the nodes' usedResource shows fewer yarn.io/gpu than the job holds"
    assert used_by_app == 2, "each of the 2 workers holds 1 yarn.io/gpu; the AM none"
    assert wait_final(app_id)["finalStatus"] == "SUCCEEDED"


def test_a_failed_task_restarts_the_gang_in_the_same_containers(apps):
    rc, report, err = run_job(JOBS / "gang-restart.yaml")
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED"
    assert report["attempts"] == 2
    assert [(t["state"], t["restarts"]) for t in report["tasks"]] == [("SUCCEEDED", 1), ("SUCCEEDED", 1)]
    # Both attempts ran in worker 0's one container: its stdout has both headers.
    rc, out, err = subm("logs", report["app_id"], "--role", "worker", "--index", "0", env=YARN)
    assert rc == 0, err
    assert "role=worker index=0 attempt=1" in out and "role=worker index=0 attempt=2" in out
    assert "injected failure" in out


def test_a_lost_container_is_replaced_and_the_gang_restarts(apps):
    rc, report, err = run_job(JOBS / "lost-container.yaml")
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED"
    assert report["attempts"] == 2
    assert [t["state"] for t in report["tasks"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert "/container_" in report["tasks"][0]["log"]
    rc, am_log, err = subm("logs", report["app_id"], env=YARN)
    assert "worker:0 is gone: its container ended" in am_log, am_log[-2000:]
    assert "restarting the gang: attempt 2" in am_log
    # The dead executor's connection closed at once; its NodeManager was asked then, not after
    # YARN's report, which comes with skein's next heartbeat to the RM (up to 5 s later).
    assert "dropped its connection and its NodeManager says container" in am_log, am_log[-2000:]


def test_a_job_failing_after_max_restarts_says_which_task_failed_how_and_where_its_log_is(apps):
    rc, report, err = run_job(JOBS / "always-fails.yaml")
    apps.append(report.get("app_id"))
    assert rc == 1, err
    assert report["state"] == "FAILED"
    assert report["attempts"] == 2  # max_restarts: 1
    failed = report["tasks"][1]
    assert (failed["role"], failed["index"], failed["state"], failed["exit_code"]) == ("worker", 1, "FAILED", 3)
    diagnostics = report["diagnostics"]
    assert "worker:1" in diagnostics and "exit code 3 (attempt 2)" in diagnostics
    assert failed["log"] and failed["log"] in diagnostics
    assert "/node/containerlogs/container_" in failed["log"]
    # The error was on stderr only: the diagnostics name that log and quote what attempt 2 wrote
    # there (the executor sent it from the container with the exit code).
    assert f"its stderr: {failed['log']}/stderr;" in diagnostics
    assert diagnostics.endswith("last lines of worker:1's stderr:\n    worker 1 gives up")
    # YARN's own record of the application (what the YARN UI shows) says the same, once YARN's
    # next attempt has repeated the verdict (skein leaves a failed application to it; `subm run`
    # does not wait for that: backend._decided).
    app = wait_final(report["app_id"])
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "FAILED")
    assert diagnostics in app["diagnostics"]


def test_tensorflow_roles_get_their_tf_config_and_ps_is_stopped_when_the_tracked_tasks_succeed(apps):
    rc, report, err = run_job(JOBS / "tf-roles.yaml")
    apps.append(report.get("app_id"))
    assert rc == 0, f"{report.get('diagnostics')}\n{err}"
    assert report["state"] == "SUCCEEDED"
    states = {(t["role"], t["index"]): (t["state"], t["tracked"]) for t in report["tasks"]}
    assert states == {("chief", 0): ("SUCCEEDED", True), ("worker", 0): ("SUCCEEDED", True),
                      ("worker", 1): ("SUCCEEDED", True), ("evaluator", 0): ("SUCCEEDED", True),
                      ("ps", 0): ("STOPPED", False)}
    ps = next(t for t in report["tasks"] if t["role"] == "ps")
    assert "TF_CONFIG ok for ps:0" in container_log(ps, "stdout")  # ps got its config before it was stopped
    wait_for(lambda: no_running_container(report["app_id"]), timeout=60, what="no container of the job left",
             interval=0.5)


def test_a_gang_the_cluster_can_never_hold_fails_at_once_saying_what_it_asks_and_what_there_is(apps):
    """Waiting for room is no failure (gang admission), but a gang that could not fit even on the
    emptied cluster would wait forever: the AM fails it at once, asking for no container."""
    # Each node holds one worker (more than half a node each), and there is one worker more than nodes.
    memory_mb = node_total("memory-mb") // 2 + 512
    workers = len(nm_urls()) + 1
    rc, report, err = run_job(JOBS / "gang-timeout.yaml", memory=f"{memory_mb} MiB", instances=workers)
    apps.append(report.get("app_id"))
    assert rc == 1, err
    assert report["state"] == "FAILED"
    diagnostics = report["diagnostics"]
    # (The RM may still list a node an earlier test killed; the AM counts the running ones.)
    assert re.search(rf"the gang asks {memory_mb * workers} MiB, {workers} vcores in {workers} container\(s\), which "
                     rf"cannot all fit at once on this cluster's \d+ node\(s\) even if they were empty", diagnostics), \
        diagnostics
    assert "waiting would never end" in diagnostics
    assert diagnostics in rm_app(report["app_id"])["diagnostics"]
    assert int(rm_app(report["app_id"]).get("runningContainers") or 0) <= 1  # only the AM ever ran
    wait_for(lambda: no_running_container(report["app_id"]), timeout=60, what="no container of the job left",
             interval=0.5)


@pytest.mark.parametrize("variables, field, numbers", [
    ({"gpus": 8}, "roles.worker.resources.gpus", lambda: ["8 asked", f"is {max_per_container(GPU)}"]),
    ({"memory": "64 GiB"}, "roles.worker.resources.memory", lambda: [
        "64 GiB asked", f"is {format_memory(max_per_container('memory-mb', 'yarn.scheduler.maximum-allocation-mb'))}"]),
    ({"vcores": 64}, "roles.worker.resources.vcores", lambda: [
        "64 asked", f"is {max_per_container('vcores', 'yarn.scheduler.maximum-allocation-vcores')}"]),
    ({"queue": "no-such-queue"}, "queue", lambda: ["'no-such-queue'", "default"]),
], ids=["gpus", "memory", "vcores", "queue"])
def test_asking_for_more_than_the_cluster_can_give_is_refused_before_submission(variables, field, numbers):
    tag = "subm-test-" + secrets.token_hex(4)
    rc, out, err = subm("run", str(JOBS / "over-ask.yaml"), "--backend", "yarn", *sets(tag=tag, **variables),
                        env=YARN)
    assert rc == 2, f"stdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in err
    assert f"Error: {field}: " in err
    for text in numbers():
        assert text in err, f"{text!r} not in {err!r}"
    assert (rm_get("/ws/v1/cluster/apps", applicationTags=tag).get("apps") or {}).get("app") is None, \
        "an application reached YARN"


def test_list_and_kill_a_running_job_leaves_no_container(apps):
    app_id = detach(JOBS / "forever.yaml", apps)
    wait_for(lambda: running_tasks(app_id, 2), timeout=120, what="both workers running", interval=0.5)

    rc, listed, err = run_json("list", "--backend", "yarn", env=YARN)
    assert rc == 0, err
    assert {"app_id": app_id, "name": "yarn-forever", "state": "RUNNING"}.items() <= \
        next(j for j in listed if j["app_id"] == app_id).items()

    rc, report, err = run_json("kill", app_id, env=YARN)
    assert rc == 0, err
    assert report["state"] == "KILLED"
    assert rm_app(app_id)["state"] == "KILLED"
    # Reported as killed by `subm kill` (YARN's diagnostics carry it), not as a signal the AM got.
    assert "killed by `subm kill`" in report["diagnostics"] and "SIGTERM" not in report["diagnostics"]
    assert "killed by `subm kill`" in status(app_id)["diagnostics"]
    wait_for(lambda: no_running_container(app_id), timeout=60, what=f"no container of {app_id} running",
             interval=0.5)

    rc, listed, err = run_json("list", "--backend", "yarn", env=YARN)
    assert rc == 0 and app_id not in [j["app_id"] for j in listed], "a killed job is listed as running"
    rc, listed, err = run_json("list", "--all", "--backend", "yarn", env=YARN)
    assert rc == 0, err
    assert [j["state"] for j in listed if j["app_id"] == app_id] == ["KILLED"]


def test_stopping_subm_run_kills_the_application(apps):
    tag = "subm-test-" + secrets.token_hex(4)
    proc = start_subm("run", str(JOBS / "forever.yaml"), "--backend", "yarn", "--output", "json",
                      *sets(tag=tag), env=YARN)
    try:
        app = wait_for(lambda: (rm_get("/ws/v1/cluster/apps", applicationTags=tag).get("apps") or {}).get("app"),
                       timeout=60, what="the application to reach YARN", interval=0.25)[0]
        apps.append(app["id"])
        wait_for(lambda: running_tasks(app["id"], 2), timeout=120, what="both workers running", interval=0.5)
        proc.send_signal(signal.SIGTERM)  # what CI sends on a timeout; Ctrl-C does the same
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert f"Interrupted: killing {app['id']}" in err
    assert json.loads(out)["state"] == "KILLED"
    assert rm_app(app["id"])["state"] == "KILLED"
    wait_for(lambda: no_running_container(app["id"]), timeout=60, what="no container of the job left",
             interval=0.5)


def test_a_detached_job_has_status_and_logs(shared_tmp_path, apps):
    marker = shared_tmp_path / "go"
    app_id = detach(JOBS / "wait-for-marker.yaml", apps, name="detach", marker=marker, max_seconds=600)
    try:
        # --detach returned with the job still running: it waits for the marker.
        assert rm_app(app_id)["state"] not in FINAL_YARN_STATES
        running = wait_for(lambda: running_tasks(app_id, 2), timeout=420, what="both workers running",
                           interval=2, explain=lambda: json.dumps(status(app_id).get("tasks"), indent=1))
        assert running["state"] == "RUNNING"
        # YARN's tracking URL (skein's UI) links the AM's status page, which shows the tasks.
        tracking = rm_proxy_url(rm_app(app_id)["trackingUrl"])
        assert 'href="./pages/subm/">Submarine job status' in requests.get(tracking, timeout=10).text
        page = requests.get(tracking.rstrip("/") + "/pages/subm/", timeout=10).text
        assert all(text in page for text in ("worker:0", "worker:1", "RUNNING", "Cluster spec"))
    finally:
        marker.touch()
    wait_final(app_id)

    report = status(app_id)  # a finished job still answers with its tasks
    assert report["state"] == "SUCCEEDED"
    assert [(t["role"], t["index"], t["state"], t["exit_code"]) for t in report["tasks"]] == [
        ("worker", 0, "SUCCEEDED", 0), ("worker", 1, "SUCCEEDED", 0)]

    rc, out, err = subm("logs", app_id, "--role", "worker", env=YARN)
    assert rc == 0, err
    assert f"[subm] job={app_id} role=worker index=0 attempt=1" in out
    assert f"[subm] job={app_id} role=worker index=1 attempt=1" in out
    assert "worker 0 up, waiting for" in out and "a line on stderr" in out

    rc, out, err = subm("logs", app_id, "--role", "worker", "--index", "1", env=YARN)
    assert rc == 0, err
    assert "role=worker index=1" in out and "role=worker index=0" not in out

    rc, out, err = subm("logs", app_id, env=YARN)  # no role: the AM's decisions come first
    assert rc == 0, err
    assert out.startswith("==> ApplicationMaster") and "gang ready: all 2 tasks registered" in out
    assert "role=worker index=1 attempt=1" in out

    rc, out, err = subm("logs", app_id, "--role", "chief", env=YARN)
    assert rc == 1 and "Error: no task chief" in err and "roles: worker" in err

    # YARN's own view: stdout and stderr in each container's log directory, header first.
    for task in report["tasks"]:
        node, cid = split_log_url(task["log"])
        listing = requests.get(f"{node}/ws/v1/node/containers/{cid}/logs",
                               headers={"Accept": "application/json"}, timeout=10).json()
        names = {f["fileName"] for f in listing["containerLogsInfo"]["containerLogInfo"]}
        assert {"stdout", "stderr"} <= names
        header = f"[subm] job={app_id} role=worker index={task['index']} attempt=1 host="
        for name in ("stdout", "stderr"):
            assert container_log(task, name).startswith(header), f"{cid}/{name}"
