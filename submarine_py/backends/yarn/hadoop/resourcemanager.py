"""The YARN ResourceManager and NodeManager REST APIs, with ``requests``.

Everything the CLI needs after submission (status, list, kill, logs) goes
through here, so those commands never start a JVM. Every call names the user
(``user.name``, Hadoop's simple HTTP authentication), so YARN records who did
what and its ACLs apply. On a secure cluster, whose web endpoints answer 401 with
``WWW-Authenticate: Negotiate``, the call is made again with SPNEGO (``requests-gssapi``,
the Kerberos ticket of ``kerberos.py``'s login): every call carries an auth that acts
only on such an answer, so plain and secure clusters work alike without saying which.
Where the RMs are comes from ``addresses.py``. On an HA cluster every RM is tried, the active
one first: a standby's redirect to the active is followed, the RM that answered is remembered for
the command, and one that does not answer (restarting, failing over) is waited for over all of
them, up to ``SUBM_RM_WAIT`` seconds (120), saying so; a failover during a command is one line.
"""
from __future__ import annotations

import getpass
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlparse

import requests

from ....errors import AccessDeniedError, BackendError, CredentialsError, JobNotFoundError, SpecError
from ....states import Named
from . import addresses
from .spnego import http_auth

GPU = "yarn.io/gpu"
#: How long a command waits for a ResourceManager that does not answer, by default.
RM_WAIT_SECONDS = 120.0
#: HTTP answers of a ResourceManager that is up but not serving yet (starting, standby).
RM_NOT_READY = (502, 503, 504)
INFO = "/ws/v1/cluster/info"
#: Seconds a call waits at least where an RM says it is a standby (an election is under way:
#: ZooKeeper's session timeout, then the new active's recovery), whatever ``wait_seconds`` says.
ELECTION_SECONDS = 30.0
#: What ``apps(slim=True)`` asks the RM to leave out (``deSelects``), the most first: 3.1.1 and
#: 3.4.2 take every field named here; an RM that answers 400 to them is asked to leave out
#: ``resourceRequests`` alone, the first field YARN knew how to leave out (YARN-6280).
SLIM_APPS = ("resourceRequests,resourceInfo,timeouts,appNodeLabelExpression,amNodeLabelExpression",
             "resourceRequests")


class AppState(Named):
    """YARN's words, not subm's (``states.JobState``): an application's ``state`` in the RM's answers."""

    NEW = "NEW"
    NEW_SAVING = "NEW_SAVING"
    SUBMITTED = "SUBMITTED"
    ACCEPTED = "ACCEPTED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"  # its AM unregistered: ``finalStatus`` says how it ended
    FAILED = "FAILED"
    KILLED = "KILLED"


#: YARN's application states before its end, and after it (then nothing changes).
APP_LIVE = (AppState.NEW, AppState.NEW_SAVING, AppState.SUBMITTED, AppState.ACCEPTED, AppState.RUNNING)
APP_ENDED = (AppState.FINISHED, AppState.FAILED, AppState.KILLED)


class FinalStatus(Named):
    """YARN's words: a FINISHED application's ``finalStatus``, as its AM said when it unregistered."""

    UNDEFINED = "UNDEFINED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class NodeState(Named):
    """YARN's words: a NodeManager's ``state`` in ``/ws/v1/cluster/nodes``. Only RUNNING is read:
    the others (NEW, UNHEALTHY, DECOMMISSIONING, DECOMMISSIONED, LOST, REBOOTED, SHUTDOWN) run nothing."""

    RUNNING = "RUNNING"


def yarn_user() -> str:
    """Who YARN should see: on a secure cluster the Kerberos login's short name (``alice`` of
    ``alice@REALM``, as the default ``auth_to_local`` rule maps it); else HADOOP_USER_NAME (as
    Hadoop's own clients), else the login name."""
    from . import kerberos

    login = kerberos.active()
    if login is not None and login.principal:
        return login.principal.split("@")[0].split("/")[0]
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


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
    """The RMs' REST API. ``urls``: one RM's URL, several (an HA cluster's, or comma-separated),
    default the cluster's (``addresses.py``). ``wait_seconds``: how long one call waits out RMs
    that do not answer (default SUBM_RM_WAIT or 120 s); ``say`` hears what it waits for."""

    #: Seconds between two "still waiting" lines.
    say_every = 15.0
    #: Seconds of waiting before the first such line where there are several RMs (a failover
    #: takes some: it is said in one line once over).
    quiet_seconds = 10.0

    def __init__(self, urls: Union[str, Sequence[str], None] = None, timeout: float = 10.0,
                 wait_seconds: Optional[float] = None, say: Callable[[str], None] = say,
                 token_headers: Optional[Dict[str, str]] = None):
        if urls is None:
            urls = addresses.current().rm_urls
        self.urls: Tuple[str, ...] = addresses.from_urls(urls) if isinstance(urls, str) else tuple(
            u.rstrip("/") for u in urls)
        if not self.urls:
            raise SpecError([(addresses.RM_URLS_ENV, "names no ResourceManager URL")])
        #: The RM that answered last (an HA cluster's active one), asked first.
        self.active = 0
        self._answered = False
        self._slim = 0  # the first of SLIM_APPS this RM takes
        self.timeout = timeout
        self.wait_seconds = rm_wait_seconds() if wait_seconds is None else wait_seconds
        self.say = say
        self.session = addresses.prepare(requests.Session())
        self.session.auth = http_auth()  # the session keeps Hadoop's auth cookie: one SPNEGO exchange
        self.session.headers["Accept"] = "application/json"
        self.session.headers.update(token_headers or {})  # the AM's: its RM delegation token
        #: Whether calls carry a delegation token (the AM's) rather than the user's Kerberos login.
        self.with_token = bool(token_headers)
        self.session.params = {"user.name": yarn_user()}

    @property
    def url(self) -> str:
        """The RM asked first: the one that answered last."""
        return self.urls[self.active]

    def _order(self) -> List[int]:
        return [self.active] + [i for i in range(len(self.urls)) if i != self.active]

    def active_first(self) -> Tuple[str, ...]:
        """Every RM's URL, the one that answered last first."""
        return tuple(self.urls[i] for i in self._order())

    def _request(self, method: str, path: str, **kw: Any) -> requests.Response:
        """One call, to the RM that answered last, then to the others; again while none answers
        (or all answer that they are not ready), up to ``wait_seconds`` (ELECTION_SECONDS at least
        where there are several: one of them is being elected); then BackendError."""
        started, before = time.monotonic(), self.active
        said: Optional[float] = None
        wait = self.wait_seconds if len(self.urls) == 1 else max(self.wait_seconds, ELECTION_SECONDS)
        failures: Dict[str, str] = {}
        while True:
            for i in self._order():
                resp, why = self._try(self.urls[i], method, path, **kw)
                if not why:
                    self._answered_by(i, resp, before, failures, started, said is not None)
                    return resp
                failures[self.urls[i]] = why
            waited = time.monotonic() - started
            if waited >= wait:
                where = "; ".join(f"{u} ({w})" for u, w in failures.items())
                raise BackendError(f"cannot reach the YARN ResourceManager at {where}"
                                   + (f", waited {waited:.0f} s" if wait else "")
                                   + "; check HADOOP_CONF_DIR, or wait longer with SUBM_RM_WAIT=SECONDS") from None
            quiet = self.quiet_seconds if len(self.urls) > 1 else 0.0
            if waited >= quiet and (said is None or waited - said >= self.say_every):
                which = "ResourceManager at " + self.urls[0] if len(self.urls) == 1 else \
                    "ResourceManagers (" + "; ".join(f"{u}: {w}" for u, w in failures.items()) + ")"
                why = f" ({failures[self.urls[0]]})" if len(self.urls) == 1 else ""
                self.say(f"the YARN {which} do{'es' if len(self.urls) == 1 else ''} not answer{why}; waiting "
                         f"({waited:.0f} s so far, at most {wait:.0f} s: SUBM_RM_WAIT)")
                said = waited
            time.sleep(min(1.0, max(0.0, wait - waited)))

    def _try(self, url: str, method: str, path: str, **kw: Any) -> Tuple[Optional[requests.Response], str]:
        """``(answer, why it is no answer: '' where it is one)``."""
        try:
            resp = self.session.request(method, url + path, timeout=self.timeout, **kw)
        except requests.RequestException as exc:
            refused = addresses.untrusted(url, exc)
            if refused is not None:
                raise refused from None
            return None, _no_answer(exc)
        if resp.status_code in RM_NOT_READY:
            return resp, f"it answers HTTP {resp.status_code}"
        if resp.status_code in (301, 302, 303, 307, 308) and not resp.headers.get("Location"):
            return resp, "it is a standby that knows no active ResourceManager yet"
        if path == INFO and resp.status_code == 200 and len(self.urls) > 1:
            if ((_json(resp) or {}).get("clusterInfo") or {}).get("haState") == "STANDBY":
                return resp, "it is a standby"
        if resp.status_code == 404 and path != INFO:
            # A restarted RM answers before it has recovered its applications.
            state = self._ha_state(url)
            if state not in ("ACTIVE", None):
                return resp, f"it is {state}, recovering its applications"
        return resp, ""

    def _answered_by(self, i: int, resp: requests.Response, before: int, failures: Dict[str, str],
                     started: float, said: bool) -> None:
        """Remember who answered (where a standby redirected, the active it named), and say a
        failover or the end of a wait in one line."""
        if resp.history:  # a standby's redirect, followed
            netloc = urlparse(resp.url).netloc
            i = next((j for j, u in enumerate(self.urls) if urlparse(u).netloc == netloc), i)
        waited = time.monotonic() - started
        if said or (self._answered and i != before and failures):
            gone = "; ".join(f"{u} does not answer ({w})" for u, w in failures.items() if u != self.urls[i])
            if len(self.urls) > 1 and i != before:
                self.say(f"the YARN ResourceManager failed over: {gone or self.urls[before] + ' is a standby'}; "
                         f"{self.urls[i]} answers (after {waited:.0f} s)")
            else:
                self.say(f"the YARN ResourceManager at {self.urls[i]} answers again (after {waited:.0f} s)")
        self.active, self._answered = i, True

    def _ha_state(self, url: Optional[str] = None) -> Optional[str]:
        """An RM's haState (INITIALIZING while it recovers after a restart; ACTIVE; STANDBY)."""
        try:
            resp = self.session.get((url or self.url) + INFO, timeout=self.timeout, allow_redirects=False)
            return ((_json(resp) or {}).get("clusterInfo") or {}).get("haState")
        except requests.RequestException:
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
    def nodes(self, running_only: bool = False) -> List[Dict[str, Any]]:
        params = {"states": NodeState.RUNNING.value} if running_only else {}
        return ((self._get("/ws/v1/cluster/nodes", **params) or {}).get("nodes") or {}).get("node") or []

    def metrics(self) -> Dict[str, Any]:
        """The cluster's totals (``/ws/v1/cluster/metrics``): one small answer whatever its size."""
        return (self._get("/ws/v1/cluster/metrics") or {}).get("clusterMetrics") or {}

    def running_nodes(self) -> List[Dict[str, Any]]:
        return [n for n in self.nodes(running_only=True) if n.get("state") == NodeState.RUNNING]

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
             user: Optional[str] = None, slim: bool = False) -> List[Dict[str, Any]]:
        """The applications, filtered by the RM; ``slim``: without the parts admission never reads
        (each application's resource requests and per-partition usage: ~7.6 KB -> ~1.3 KB each
        on 3.4.2), as far as this RM knows how to leave them out (:data:`SLIM_APPS`)."""
        params = self._app_params(tags, states, user)
        while slim and self._slim < len(SLIM_APPS):
            try:
                return _apps(self._get("/ws/v1/cluster/apps", **params, deSelects=SLIM_APPS[self._slim]))
            except BackendError as exc:
                if " 400 " not in str(exc):
                    raise
                self._slim += 1  # an older RM (3.1) knows fewer of the fields to leave out
        return _apps(self._get("/ws/v1/cluster/apps", **params))

    @staticmethod
    def _app_params(tags: Optional[List[str]], states: Optional[List[str]], user: Optional[str]) -> Dict[str, Any]:
        params: Dict[str, Any] = {}
        if tags:
            params["applicationTags"] = ",".join(tags)
        if states:
            params["states"] = ",".join(states)
        if user:
            params["user"] = user
        return params

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        """Kill an application; ``diagnostics`` (3.1+) become YARN's diagnostics of it."""
        body = {"state": AppState.KILLED.value, **({"diagnostics": diagnostics} if diagnostics else {})}
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
        """GET ``path`` from the AM's own HTTP endpoint, through the RM's web proxy (each RM
        once, the active first: None when none serves it)."""
        for i in self._order():
            try:
                resp = self.session.get(f"{self.urls[i]}/proxy/{app_id}/pages/subm{path}", timeout=timeout)
            except requests.RequestException:
                continue
            if resp.status_code == 200:
                return _json(resp)
            if resp.status_code not in RM_NOT_READY and resp.status_code not in (301, 302, 303, 307, 308):
                return None
        return None



def _json(resp: requests.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def _no_answer(exc: Exception) -> str:
    """Why an RM gave no answer, in a few words."""
    text = str(exc)
    for words in ("Connection refused", "timed out", "Name or service not known", "No route to host"):
        if words in text:
            return words.lower() if words != "timed out" else "it timed out"
    return type(exc).__name__


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


def _apps(answer: Any) -> List[Dict[str, Any]]:
    return ((answer or {}).get("apps") or {}).get("app") or []


def resources_of(block: Optional[Dict[str, Any]]) -> Dict[str, int]:
    infos = ((block or {}).get("resourceInformations") or {}).get("resourceInformation") or []
    return {i["name"]: int(i.get("value") or 0) for i in infos if "name" in i}
