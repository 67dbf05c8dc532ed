"""The AM side of the YARN backend: skein's ApplicationClient as the AM's :class:`Containers`.

Runs inside the application's master container (skein's master script, see
``main.py``). It asks for every container once admission says the gang fits (``add_container``),
except a first gang admitted at submission, which skein's AM asked for as it started (see
``capacity.admit_at_submission``: the AM takes those); notices containers that ended (the
executor normally says so first, over HTTP), and hands the final state to YARN.

Where a container runs (its YARN id and NodeManager) comes with its executor's registration.
The poll asks skein for ended containers only: every container of a large job, twice a
second for the whole job, cost the AM's two processes seconds of CPU while the gang started
(skein's AM serializes them over TLS). Only while a machine is avoided does it ask for running
ones too, to release those YARN places there.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ....errors import CredentialsError
from ....executor import protocol
from ....executor.protocol import PATH_LINE
from ....plan import Plan, TaskPlan
from ....admission import Room, Verdict, admit
from ....am.containers import Containers, Ended, Held
from ....states import GateState, JobState, Placement
from ..capacity import Capacity, not_granted, room_words
from ..protocol import LAUNCH_PAUSE_ENV, PROGRESS, UNPACKING_LOG
from .steward import Steward, Stewardship
from .dropped import Dropped
from .exits import container_end, refused_at_node
from .held import CONTAINER_ENDED, held_containers
from ..hadoop.addresses import nm_url
from ..hadoop.nodemanager import STILL_LOCALIZING, log_files, nm_answers, nm_container
from ..hadoop.resourcemanager import ResourceManager, yarn_user

log = logging.getLogger("subm.am.yarn")
POLL_SECONDS = 0.5


#: How long a machine whose executors fell silent is kept out of the job (YARN's own NodeManager
#: expiry is 10 minutes), unless its NodeManager answers again.
AVOID_SECONDS = 600
#: A container in a Docker image that has not registered this long after YARN allocated it is
#: asked after at its NodeManager, at most this often: a launch the node refused (refusals.py)
#: shows there at once, while YARN reports it only after the NodeManager's clean-up (5 s per
#: container, one after the other: yarn.nodemanager.process-kill-wait.ms), 5-10 s later.
PROBE_SECONDS = 2.0
class YarnContainers(Containers):
    name = "yarn"
    queues_requests = True

    def __init__(self, app, plan: Plan, user: Optional[str] = None, rm: Optional[ResourceManager] = None,
                 app_id: str = "", submitted_at: Optional[float] = None, gang_asked: bool = False,
                 stewardship: Optional[Stewardship] = None):
        self.app = app
        self.plan = plan
        self.user = user or yarn_user()
        self.rm = rm
        #: Room for the gang, from the RM (None without one: every gang is admitted at once).
        self.capacity = Capacity(rm, app_id, plan.job.queue) if rm is not None and app_id else None
        #: How this AM learns its gang's verdict from the line's steward, and stewards itself
        #: when it is the oldest (``steward.py``; issue 44).
        self.stewardship = stewardship or (Stewardship(app_id, Steward(rm, app_id, self.capacity))
                                           if rm is not None and self.capacity is not None else None)
        self.submitted_at = submitted_at or time.time()
        self.capacity_failed = False
        self.containers: Dict[str, object] = {}
        self.reported: set = set()
        self.next_poll = 0.0
        self.lock = threading.Lock()
        #: Containers the AM killed itself: their end needs no word from their NodeManager.
        self.killed: Set[str] = set()
        self.killed_at: Dict[str, float] = {}
        #: Machines (host of the NodeManager's web address) found dead: host -> when.
        self.avoided: Dict[str, float] = {}
        #: Containers seen allocated (skein's RUNNING) so far.
        self.placed: Set[str] = set()
        #: Where registered executors run: executor -> {"container": YARN id, "node_http": NM web}.
        self.where: Dict[str, Dict[str, str]] = {}
        #: When skein last gave every container (monotonic), for diagnostics asked in a row.
        self.refreshed_at = float("-inf")
        #: Roles whose tasks run in Docker images, and how many: while fewer of their executors
        #: are registered, unregistered containers are asked after (see PROBE_SECONDS).
        self.docker_roles = {role: spec.instances for role, spec in plan.job.roles.items()
                             if plan.task(role, 0).docker}
        self.next_probe = time.monotonic() + PROBE_SECONDS
        #: Containers skein had not allocated yet when last asked: :meth:`granted` asks skein at
        #: most every POLL_SECONDS (the AM's main loop calls it every round while a gang is asked
        #: for), and each container :meth:`launch` adds is pending until skein says otherwise.
        self.pending: Set[str] = set()
        self.pending_read_at = float("-inf")
        #: The gang was asked for with the application (admitted at submission: the services
        #: declare its tasks, which skein's AM asked for as it started): the first gang to start
        #: takes those containers instead of adding new ones. (role, index) -> skein's id.
        self.gang_asked = gang_asked
        #: Executors whose connection to the AM dropped: asked of their NodeManagers (dropped.py).
        self.dropped = Dropped(self._where, lambda ex: ex in self.reported or ex in self.killed, time.monotonic)
        self.asked_with_job: Dict[Tuple[str, int], str] = {}
        self.paused = False

    def _refresh(self, ended_only: bool = False) -> List[object]:
        import skein

        states = sorted(CONTAINER_ENDED) if ended_only else list(skein.model.ContainerState)
        found = self.app.get_containers(states=states)
        with self.lock:
            for c in found:
                self.containers[c.id] = c
        if not ended_only:
            self.refreshed_at = time.monotonic()
        return found

    def _fresh(self) -> None:
        """Every container as skein sees it, for a diagnostic: asked at most once per poll
        interval (a gang timeout describes each missing task and role in a row)."""
        if time.monotonic() - self.refreshed_at >= POLL_SECONDS:
            with contextlib.suppress(Exception):
                self._refresh()

    def _address(self, executor: str) -> Tuple[Optional[str], Optional[str]]:
        """(YARN container id, NodeManager web address) of an executor's container, if known."""
        seen = self.where.get(executor) or {}
        c = self.containers.get(executor)
        return (seen.get("container") or (c.yarn_container_id if c is not None else None),
                seen.get("node_http") or (c.yarn_node_http_address if c is not None else None))

    # -- Containers -----------------------------------------------------------------
    def admit(self, tasks: Sequence[TaskPlan], placement: Placement) -> Verdict:
        if self.gang_asked:
            verdict = self._take_asked(tasks)
            if verdict is not None:
                return verdict
        told = self._told(tasks, placement)
        if told is not None:
            return told
        gated = self._short_in_all(tasks)
        if gated is not None:
            return gated
        room = self._room()
        if room is None or self.capacity is None:
            return Verdict(True)
        me = self.capacity.me(tasks, self.submitted_at)
        return admit(me, room, now=time.time(), spread=placement == Placement.SPREAD)

    def _told(self, tasks: Sequence[TaskPlan], placement: Placement) -> Optional[Verdict]:
        """The verdict the line's steward told (``Stewardship.told``); None: decide alone."""
        if self.stewardship is None or self.capacity is None:
            return None
        return self.stewardship.told(self.capacity, tasks, self.plan.tasks, placement == Placement.SPREAD)

    def answer(self, path: str, query: Mapping[str, str]) -> Optional[Dict[str, Any]]:
        return self.stewardship.own.answer(query) if path == PATH_LINE and self.stewardship is not None else None

    def _short_in_all(self, tasks: Sequence[TaskPlan]) -> Optional[Verdict]:
        """No from the cluster's metrics alone (``Capacity.short_in_all``), where they say it."""
        if self.capacity is None:
            return None
        try:
            return self.capacity.short_in_all(self.capacity.me(tasks, self.submitted_at))
        except CredentialsError as exc:
            self._room_lost(exc)
        except Exception as exc:  # the room read whole says what is wrong, if anything
            log.debug("the cluster's metrics: %s", exc)
        return None

    def _room(self) -> Optional[Room]:
        """The cluster's room as the RM tells it, or None where it cannot be read: admission then
        lets the gang ask YARN as before (said once in the log)."""
        if self.capacity is None:
            return None
        try:
            room = self.capacity.room()
            if self.stewardship is not None:
                self.stewardship.learn(self.capacity.listed)
            return room
        except CredentialsError as exc:  # the job's RM delegation token is past its lifetime
            self._room_lost(exc)
        except Exception as exc:  # the RM's REST unreachable or refused: ask YARN as before
            if not self.capacity_failed:
                log.warning("cannot read the cluster's free resources (%s): asking for the gang without "
                            "admission", exc)
                self.capacity_failed = True
        return None

    def _room_lost(self, exc: Exception) -> None:
        """The RM no longer takes this job's delegation token: it never will again (the RM
        renews it only up to its maximum lifetime), so the room is not asked any more. The job
        goes on: YARN's own protocol (skein's AMRM token, which the RM rolls) needs no such token."""
        log.warning("cannot read the cluster's room any more: %s. The ResourceManager renews a job's "
                    "delegation token only up to yarn.resourcemanager.delegation.token.max-lifetime (7 days "
                    "by default) after submission. From now on every gang is asked for without admission "
                    "(YARN's scheduler places its containers as they come); the job goes on", exc)
        self.capacity = None

    def _take_asked(self, tasks: Sequence[TaskPlan]) -> Optional[Verdict]:
        """The first gang, asked for with the application: admitted (at submission) if skein's
        containers cover it; those no task of the gang takes (a task already done, at a later
        AM attempt) go back. None: ask admission as usual."""
        self.gang_asked = False
        try:
            found = self.app.get_containers(services=list(self.plan.job.roles),
                                            states=["WAITING", "REQUESTED", "RUNNING"])
        except Exception as exc:
            log.debug("get_containers: %s", exc)
            return None
        # An executor that registered meanwhile (its container came before this answer) took its
        # task itself: its container counts for the gang and is not killed here; if the gang must
        # wait, the AM gives it back itself (Allocation), as it does every executor it knows.
        by_task = {(c.service_name, c.instance): c for c in found}
        wanted = {(t.role, t.index) for t in tasks}
        covered = wanted.issubset(by_task) and self._still_fits(tasks)
        for key, c in by_task.items():
            if (key not in wanted or not covered) and c.id not in self.where:
                self.kill(c.id)
        if not covered:
            return None
        with self.lock:
            for key in wanted:
                self.containers[by_task[key].id] = by_task[key]
            self.asked_with_job = {key: by_task[key].id for key in wanted if by_task[key].id not in self.where}
        return Verdict(True, "admitted at submission: asked for with the application")

    def _still_fits(self, tasks: Sequence[TaskPlan]) -> bool:
        """Admission again, now that this application exists: a job submitted at the same moment
        was not in the room read at submission. Those of the gang's containers not granted yet
        must fit the room left, after the jobs that go first (an older one, one already asking).
        What the RM granted already is out of the room: as other AMs count it (``waiting_gangs``),
        the RM's count of this job's containers, less its AM, is what of the gang is granted.
        (Where the RM's REST cannot be read: as before, yes.)"""
        room = self._room()
        if room is None or self.capacity is None:
            return True
        rest = not_granted(tasks, self.capacity.running, self.capacity.reserved_mb, self.capacity.min_memory_mb)
        if not rest:
            return True
        verdict = admit(self.capacity.me(rest, self.submitted_at), room, now=time.time())
        if not verdict.fits:
            log.info("the gang asked for at submission no longer fits (%s): giving its containers back", verdict.why)
        return verdict.fits

    def admit_extra(self, task: TaskPlan, placement: Placement, asking: Sequence[TaskPlan] = ()) -> Verdict:
        """Room for one more container as the RM sees it, once none of this job's containers is
        still asked for: the RM's free resources do not count those yet, so growth asks for
        one container at a time, each as YARN grants the last."""
        try:
            waiting = self.app.get_containers(states=["WAITING", "REQUESTED"])
        except Exception as exc:
            log.debug("get_containers: %s", exc)
            return Verdict(False, "cannot read this job's containers from skein now")
        if waiting:
            return Verdict(False, f"{len(waiting)} container(s) of this job asked for and not granted yet")
        return self.admit([*asking, task], placement)

    def granted(self, executors: Sequence[str]) -> bool:
        now = time.monotonic()
        if now - self.pending_read_at >= POLL_SECONDS:
            try:
                waiting = self.app.get_containers(states=["WAITING", "REQUESTED"])
            except Exception as exc:
                log.debug("get_containers: %s", exc)
                return False
            self.pending, self.pending_read_at = {c.id for c in waiting}, now
        return not self.pending.intersection(executors)

    def announce(self, state: GateState) -> None:
        try:
            self.app.set_progress(PROGRESS[state])
        except Exception as exc:
            log.debug("set_progress: %s", exc)

    def registered(self, executor: str, info: Dict[str, Optional[str]]) -> None:
        if info.get("container") and info.get("node_http"):
            self.where[executor] = {"container": str(info["container"]), "node_http": str(info["node_http"])}
        with self.lock:  # a container asked for with the application found its task itself
            for key in [k for k, v in self.asked_with_job.items() if v == executor]:
                del self.asked_with_job[key]

    def given_back(self, executor: str) -> bool:
        return executor in self.killed

    def held(self) -> Optional[List[Held]]:
        if self.gang_asked:  # the gang asked for with the application is not taken yet
            return None
        with self.lock:
            aside = set(self.asked_with_job.values())
        return held_containers(self.app, self.plan.job.roles, aside, self.killed_at, time.monotonic())

    def launch(self, task: TaskPlan, env: Dict[str, str]) -> str:
        # The secret comes with the service's files (a localized file); YARN would write a
        # variable into launch_container.sh, which the NodeManager serves to anyone.
        env = {k: v for k, v in env.items() if k != protocol.TOKEN}
        if self.asked_with_job and not self.paused and os.environ.get(LAUNCH_PAUSE_ENV):
            self.paused = True  # (a test's hook: executors register meanwhile)
            time.sleep(float(os.environ[LAUNCH_PAUSE_ENV]))
        with self.lock:  # (registrations, on the server's threads, take theirs out)
            asked = self.asked_with_job.pop((task.role, task.index), None)
        if asked is not None:  # asked for with the application (its executor finds the AM itself)
            self.pending.add(asked)
            return asked
        c = self.app.add_container(task.role, env=dict(env, **{protocol.INDEX: str(task.index)}))
        with self.lock:
            self.containers[c.id] = c
        self.pending.add(c.id)
        return c.id

    def suspect(self, executor: str) -> None:
        self.dropped.add(executor)

    def _where(self, executor: str) -> Tuple[Any, Optional[str], Optional[str]]:
        return (self.containers.get(executor), *self._address(executor))

    def poll(self) -> List[Ended]:
        ended = self.dropped.ended()
        self.reported.update(e.executor for e in ended)
        now = time.monotonic()
        if now < self.next_poll:
            return ended
        self.next_poll = now + POLL_SECONDS
        for c in self._refresh(ended_only=not self.avoided):
            state = str(c.state)
            if state == "RUNNING" and c.id not in self.placed:
                self.placed.add(c.id)
                # An executor that registered, or one the AM released, was not placed just now.
                if c.id not in self.where and c.id not in self.killed:
                    refused = self._refuse_if_avoided(c)
                    if refused:
                        ended.append(refused)
            elif state in CONTAINER_ENDED and c.id not in self.reported:
                self.reported.add(c.id)
                if c.id not in self.killed:
                    ended.append(container_end(c, state))
        if self.docker_roles and now >= self.next_probe:
            self.next_probe = now + PROBE_SECONDS
            ended += self._refused_launches()
        return ended

    def _refused_launches(self) -> List[Ended]:
        """Containers in Docker images whose launch the node refused, asked of their NodeManagers
        before YARN reports them (only while some executor of such a role is not registered)."""
        registered = sum(1 for ex in self.where if ex not in self.reported
                         and getattr(self.containers.get(ex), "service_name", None) in self.docker_roles)
        if registered >= sum(self.docker_roles.values()):
            return []
        try:
            running = self.app.get_containers(services=list(self.docker_roles), states=["RUNNING"])
        except Exception as exc:
            log.debug("get_containers: %s", exc)
            return []
        out = []
        for c in running:
            with self.lock:
                self.containers[c.id] = c
            started = c.start_time.timestamp() if getattr(c, "start_time", None) else None
            if (c.id in self.where or c.id in self.killed or c.id in self.reported or not c.yarn_node_http_address
                    or not c.yarn_container_id or (started and time.time() - started < PROBE_SECONDS)):
                continue
            ended = refused_at_node(c)
            if ended is not None:
                log.info("the node refused %s before YARN said so: %s", c.yarn_container_id, ended.refusal)
                self.reported.add(c.id)
                out.append(ended)
        return out

    def _refuse_if_avoided(self, c: Any) -> Optional[Ended]:
        """A container YARN placed on a machine found dead (YARN thinks it alive for minutes)."""
        host = _host(c.yarn_node_http_address)
        since = self.avoided.get(host) if host else None
        if since is None:
            return None
        if time.monotonic() - since > AVOID_SECONDS or nm_answers(c.yarn_node_http_address):
            log.info("node %s answers again: no longer avoided", host)
            del self.avoided[host]
            return None
        self.kill(c.id)
        return Ended(c.id, None, f"YARN placed container {c.yarn_container_id} on {host}, whose executors "
                                 "fell silent and whose NodeManager does not answer: released",
                     role=c.service_name, counts=False)

    def kill(self, executor: str) -> None:
        self.killed.add(executor)
        self.killed_at[executor] = time.monotonic()
        try:
            self.app.kill_container(executor)
        except Exception as exc:  # already gone
            log.debug("kill_container(%s): %s", executor, exc)

    def lost(self, executor: str) -> None:
        if executor not in self.where:  # it registered with an earlier AM, or never: ask skein
            self._container(executor)
        node_http = self._address(executor)[1]
        host = _host(node_http)
        if host and not nm_answers(node_http):
            log.warning("node %s does not answer: keeping replacements off it", host)
            self.avoided.setdefault(host, time.monotonic())
        self.kill(executor)

    def localizing(self, executors: Sequence[str]) -> List[str]:
        """Containers whose NodeManager still localizes them (a first job on that node unpacks
        the travelling environment: minutes for gigabytes), asked of each one's NodeManager."""
        self._fresh()  # where each container went: unknown when it was asked for
        out = []
        for executor in executors:
            container, node = self._address(executor)
            seen = nm_container(node, container, timeout=1.0) if node and container else {}
            if str(seen.get("state", "")).upper() in STILL_LOCALIZING:
                out.append(f"container {executor} on {_host(node)} is being localized")
            elif UNPACKING_LOG in log_files(seen):  # its launch unpacks the environment's layers
                out.append(f"container {executor} on {_host(node)} is unpacking the environment's layers")
        return out

    def describe(self, executor: str) -> str:
        self._fresh()
        c = self.containers.get(executor)
        if c is None:
            return "no container"
        where = f" on {c.yarn_node_http_address}" if c.yarn_node_http_address else ""
        return f"container {executor} {c.state}{where}"

    def describe_role(self, role: str) -> str:
        self._fresh()
        containers = [c for c in list(self.containers.values()) if c.service_name == role]
        states: Dict[str, int] = {}
        for c in containers:
            states[str(c.state)] = states.get(str(c.state), 0) + 1
        word = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no container"
        if "REQUESTED" in states or "WAITING" in states:
            r = self.plan.job.roles[role].resources
            word += (f" (pending: YARN has not allocated them; each asks <memory:{r.memory_mb} MiB, "
                     f"vCores:{r.vcores}, yarn.io/gpu:{r.gpus}>")
            if self.rm is not None:
                word += "; " + self._room_words()
            word += ")"
        return f"containers of role {role}: {word}"

    def _room_words(self) -> str:
        """What the job's queue and each node have free, GPUs first (for diagnostics)."""
        if self.capacity is None:
            return self.rm.queue_headroom(self.plan.job.queue) if self.rm is not None else ""
        try:
            room = self.capacity.room()
        except CredentialsError as exc:
            self._room_lost(exc)
            return ""
        except Exception:
            return self.rm.queue_headroom(self.plan.job.queue) if self.rm is not None else ""
        return room_words(room, self.plan.job.queue)

    def _container(self, executor: Optional[str]):
        if not executor:
            return None
        c = self.containers.get(executor)
        if c is None or not getattr(c, "yarn_container_id", None):
            try:
                self._refresh()
            except Exception:
                return None
            c = self.containers.get(executor)
        return c

    def log_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        if not executor:
            return ""
        if executor in self.pending and executor not in self.where:
            # Just asked for (launch): YARN has placed it nowhere yet, so skein knows no log
            # either. Its registration says where it runs. (Asking skein here cost a call
            # listing every container for each container of a gang, under the job's lock.)
            return ""
        if executor not in self.where:
            self._container(executor)  # asks skein where the container runs, if not known yet
        container, node_http = self._address(executor)
        if not node_http or not container:
            return ""
        return f"{nm_url(node_http)}/node/containerlogs/{container}/{self.user}"

    def stderr_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        logs = self.log_location(task, executor)
        return f"{logs}/stderr" if logs else ""

    def details(self, executor: Optional[str]) -> Dict[str, str]:
        if not executor or (executor not in self.where and executor not in self.containers):
            return {}
        container, node_http = self._address(executor)
        return {"container_id": container or "", "node_http": node_http or ""}

    def set_status_url(self, url: str) -> None:
        # Through skein's web UI (the YARN tracking URL): .../proxy/<app>/pages/subm/
        self.app.ui.add_page("subm", url, link_name="Submarine job status")

    def finish(self, state: JobState, diagnostics: str) -> None:
        self.app.shutdown((state if state.is_terminal() else JobState.FAILED).value, diagnostics[:60000])


def _host(node_http: Optional[str]) -> Optional[str]:
    return node_http.rsplit(":", 1)[0] if node_http else None
