"""The YARN ResourceManager and NodeManager REST APIs, with ``requests``.

Everything the CLI needs after submission (status, list, kill, logs) goes
through here, so those commands never start a JVM. Every call names the user
(``user.name``, Hadoop's simple HTTP authentication), so YARN records who did
what and its ACLs apply. On a secure cluster, whose web endpoints answer 401 with
``WWW-Authenticate: Negotiate``, the call is made again with SPNEGO (``requests-gssapi``,
the Kerberos ticket of ``kerberos.py``'s login): every call carries an auth that acts
only on such an answer, so plain and secure clusters work alike without saying which.
A ResourceManager that does not answer (restarting, failing over) is waited for, up to
``SUBM_RM_WAIT`` seconds (120), saying so.
"""
from __future__ import annotations

import getpass
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import requests

from ....errors import AccessDeniedError, BackendError, CredentialsError, JobNotFoundError, SpecError
from .conf import hadoop_conf
from .spnego import http_auth

GPU = "yarn.io/gpu"
#: How long a command waits for a ResourceManager that does not answer, by default.
RM_WAIT_SECONDS = 120.0
#: HTTP answers of a ResourceManager that is up but not serving yet (starting, standby).
RM_NOT_READY = (502, 503, 504)
INFO = "/ws/v1/cluster/info"


def yarn_user() -> str:
    """Who YARN should see: on a secure cluster the Kerberos login's short name (``alice`` of
    ``alice@REALM``, as the default ``auth_to_local`` rule maps it); else HADOOP_USER_NAME (as
    Hadoop's own clients), else the login name."""
    from . import kerberos

    login = kerberos.active()
    if login is not None and login.principal:
        return login.principal.split("@")[0].split("/")[0]
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def rm_address(conf_dir: Optional[str] = None) -> str:
    """The RM's web address: SUBM_YARN_RM_URL, else yarn-site.xml of HADOOP_CONF_DIR (which must exist)."""
    if os.environ.get("SUBM_YARN_RM_URL"):
        return os.environ["SUBM_YARN_RM_URL"].rstrip("/")
    conf = hadoop_conf("yarn-site.xml", conf_dir)
    addr = conf.get("yarn.resourcemanager.webapp.address")
    if not addr or "${" in addr:
        addr = f"{conf.get('yarn.resourcemanager.hostname', 'localhost')}:8088"
    return addr if addr.startswith("http") else f"http://{addr}"


def rm_wait_seconds() -> float:
    """SUBM_RM_WAIT: seconds to wait for a ResourceManager that does not answer (0: fail at once)."""
    raw = os.environ.get("SUBM_RM_WAIT", "")
    if not raw:
        return RM_WAIT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise SpecError([("SUBM_RM_WAIT", f"expected seconds (a number >= 0), got {raw!r}")])
    return value


#: A Java exception as Hadoop's daemons print it: its class's short name, its message (up to the
#: stack trace).
_EXCEPTION = re.compile(r"(?:[\w$]+\.)*([\w$]*(?:Exception|Error|InvalidToken))\s*:\s*(.+?)(?=\s+at\s+[\w$.<>]+\(|$)")


def daemon_says(text: str, most: int = 240) -> str:
    """What a Hadoop daemon's error page or JSON says, in one short line: the first exception it
    names, with its message (``SecretManager$InvalidToken: token (...) is expired, ...``)."""
    try:  # the web services' JSON: {"RemoteException": {"message": ...}}
        text = str(((json.loads(text) or {}).get("RemoteException") or {}).get("message") or text)
    except (ValueError, AttributeError):
        pass
    pieces = [" ".join(piece.split()) for piece in re.split(r"<[^>]+>", text or "")]
    found = next((m for m in map(_EXCEPTION.search, pieces) if m), None)
    said = f"{found.group(1)}: {found.group(2)}" if found else " ".join(" ".join(pieces).split())
    said = said or "no reason given"
    return said if len(said) <= most else said[:most - 3] + "..."


def say(line: str) -> None:
    """A line for the user on stderr, ``subm: ...`` (stdout stays the report's)."""
    print(f"subm: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ClusterLimits:
    """What one container can ever get, and what the cluster knows."""

    max_memory_mb: int
    max_vcores: int
    max_gpus: int
    resource_types: List[str] = field(default_factory=list)
    queues: List[str] = field(default_factory=list)
    nodes: List[str] = field(default_factory=list)


class ResourceManager:
    """The RM's REST API. ``wait_seconds``: how long one call waits out an RM that does not
    answer (default SUBM_RM_WAIT or 120 s); ``say`` hears what it waits for."""

    #: Seconds between two "still waiting" lines.
    say_every = 15.0

    def __init__(self, url: Optional[str] = None, timeout: float = 10.0, wait_seconds: Optional[float] = None,
                 say: Callable[[str], None] = say, token_headers: Optional[Dict[str, str]] = None):
        self.url = (url or rm_address()).rstrip("/")
        self.timeout = timeout
        self.wait_seconds = rm_wait_seconds() if wait_seconds is None else wait_seconds
        self.say = say
        self.session = requests.Session()
        self.session.auth = http_auth()  # the session keeps Hadoop's auth cookie: one SPNEGO exchange
        self.session.headers["Accept"] = "application/json"
        self.session.headers.update(token_headers or {})  # the AM's: its RM delegation token
        #: Whether calls carry a delegation token (the AM's) rather than the user's Kerberos login.
        self.with_token = bool(token_headers)
        self.session.params = {"user.name": yarn_user()}

    def _request(self, method: str, path: str, **kw: Any) -> requests.Response:
        """One call, retried while the RM does not answer (or answers that it is not ready),
        up to ``wait_seconds``; then BackendError."""
        started = time.monotonic()
        said = None
        while True:
            try:
                resp = self.session.request(method, self.url + path, timeout=self.timeout, **kw)
                why = "" if resp.status_code not in RM_NOT_READY else f"it answers HTTP {resp.status_code}"
                if resp.status_code == 404 and path != INFO:
                    # A restarted RM answers before it has recovered its applications.
                    state = self._ha_state()
                    why = "" if state in ("ACTIVE", None) else f"it is {state}, recovering its applications"
            except requests.RequestException as exc:
                resp, why = None, type(exc).__name__
            waited = time.monotonic() - started
            if not why:
                if said is not None:
                    self.say(f"the YARN ResourceManager at {self.url} answers again (after {waited:.0f} s)")
                return resp
            if waited >= self.wait_seconds:
                raise BackendError(f"cannot reach the YARN ResourceManager at {self.url} ({why}"
                                   + (f", waited {waited:.0f} s" if self.wait_seconds else "")
                                   + "); check HADOOP_CONF_DIR, or wait longer with SUBM_RM_WAIT=SECONDS") from None
            if said is None or waited - said >= self.say_every:
                self.say(f"the YARN ResourceManager at {self.url} does not answer ({why}); waiting for it "
                         f"({waited:.0f} s so far, at most {self.wait_seconds:.0f} s: SUBM_RM_WAIT)")
                said = waited
            time.sleep(min(1.0, max(0.0, self.wait_seconds - waited)))

    def _ha_state(self) -> Optional[str]:
        """The RM's haState (INITIALIZING while it recovers after a restart; ACTIVE; STANDBY)."""
        try:
            resp = self.session.get(self.url + INFO, timeout=self.timeout)
            return ((resp.json() or {}).get("clusterInfo") or {}).get("haState")
        except (requests.RequestException, ValueError):
            return None

    def started_on(self) -> Optional[int]:
        """When this RM (incarnation) started, in ms (None if it does not say)."""
        return ((self._get(INFO) or {}).get("clusterInfo") or {}).get("startedOn")

    def _get(self, path: str, **params: Any) -> Any:
        resp = self._request("GET", path, params=params or None)
        if resp.status_code == 404:
            raise JobNotFoundError(f"the ResourceManager has no {path}")
        if resp.status_code in (401, 403) and self.with_token:
            raise CredentialsError(f"the ResourceManager refused this application's delegation token "
                                   f"(HTTP {resp.status_code} to GET {path}: {daemon_says(resp.text)})")
        if resp.status_code == 403:
            raise AccessDeniedError(f"YARN refused {yarn_user()} GET {path}: a job's view ACL (acls.view in its job "
                                    "file) does not name them; its owner, those it names and the cluster's admins "
                                    "(yarn.admin.acl) may see it")
        if resp.status_code >= 400:
            raise BackendError(f"the ResourceManager answered {resp.status_code} to GET {path}: {resp.text[:300]}")
        try:
            return resp.json()
        except ValueError:
            raise BackendError(f"the ResourceManager sent no JSON for {path}") from None

    # -- cluster ------------------------------------------------------------
    def nodes(self) -> List[Dict[str, Any]]:
        return ((self._get("/ws/v1/cluster/nodes") or {}).get("nodes") or {}).get("node") or []

    def running_nodes(self) -> List[Dict[str, Any]]:
        return [n for n in self.nodes() if n.get("state") == "RUNNING"]

    def conf_value(self, key: str) -> Optional[str]:
        try:
            data = self._get("/conf", name=key)
        except (BackendError, JobNotFoundError):
            return None
        # One property asked by name comes as {"property": {...}}; the whole config as a list.
        props = (data or {}).get("properties") or (data or {}).get("property") or []
        for prop in props if isinstance(props, list) else [props]:
            if isinstance(prop, dict) and prop.get("key") == key:
                return prop.get("value")
        return None

    def resource_types(self) -> List[str]:
        metrics = (self._get("/ws/v1/cluster/metrics") or {}).get("clusterMetrics") or {}
        total = metrics.get("totalClusterResourcesAcrossPartition") or {}
        infos = (total.get("resourceInformations") or {}).get("resourceInformation") or []
        return [i.get("name") for i in infos if i.get("name")] or ["memory-mb", "vcores"]

    def scheduler(self) -> Dict[str, Any]:
        """The scheduler's queues, as ``/ws/v1/cluster/scheduler`` gives them."""
        return self._get("/ws/v1/cluster/scheduler") or {}

    def queues(self) -> List[str]:
        info = ((self.scheduler() or {}).get("scheduler") or {}).get("schedulerInfo") or {}
        out: List[str] = []

        def walk(q: Dict[str, Any]) -> None:
            children = (q.get("queues") or {}).get("queue") or []
            if not children and q.get("queueName"):
                out.append(q["queueName"])
            for c in children:
                walk(c)

        walk(info)
        return out

    def node_labels(self) -> List[str]:
        try:
            data = self._get("/ws/v1/cluster/get-node-labels")
        except (BackendError, JobNotFoundError):
            return []
        labels = (data or {}).get("nodeLabelInfo") or (data or {}).get("nodeLabel") or []
        if isinstance(labels, dict):
            labels = [labels]
        return [x.get("name") if isinstance(x, dict) else str(x) for x in labels]

    def limits(self) -> ClusterLimits:
        """Per-container maxima: the configured maximum, capped by the largest node.

        Hadoop 3.1's scheduler JSON has no maximum allocation, and the RM enforces
        min(configured, largest node); GPUs have no configured maximum there.
        """
        nodes = self.running_nodes()
        mem = vc = gpu = 0
        for n in nodes:
            total = resources_of(n.get("usedResource")) 
            avail = resources_of(n.get("availableResource"))
            mem = max(mem, total.get("memory-mb", n.get("usedMemoryMB", 0)) + avail.get("memory-mb", n.get("availMemoryMB", 0)))
            vc = max(vc, total.get("vcores", n.get("usedVirtualCores", 0)) + avail.get("vcores", n.get("availableVirtualCores", 0)))
            gpu = max(gpu, total.get(GPU, 0) + avail.get(GPU, 0))
        conf_mem, conf_vc = self.conf_value("yarn.scheduler.maximum-allocation-mb"), self.conf_value("yarn.scheduler.maximum-allocation-vcores")
        if conf_mem and conf_mem.isdigit():
            mem = min(mem, int(conf_mem)) if nodes else int(conf_mem)
        if conf_vc and conf_vc.isdigit():
            vc = min(vc, int(conf_vc)) if nodes else int(conf_vc)
        return ClusterLimits(max_memory_mb=mem, max_vcores=vc, max_gpus=gpu, resource_types=self.resource_types(),
                             queues=self.queues(), nodes=[n.get("nodeHostName") for n in nodes if n.get("nodeHostName")])

    def queue_headroom(self, queue: str) -> str:
        """A short word on a queue's free resources, for diagnostics."""
        try:
            metrics = (self._get("/ws/v1/cluster/metrics") or {}).get("clusterMetrics") or {}
        except BackendError:
            return ""
        return (f"cluster free: {metrics.get('availableMB')} MiB, {metrics.get('availableVirtualCores')} vcores; "
                f"{metrics.get('appsPending', 0)} apps pending, queue {queue}")

    # -- applications ----------------------------------------------------------
    def app(self, app_id: str) -> Dict[str, Any]:
        try:
            return (self._get(f"/ws/v1/cluster/apps/{app_id}") or {}).get("app") or {}
        except JobNotFoundError:
            raise JobNotFoundError(f"YARN knows no application {app_id}") from None

    def apps(self, tags: Optional[List[str]] = None, states: Optional[List[str]] = None,
             user: Optional[str] = None) -> List[Dict[str, Any]]:
        params: Dict[str, Any] = {}
        if tags:
            params["applicationTags"] = ",".join(tags)
        if states:
            params["states"] = ",".join(states)
        if user:
            params["user"] = user
        return ((self._get("/ws/v1/cluster/apps", **params) or {}).get("apps") or {}).get("app") or []

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        """Kill an application; ``diagnostics`` (3.1+) become YARN's diagnostics of it."""
        body = {"state": "KILLED", **({"diagnostics": diagnostics} if diagnostics else {})}
        resp = self._request("PUT", f"/ws/v1/cluster/apps/{app_id}/state", json=body)
        if resp.status_code == 404:
            raise JobNotFoundError(f"YARN knows no application {app_id}")
        if resp.status_code == 403:
            raise AccessDeniedError(f"YARN refused {yarn_user()} to kill {app_id}: the job's modify ACL (acls.modify "
                                    "in its job file) does not name them; its owner, those it names and the "
                                    "cluster's admins (yarn.admin.acl) may kill it")
        if resp.status_code >= 400:
            raise BackendError(f"YARN refused to kill {app_id}: {resp.status_code} {resp.text[:300]}")

    def app_attempts(self, app_id: str) -> List[Dict[str, Any]]:
        """The application's attempts, oldest first: ``id``, ``containerId`` (the AM's), ``nodeHttpAddress``."""
        return ((self._get(f"/ws/v1/cluster/apps/{app_id}/appattempts") or {}).get("appAttempts") or {}).get("appAttempt") or []

    def am_container(self, app_id: str) -> Dict[str, Any]:
        attempts = self.app_attempts(app_id)
        return attempts[-1] if attempts else {}

    def proxy_get(self, app_id: str, path: str, timeout: float = 5.0) -> Optional[Any]:
        """GET ``path`` from the AM's own HTTP endpoint, through the RM's web proxy."""
        try:
            resp = self.session.get(f"{self.url}/proxy/{app_id}/pages/subm{path}", timeout=timeout)
        except requests.RequestException:
            return None
        if resp.status_code != 200:
            return None
        try:
            return resp.json()
        except ValueError:
            return None


def withheld(app: Dict[str, Any]) -> bool:
    """Whether the RM's record of an application is the one it shows a user outside the job's
    view ACL (YARN's VIEW_APP): no start time (Hadoop's ``AppInfo`` fills the times, the AM's
    container and its resources only for those who may view it; every application has a start
    time from its submission on)."""
    return bool(app) and not app.get("startedTime")


def view_refused(app: Dict[str, Any], app_id: str) -> AccessDeniedError:
    """The one line for a user YARN does not let see a job (``subm status/logs/wait``)."""
    me, owner = yarn_user(), app.get("user") or "its owner"
    return AccessDeniedError(f"{me} may not view {app_id} (owner {owner}): {me} is not in the job's view ACL "
                             f"(acls.view in its job file, YARN's VIEW_APP); ask {owner} to add {me} to "
                             "acls.view, or a YARN admin (yarn.admin.acl) to look")


def resources_of(block: Optional[Dict[str, Any]]) -> Dict[str, int]:
    infos = ((block or {}).get("resourceInformations") or {}).get("resourceInformation") or []
    return {i["name"]: int(i.get("value") or 0) for i in infos if "name" in i}
