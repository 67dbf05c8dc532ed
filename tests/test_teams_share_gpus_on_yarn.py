"""Two teams share a YARN cluster's GPUs (issue 25), on a 3-node rig with 2 GPUs a node and
queues teama and teamb at 50 % each (``RIG_QUEUES=teama:50,teamb:50 RIG_GPUS=2``; CI's
``sharing`` pass): gangs that do not fit wait holding no GPU instead of failing, contending
gangs run one after the other instead of deadlocking, and each GPU goes back when its task
ends. The preemption test needs YARN's preemption monitor (``RIG_PREEMPTION=1``; CI's
``preemption`` pass): a preempted gang gives every container back, waits for room and
resumes, spending no ``max_restarts``.
"""
from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import requests

from conftest import YARN_CONF_DIR, require_yarn, run_json, subm, write_job
from venvs import ISOLATED_NODES

RM = require_yarn()
YARN = {"HADOOP_CONF_DIR": YARN_CONF_DIR or ""}

#: Each task sleeps this long; given a marker file too, it waits for that file instead, for
#: at most that long (a test decides when the job ends, rather than guessing how long to sleep).
TASK = """\
    import os, sys, time
    print(f"began {time.time():.3f}", flush=True)
    deadline = time.time() + float(sys.argv[1])
    while time.time() < deadline and not (len(sys.argv) > 2 and os.path.exists(sys.argv[2])):
        time.sleep(0.5)
    print(f"ended {time.time():.3f}", flush=True)
"""


def rm_get(path: str) -> Dict:
    resp = requests.get(RM + path, headers={"Accept": "application/json"}, timeout=10)
    resp.raise_for_status()
    return resp.json()


def queues() -> List[str]:
    info = rm_get("/ws/v1/cluster/scheduler")["scheduler"]["schedulerInfo"]
    return [q["queueName"] for q in (info.get("queues") or {}).get("queue") or []]


def cluster_gpus() -> int:
    nodes = (rm_get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
    return sum(int(i.get("value") or 0) for n in nodes if n.get("state") == "RUNNING"
               for i in ((n.get("availableResource") or {}).get("resourceInformations") or {}).get(
                   "resourceInformation", []) if i.get("name") == "yarn.io/gpu")


#: Whether every node of an isolated rig has unpacked the jobs' environment (see warm_every_node).
_NODES_WARM = False


def warm_every_node() -> None:
    """Once per session on isolated nodes: a job of one task per GPU, so two on every node.

    An isolated node has nothing of a job's environment until YARN has unpacked it there, the
    first time a job's container lands on it (52 s on this 2-core machine, CI 2026-11-29): a
    job that happened to be the first on a node would start that much later than the job
    beside it, and these tests read what runs beside what. Afterwards each node has it."""
    global _NODES_WARM
    if _NODES_WARM or not ISOLATED_NODES:
        return
    app = submit(Path(tempfile.mkdtemp(prefix="warm-up.")), "warm-up", 6, 0, "teama")
    report = wait(app)
    assert report["state"] == "SUCCEEDED", report.get("diagnostics")
    _NODES_WARM = True


@pytest.fixture(autouse=True)
def team_queues() -> None:
    """The rig these tests need (checked when one runs, not when the module is collected: the
    other passes of CI collect it too), its nodes warm (:func:`warm_every_node`)."""
    if {"teama", "teamb"} <= set(queues()):
        warm_every_node()
    # The test before may have just ended: its jobs' containers go back within seconds of
    # their reports turning final (the AM stops, then YARN releases what it held).
    deadline = time.monotonic() + 60
    while cluster_gpus() < 6 and time.monotonic() < deadline and {"teama", "teamb"} <= set(queues()):
        time.sleep(1)
    if not {"teama", "teamb"} <= set(queues()) or cluster_gpus() < 6:
        pytest.skip("needs a rig with queues teama and teamb and 6 free GPUs "
                    "(RIG_NODES=3 RIG_GPUS=2 RIG_QUEUES=teama:50,teamb:50)")


def submit(tmp_path: Path, name: str, gpus: int, seconds: float, queue: str, extra: str = "",
           marker: Optional[Path] = None) -> str:
    job = write_job(tmp_path / name, f"""\
        name: {name}
        queue: {queue}
        roles:
          worker:
            instances: {gpus}
            resources: {{memory: 512 MiB, vcores: 1, gpus: 1}}
            command: python task.py {seconds} {marker or ""}
        files:
          task.py: task.py
        {extra}
        """, {"task.py": TASK})
    rc, out, err = run_json("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    return out["app_id"]


def wait(app_id: str) -> Dict:
    rc, report, err = run_json("wait", app_id, "--timeout", "400", timeout=420, env=YARN)
    assert rc in (0, 1), err
    return report


def status(app_id: str) -> Dict:
    return run_json("status", app_id, env=YARN)[1]


def wait_running(app_id: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = status(app_id)
        if report.get("tasks") and all(t["state"] == "RUNNING" for t in report["tasks"]):
            return
        time.sleep(1)
    pytest.fail(f"{app_id} never ran: {status(app_id)}")


def said(app_id: str) -> str:
    """The AM's decisions and the tasks' output, as ``subm logs`` shows them."""
    rc, out, err = subm("logs", app_id, env=YARN, timeout=60)
    assert rc == 0, err
    return out


def ran(app_id: str) -> Tuple[float, float]:
    """When the job's first task began and its last task ended (epoch seconds, from their output)."""
    text = said(app_id)
    began = [float(x) for x in re.findall(r"^began ([0-9.]+)$", text, re.M)]
    ended = [float(x) for x in re.findall(r"^ended ([0-9.]+)$", text, re.M)]
    assert began and ended, text
    return min(began), max(ended)


@pytest.mark.sharing
def test_two_gangs_that_contend_run_one_after_the_other_instead_of_deadlocking(tmp_path):
    big = submit(tmp_path, "six", 6, 15, "teama")
    wait_running(big)
    # Two 4-GPU gangs of two teams wait for the 6-GPU job: YARN alone would hand each 3 GPUs.
    a = submit(tmp_path, "four-a", 4, 10, "teama")
    b = submit(tmp_path, "four-b", 4, 10, "teamb")
    reports = {app: wait(app) for app in (big, a, b)}
    assert all(r["state"] == "SUCCEEDED" for r in reports.values()), \
        {app: r["diagnostics"] for app, r in reports.items()}
    (a_began, a_ended), (b_began, b_ended) = ran(a), ran(b)
    assert a_ended <= b_began or b_ended <= a_began, "both 4-GPU gangs ran at once on 6 GPUs"
    # They waited holding no GPU, and said what for.
    assert "the gang waits, queued: waiting for 4 GPUs" in said(a) + said(b)
    assert all(r["timings"].get("queued_seconds", 0) > 0 for r in (reports[a], reports[b]))
    restarts = {app: r["restarts_by_cause"] for app, r in reports.items() if any(r["restarts_by_cause"].values())}
    assert not restarts, (restarts, [said(app) for app in restarts])  # no restart at all


@pytest.mark.sharing
def test_a_gang_behind_a_running_job_waits_its_turn_instead_of_failing_at_gang_seconds(tmp_path, shared_tmp_path):
    go = shared_tmp_path / "go"
    first = submit(tmp_path, "first", 4, 300, "teama", marker=go)
    wait_running(first)
    second = submit(tmp_path, "second", 4, 5, "teama", extra="timeouts: {gang_seconds: 10}")
    # Its AM up (a JVM and localization on a busy machine) and its gang read as queued.
    deadline = time.monotonic() + 120
    while not (waiting := status(second)).get("waiting_for") and time.monotonic() < deadline:
        time.sleep(1)
    assert waiting["state"] == "RUNNING" and waiting.get("waiting_for", "").startswith("waiting for 4 GPUs: 2 free")
    time.sleep(15)  # queued past gang_seconds, however long its AM took to come up
    go.touch()  # the first job ends: its GPUs go back
    report = wait(second)
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    assert report["timings"]["queued_seconds"] > 10  # longer than gang_seconds: waiting is no failure
    assert wait(first)["state"] == "SUCCEEDED"


@pytest.mark.sharing
def test_a_waiting_gang_knows_its_place_in_line_and_subm_queue_shows_the_line(tmp_path, shared_tmp_path):
    go = shared_tmp_path / "go"
    first = submit(tmp_path, "holder", 4, 300, "teama", marker=go, extra="timeouts: {job_seconds: 600}")
    wait_running(first)
    ahead = submit(tmp_path, "line-one", 4, 1, "teama", extra="timeouts: {job_seconds: 300}")
    behind = submit(tmp_path, "line-two", 4, 1, "teama")
    # Both AMs up and their gangs read as queued by the RM: an AM's progress reaches the RM at
    # skein's next heartbeat, seconds later; until then the RM shows skein's own, which
    # capacity.waiting_gangs reads as a gang asked for (first in the line) for those seconds.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
            (app := rm_get(f"/ws/v1/cluster/apps/{a}")["app"])["state"] == "RUNNING" and
            0 < float(app.get("progress") or 0) < 10 for a in (ahead, behind)):
        time.sleep(1)
    while ((waiting := status(behind)).get("place") or {}).get("position") != 2 and time.monotonic() < deadline:
        time.sleep(1)
    place = waiting.get("place")
    assert place, waiting
    assert place["queue"] == "teama" and place["position"] == 2, place
    assert [a["app_id"] for a in place["ahead"]] == [ahead] and place["ahead"][0]["gpus"] == 4
    assert place["gpus"] == 4 and place["free_gpus"] == 2, place
    # It starts when the one ahead ends, which starts when the holder ends: both declared
    # job_seconds and have no earlier run in this history.
    assert place["basis"] == "declared: timeouts.job_seconds" and place["expected_start"], place
    rc, view, err = run_json("queue", "teama", env=YARN)
    assert rc == 0, err
    line = view["queues"]["teama"]
    assert [w["app_id"] for w in line["waiting"]] == [ahead, behind]
    assert [w["position"] for w in line["waiting"]] == [1, 2]
    assert [r["app_id"] for r in line["running"]] == [first] and line["running"][0]["gpus"] == 4
    rc, text, err = subm("queue", "teama", "--output", "prometheus", env=YARN)
    assert rc == 0, err
    assert 'subm_waiting_gangs{queue="teama"} 2' in text and 'subm_waiting_gpus{queue="teama"} 8' in text
    # The oldest job whose AM is up, the holder, decides for both (the line's steward): each
    # waiting AM read the RM whole once, then asks the holder's AM, not the RM.
    heeded = f"the line's steward is {first}"
    while time.monotonic() < deadline + 60 and not all(heeded in said(app) for app in (ahead, behind)):
        time.sleep(3)
    assert all(heeded in said(app) for app in (ahead, behind)), said(behind)
    assert "stewarding the line" in said(first)
    go.touch()  # the holder ends: the two gangs run, one after the other
    reports = {app: wait(app) for app in (first, ahead, behind)}
    assert all(r["state"] == "SUCCEEDED" for r in reports.values()), \
        {app: r["diagnostics"] for app, r in reports.items()}


@pytest.mark.sharing
def test_a_job_that_waits_longer_than_queue_seconds_fails_naming_the_gpus_it_waited_for(tmp_path):
    first = submit(tmp_path, "hog", 6, 20, "teama")
    wait_running(first)
    report = wait(submit(tmp_path, "patient", 2, 1, "teamb", extra="timeouts: {queue_seconds: 4}"))
    assert report["state"] == "FAILED"
    assert "longer than timeouts.queue_seconds (4): waiting for 2 GPUs: 0 free" in report["diagnostics"]
    assert wait(first)["state"] == "SUCCEEDED"


@pytest.mark.sharing
def test_each_gpu_goes_back_when_its_task_ends(tmp_path):
    job = write_job(tmp_path / "uneven", """\
        name: uneven
        queue: teama
        roles:
          worker:
            instances: 3
            resources: {memory: 512 MiB, vcores: 1, gpus: 1}
            command: python -c "import os, time; time.sleep(25 if os.environ['SUBM_INDEX'] == '0' else 2)"
        """)
    rc, out, err = run_json("run", str(job), "--backend", "yarn", "--detach", env=YARN)
    assert rc == 0, err
    app = out["app_id"]
    held = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        info = rm_get(f"/ws/v1/cluster/apps/{app}")["app"]
        if info["state"] in ("FINISHED", "FAILED", "KILLED"):
            break
        held.append(int(info.get("runningContainers") or 0))
        time.sleep(1)
    report = wait(app)
    assert report["state"] == "SUCCEEDED", report["diagnostics"]
    # The AM and three tasks, then the AM and the one task still running.
    assert 4 in held and held[-1] <= 2, held
    assert "worker:1 is done: its container goes back to the cluster" in said(app)


@pytest.mark.preemption
def test_a_preempted_gang_gives_everything_back_and_resumes_without_spending_max_restarts(tmp_path):
    hog = submit(tmp_path, "hog", 6, 40, "teama", extra="restart: {max_restarts: 0}")
    wait_running(hog)
    small = submit(tmp_path, "small", 2, 10, "teamb")
    reports = {app: wait(app) for app in (small, hog)}
    assert reports[small]["state"] == "SUCCEEDED", reports[small]["diagnostics"]
    hog_report = reports[hog]
    assert hog_report["state"] == "SUCCEEDED", hog_report["diagnostics"]
    causes = hog_report["restarts_by_cause"]
    assert causes["preempted"] >= 1 and causes["failed"] == 0, causes  # max_restarts 0 was enough
    assert "giving every container of the gang back until the cluster has room for all of it" in said(hog)
    # It waited for the small job instead of holding GPUs idle: it began again only after that ended.
    small_ended = ran(small)[1]
    began = [float(x) for x in re.findall(r"^began ([0-9.]+)$", said(hog), re.M)]
    assert max(began) >= small_ended - 1
