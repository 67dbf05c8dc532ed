"""The AM side of the YARN backend: skein's ApplicationClient as the AM's :class:`Containers`.

Runs inside the application's master container (skein's master script, see
``am_main``). The first container of every task is requested with the
application itself; these add replacements, notices containers that ended (the executor normally
says so first, over HTTP), and hands the final state to YARN.
"""
from __future__ import annotations

import getpass
import logging
import os
import threading
import time
from typing import Dict, List, Optional

from ...plan import Plan, TaskPlan
from ...runtime.containers import Containers, Ended
from ...states import JobState
from .rest import ResourceManager, nm_container

log = logging.getLogger("subm.am.yarn")
POLL_SECONDS = 0.5
#: skein's ``ContainerState`` values of a container that has ended (skein's states, not a job's).
CONTAINER_ENDED = frozenset({"SUCCEEDED", "FAILED", "KILLED"})


class YarnContainers(Containers):
    name = "yarn"
    prelaunched = True
    replaces_lost = True

    def __init__(self, app, plan: Plan, user: Optional[str] = None, rm: Optional[ResourceManager] = None):
        self.app = app
        self.plan = plan
        self.user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        self.rm = rm
        self.containers: Dict[str, object] = {}
        self.reported: set = set()
        self.next_poll = 0.0
        self.lock = threading.Lock()

    def _refresh(self) -> List[object]:
        import skein

        found = self.app.get_containers(states=list(skein.model.ContainerState))
        with self.lock:
            for c in found:
                self.containers[c.id] = c
        return found

    # -- Containers -----------------------------------------------------------------
    def launch(self, task: TaskPlan, env: Dict[str, str]) -> str:
        # The secret comes with the service's files (a localized file); YARN would write a
        # variable into launch_container.sh, which the NodeManager serves to anyone.
        env = {k: v for k, v in env.items() if k != "SUBM_TOKEN"}
        c = self.app.add_container(task.role, env=dict(env, SUBM_INDEX=str(task.index)))
        with self.lock:
            self.containers[c.id] = c
        return c.id

    def poll(self) -> List[Ended]:
        now = time.monotonic()
        if now < self.next_poll:
            return []
        self.next_poll = now + POLL_SECONDS
        ended = []
        for c in self._refresh():
            state = str(c.state)
            if state in CONTAINER_ENDED and c.id not in self.reported:
                self.reported.add(c.id)
                code = None
                if c.yarn_node_http_address and c.yarn_container_id:
                    code = nm_container(c.yarn_node_http_address, c.yarn_container_id).get("exitCode")
                ended.append(Ended(c.id, int(code) if code not in (None, -1000) else None,
                                   f"container {c.yarn_container_id} {state}: {c.exit_message or ''}".strip(),
                                   role=c.service_name))
        return ended

    def kill(self, executor: str) -> None:
        try:
            self.app.kill_container(executor)
        except Exception as exc:  # already gone
            log.debug("kill_container(%s): %s", executor, exc)

    def describe(self, executor: str) -> str:
        c = self.containers.get(executor)
        if c is None:
            return "no container"
        where = f" on {c.yarn_node_http_address}" if c.yarn_node_http_address else ""
        return f"container {executor} {c.state}{where}"

    def describe_role(self, role: str) -> str:
        try:
            containers = [c for c in self._refresh() if c.service_name == role]
        except Exception:
            containers = []
        states: Dict[str, int] = {}
        for c in containers:
            states[str(c.state)] = states.get(str(c.state), 0) + 1
        word = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no container"
        if "REQUESTED" in states or "WAITING" in states:
            r = self.plan.job.roles[role].resources
            word += (f" (pending: YARN has not allocated them; each asks <memory:{r.memory_mb} MiB, "
                     f"vCores:{r.vcores}, yarn.io/gpu:{r.gpus}>")
            if self.rm is not None:
                word += "; " + self.rm.queue_headroom(self.plan.job.queue)
            word += ")"
        return f"containers of role {role}: {word}"

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
        c = self._container(executor)
        if c is None or not c.yarn_node_http_address:
            return ""
        return f"http://{c.yarn_node_http_address}/node/containerlogs/{c.yarn_container_id}/{self.user}"

    def stderr_location(self, task: TaskPlan, executor: Optional[str]) -> str:
        logs = self.log_location(task, executor)
        return f"{logs}/stderr" if logs else ""

    def details(self, executor: Optional[str]) -> Dict[str, str]:
        c = self.containers.get(executor) if executor else None
        if c is None:
            return {}
        return {"container_id": c.yarn_container_id or "", "node_http": c.yarn_node_http_address or ""}

    def set_status_url(self, url: str) -> None:
        # Through skein's web UI (the YARN tracking URL): .../proxy/<app>/pages/subm/
        self.app.ui.add_page("subm", url, link_name="Submarine job status")

    def finish(self, state: JobState, diagnostics: str) -> None:
        self.app.shutdown((state if state.is_terminal() else JobState.FAILED).value, diagnostics[:60000])
