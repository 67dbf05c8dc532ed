"""A launch the node refuses (an untrusted image, a mount not allowed, an image that cannot be
pulled, an image without bash or python3) fails the job at once, quoting YARN's (or Docker's)
words and naming the setting to change: no restart could help.

The messages are the ones YARN's NodeManagers wrote on the Docker rig (Hadoop 3.1.1: the table
in hadoop-conf/README.md; 3.1.2: measured with the old rig's Docker mode, since removed: it
needed Hadoop's setuid container-executor, which no registry serves).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from submarine_py.am.containers import Ended
from submarine_py.am.recovery import MAX_FAILED_LAUNCHES
from submarine_py.backends.yarn.am import exits as yarn_exits
from submarine_py.backends.yarn.am.containers import YarnContainers
from submarine_py.backends.yarn.am.exits import container_end, tidy
from submarine_py.plan import make_plan
from submarine_py.refusals import SEEN_EXIT_CODES, refusal
from submarine_py.jobfile import spec_from_dict
from test_gang_scheduling_and_restart_policies import WORKERS, tasks_by_id
from test_node_and_container_failures import launching_am

pytestmark = pytest.mark.unit

SHELL = ("Exception from container-launch. Container id: container_1_0002_01_000003 Exit code: {code} "
         "Exception message: Launch container failed Shell error output: {said} Shell output: main : command "
         "provided 4 main : run as user is subm main : requested yarn user is subm Creating script paths...")


def nm(code: int, said: str) -> str:
    """YARN's container diagnostics as the AM reads them (tidied to one line)."""
    return tidy(SHELL.format(code=code, said=said))


# -- what is a refusal, and what the verdict says ---------------------------------------------

def test_an_untrusted_image_names_its_registry_and_docker_trusted_registries():
    said = ("image: untrusted-lce/subm-test:bookworm is not trusted. Disable mount volume for untrusted image "
            "image: untrusted-lce/subm-test:bookworm is not trusted. Disable cap-add for untrusted image "
            "Docker capability disabled for untrusted image")
    verdict = refusal(127, nm(127, said))
    assert '"image: untrusted-lce/subm-test:bookworm is not trusted"' in verdict  # YARN's words quoted
    assert "registry untrusted-lce" in verdict
    assert "docker.trusted.registries (container-executor.cfg on every NodeManager)" in verdict


def test_an_untrusted_image_that_is_also_absent_is_refused_for_trust_not_for_the_pull():
    said = ("image: subm-test:bookworm is not trusted. Disable mount volume for untrusted image "
            "Unable to find image 'subm-test:bookworm' locally docker: Error response from daemon: "
            'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host.')
    verdict = refusal(7, nm(7, said))
    assert "docker.trusted.registries" in verdict
    assert "a bare Docker Hub name" in verdict


@pytest.mark.parametrize("said, setting", [
    # Hadoop 3.1.1
    ("Invalid docker ro mount '/opt:/opt', realpath=/opt Error constructing docker command, docker error "
     "code=13, error message='Invalid docker read-only mount'", "docker.allowed.ro-mounts"),
    ("Invalid docker rw mount '/srv:/srv', realpath=/srv Error constructing docker command, docker error "
     "code=14, error message='Invalid docker read-write mount'", "docker.allowed.rw-mounts"),
    # Hadoop 3.1.2
    ("Configuration does not allow docker mount '/opt:/opt:ro', realpath=/opt Error constructing docker command, "
     "docker error code=14, error message='Invalid docker read-only mount'", "docker.allowed.ro-mounts"),
    ("Configuration does not allow docker mount '/srv:/srv:rw', realpath=/srv Error constructing docker command, "
     "docker error code=15, error message='Invalid docker read-write mount'", "docker.allowed.rw-mounts"),
])
def test_a_mount_not_allowed_names_the_allowed_mounts_setting(said, setting):
    verdict = refusal(29, nm(29, said))
    assert verdict.startswith("the NodeManager refused mount /")
    assert f"{setting} (container-executor.cfg on every NodeManager)" in verdict
    assert "realpath=" in verdict  # quoted as YARN said it
    assert "docker.mounts" in verdict  # or the job drops it


def test_an_allowed_mount_root_missing_on_the_node_is_the_admins_to_create():
    verdict = refusal(29, nm(29, "Unable to find permitted docker mounts on disk"))
    assert "must exist on the node" in verdict and "docker.allowed.ro-mounts" in verdict


def test_an_image_that_cannot_be_pulled_quotes_the_daemon_and_says_to_pre_pull():
    said = ("Unable to find image 'localhost/no-such-image:1' locally docker: Error response from daemon: Get "
            '"http://localhost/v2/": dial tcp 127.0.0.1:80: connect: connection refused. See \'docker run --help\'.')
    verdict = refusal(7, nm(7, said))
    assert verdict.startswith("image localhost/no-such-image:1 is not on the node and could not be pulled: ")
    assert 'connect: connection refused"' in verdict
    assert "Shell output" not in verdict and "main : command" not in verdict  # container-executor's chatter cut
    assert "pre-pull it on every node" in verdict


def test_an_image_without_bash_or_python3_says_what_it_lacks():
    no_bash = refusal(7, nm(7, 'docker: Error response from daemon: failed to create shim task: OCI runtime '
                                'create failed: runc create failed: unable to start container process: exec: '
                                '"bash": executable file not found in $PATH: unknown.'))
    assert "use an image that has bash" in no_bash
    # The launch line's own words (app_spec/local docker), in the container's log.
    no_python = refusal(127, "YARN container ... exit status 127: ...; its log ends: [subm] image "
                             "localhost/subm-nopython:1 has no python3 on its PATH, which subm's executor needs")
    assert no_python.startswith('"[subm] image localhost/subm-nopython:1 has no python3')
    assert "environment.python" in no_python
    absent = refusal(127, "[subm] environment.python /venv/bin/python does not exist in image localhost/a:1")
    assert "mount it with docker.mounts" in absent


def test_a_network_the_nodemanager_does_not_allow_names_both_settings():
    said = ("Exception from container-launch. Container id: container_1_0026_01_000004 Exit code: -1 Exception "
            "message: Disallowed network: 'bridge' specified. Allowed networks: are [host]")
    verdict = refusal(-1, tidy(said))
    assert verdict.startswith("the NodeManager refused network bridge: ")
    assert "allowed-container-networks (yarn-site.xml)" in verdict and "docker.allowed.networks" in verdict


def test_other_container_executor_refusals_name_their_cfg_key():
    said = "Error constructing docker command, docker error code=9, error message='Invalid docker network'"
    assert "docker.allowed.networks" in refusal(29, nm(29, said))
    said = "Error constructing docker command, docker error code=17, error message='Invalid docker device'"
    assert "docker.allowed.devices" in refusal(29, nm(29, said))
    assert "pair the container-executor binary with its own Hadoop version" in \
        refusal(32, nm(32, "Feature disabled: traffic control"))


def test_local_docker_run_refusals_are_recognised_too():
    missing = ("Unable to find image 'localhost/no-such-image:1' locally\ndocker: Error response from daemon: Get "
               '"http://localhost/v2/": dial tcp 127.0.0.1:80: connect: connection refused\n\n'
               "Run 'docker run --help' for more information")
    assert refusal(125, missing).startswith("image localhost/no-such-image:1 is not on the node")
    mount = ('docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc '
             'create failed: unable to start container process: error during container init: error mounting '
             '"/etc/hostname" to rootfs at "/tmp": mount /etc/hostname:/tmp (via /proc/self/fd/6), flags: 0x5001: '
             'not a directory: unknown')
    assert refusal(125, mount).startswith("docker run refused mount /etc/hostname:/tmp")


@pytest.mark.parametrize("code, said", [
    (127, "YARN container c on n FAILED, exit status 127: Container exited with a non-zero exit code 127; "
          "its log ends: exec: /opt/py/bin/python3: not found"),     # a missing interpreter outside Docker
    (1, "Resource file:/staging/train.py changed on src filesystem"),   # a localization race: retry
    (137, "Container killed on request. Exit code is 137"),
    (0, "image: x/y is not trusted."),                                   # it succeeded: nothing refused
    (1, ""),
])
def test_ordinary_failed_launches_are_no_refusal(code, said):
    assert refusal(code, said) == ""


def test_the_exit_codes_seen_are_kept_with_the_rules():
    assert SEEN_EXIT_CODES["untrusted image, present on the node"] == 127
    assert SEEN_EXIT_CODES["mount not allowed"] == 29
    assert SEEN_EXIT_CODES["image absent, trusted"] == 7


# -- the AM fails the job at once -----------------------------------------------------------

UNTRUSTED = refusal(127, nm(127, "image: untrusted-lce/x:1 is not trusted."))


def test_a_refused_launch_fails_the_job_at_once_whatever_restarts_remain():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 50})
    refused = lambda ex_id: Ended(ex_id, 127, "YARN container ... exit status 127", role="worker",  # noqa: E731
                                  refusal=UNTRUSTED)
    am, driver = launching_am(spec, [], first_ends=refused)  # worker:0's container is the refused one
    report = am.run().to_dict()
    assert report["state"] == "FAILED"
    assert report["attempts"] == 1  # no restart, no second launch
    diag = report["diagnostics"]
    assert diag.startswith("worker:0 could not start: the NodeManager refused image untrusted-lce/x:1")
    assert diag.endswith("job failed (no restart can help)")
    assert tasks_by_id(report)["worker:0"]["state"] == "FAILED"
    assert tasks_by_id(report)["worker:0"]["exit_code"] == 127


def test_without_a_refusal_the_same_end_is_a_failed_launch_that_restarts():
    spec = dict(WORKERS, restart={"policy": "gang", "max_restarts": 50})
    waves = [[(127, "YARN container ... exit status 127", None)] for _ in range(MAX_FAILED_LAUNCHES)]
    am, _ = launching_am(spec, waves)
    report = am.run().to_dict()
    assert report["attempts"] > 1


# -- YARN: the verdict comes with the container's end, from its NodeManager -----------------------

class _App:
    def __init__(self, containers):
        self.containers = containers
        self.asked = []

    def get_containers(self, services=None, states=None):
        self.asked.append((tuple(services or ()), tuple(states or ())))
        return [c for c in self.containers if str(c.state) in (states or [str(c.state)])]


def _container(cid: str, state: str, started: float):
    import datetime

    return SimpleNamespace(id=cid, state=state, service_name="worker", yarn_container_id=f"container_1_01_{cid[-1]}",
                           yarn_node_http_address="n1:8042", exit_message="",
                           start_time=datetime.datetime.fromtimestamp(started))


def test_yarn_containers_carry_the_refusal_in_their_end(monkeypatch):
    said = nm(29, "Configuration does not allow docker mount '/opt:/opt:ro', realpath=/opt")
    monkeypatch.setattr(yarn_exits, "nm_container", lambda *a, **k: {"exitCode": 29, "diagnostics": said,
                                                                          "state": "DONE"})
    monkeypatch.setattr(yarn_exits, "node_log", lambda *a, **k: b"")
    ended = container_end(_container("worker_0", "FAILED", 0), "FAILED")
    assert "docker.allowed.ro-mounts" in ended.refusal
    assert "exit status 29" in ended.diagnostics


def test_yarn_asks_the_nodemanager_of_an_unregistered_docker_container_before_yarn_reports_it(monkeypatch):
    """YARN reports a refused container only after its NodeManager's clean-up (5 s or more); the
    NodeManager shows it at once."""
    said = nm(127, "image: untrusted-lce/x:1 is not trusted.")
    monkeypatch.setattr(yarn_exits, "nm_container", lambda *a, **k: {"exitCode": 127, "diagnostics": said,
                                                                          "state": "EXITED_WITH_FAILURE"})
    monkeypatch.setattr(yarn_exits, "node_log", lambda *a, **k: b"")
    plan = make_plan(spec_from_dict(dict(WORKERS, name="t", docker={"image": "untrusted-lce/x:1"})))
    import time

    app = _App([_container("worker_0", "RUNNING", time.time() - 10)])
    yc = YarnContainers(app, plan, user="subm")
    yc.next_poll = yc.next_probe = 0.0
    ended = yc.poll()
    assert [e.executor for e in ended] == ["worker_0"] and "docker.trusted.registries" in ended[0].refusal
    assert app.asked[-1] == (("worker",), ("RUNNING",))
    yc.next_poll = yc.next_probe = 0.0
    assert yc.poll() == []  # reported once


def test_yarn_never_asks_after_containers_of_a_job_without_images(monkeypatch):
    monkeypatch.setattr(yarn_exits, "nm_container", lambda *a, **k: pytest.fail("asked a NodeManager"))
    plan = make_plan(spec_from_dict(dict(WORKERS, name="t")))
    app = _App([])
    yc = YarnContainers(app, plan, user="subm")
    yc.next_poll = yc.next_probe = 0.0
    assert yc.poll() == []
    assert all(states != ("RUNNING",) for _, states in app.asked)


# -- the client: a decided failure is the end, though YARN starts an attempt to repeat it ------------

def _client_with(monkeypatch, attempts, saved):
    from submarine_py.backends.yarn import attempts as yarn_attempts
    from submarine_py.backends.yarn.client import backend as yarn_backend

    monkeypatch.setattr(yarn_attempts, "node_log", lambda node, cid, name, **kw: saved.get(cid))
    client = yarn_backend.YarnBackend.__new__(yarn_backend.YarnBackend)
    client._rm = SimpleNamespace(app_attempts=lambda app_id: attempts)
    monkeypatch.setattr(yarn_backend.YarnBackend, "rm", property(lambda self: self._rm), raising=False)
    return client


def _saved(state: str, phase: str, restart: dict) -> bytes:
    import json

    return json.dumps({"app_id": "application_1_1", "state": state, "phase": phase, "attempts": 1,
                       "spec": {"name": "t", "restart": restart}}).encode()


@pytest.mark.parametrize("state, phase, restart, attempt, taken", [
    ("FAILED", "DONE", {"policy": "gang", "max_restarts": 5}, 1, True),      # YARN's attempt 2 only repeats it
    ("FAILED", "FINISHING", {"policy": "gang", "max_restarts": 5}, 1, True),
    ("FAILED", "DONE", {"policy": "gang", "max_restarts": 5}, 2, False),     # the last attempt: YARN ends it
    ("FAILED", "DONE", {"policy": "never", "max_restarts": 0}, 1, False),    # one attempt: YARN ends it
    ("SUCCEEDED", "DONE", {"policy": "gang", "max_restarts": 5}, 1, False),  # skein unregisters at once
    ("RUNNING", "RUNNING", {"policy": "gang", "max_restarts": 5}, 1, False),  # an AM lost mid-job
])
def test_the_client_takes_a_failure_yarn_will_only_repeat_as_the_end(monkeypatch, state, phase, restart, attempt,
                                                                      taken):
    attempts = [{"id": i, "nodeHttpAddress": "n1:8042", "containerId": f"c{i}"} for i in range(1, attempt + 1)]
    client = _client_with(monkeypatch, attempts, {f"c{attempt}": _saved(state, phase, restart)})
    decided = client._decided("application_1_1")
    assert (decided is not None) == taken
    if taken:
        assert decided.state.value == state
