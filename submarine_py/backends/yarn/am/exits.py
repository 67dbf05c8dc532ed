"""A YARN container's end in subm's words: its exit status, whether the cluster ended it itself
(preempted, its node lost: ``Ended.cause``), whether its node refused to launch it
(``refusals.py``: ``Ended.refusal``), and YARN's diagnostics tidied to one line. Asked by
``YarnContainers`` (the AM) for each container skein reports ended, and for a container in a
Docker image its NodeManager already knows ended."""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

from ....am.containers import Ended
from ....refusals import refusal
from ....states import Cause
from ..hadoop.nodemanager import nm_container, node_log
from .held import ContainerState

#: YARN diagnostics are kept to their end (where the NodeManager puts the stderr tail).
MAX_DIAGNOSTICS = 2000
#: NodeManager states of a container whose launch has ended (YARN's NM-side ContainerState).
NM_EXITED = ("EXITED_WITH_FAILURE", "DONE")
#: ``ContainerExitStatus.INVALID``: no exit status recorded (yet).
NO_EXIT_STATUS = -1000
#: ``ContainerExitStatus.KILLED_BY_APPMASTER``: a container the AM itself stopped.
KILLED_BY_AM = -105
#: YARN's exit statuses (``ContainerExitStatus``) of a container that the cluster ended itself:
#: no failure of the program, so its restart spends ``restart.max_cluster_restarts``.
#: Not among them: -103/-104 (over its memory: the program, or what it asked for), -105 (killed
#: by the AM: ours), -107 (after the application ended), -109 (too much log).
CLUSTER_EXIT_STATUSES = {
    -100: Cause.NODE_LOST,  # ABORTED: released on a node the RM declared lost (or never launched)
    -101: Cause.NODE_LOST,  # DISKS_FAILED: its node's disks failed
    -102: Cause.PREEMPTED,  # PREEMPTED: taken back for a queue under its guaranteed share
    -106: Cause.PREEMPTED,  # KILLED_BY_RESOURCEMANAGER: how the NodeManager records a preempted container
    -108: Cause.PREEMPTED,  # KILLED_BY_CONTAINER_SCHEDULER: an opportunistic container preempted
}
#: The RM's words for the same, for when the NodeManager no longer knows the exit status
#: (skein passes on the RM's diagnostics of a container that ended with a negative status).
CLUSTER_DIAGNOSTICS = (
    ("preempted by scheduler", Cause.PREEMPTED),
    ("killed by resourcemanager", Cause.PREEMPTED),
    ("released on a *lost* node", Cause.NODE_LOST),
    ("disks failed", Cause.NODE_LOST),
)


def container_end(c: Any, state: str, info: Optional[Dict[str, Any]] = None) -> Ended:
    """A finished container, with YARN's exit status and reason (from its NodeManager:
    ``info``, its container record, when already asked)."""
    code, reason = None, ""
    if c.yarn_node_http_address and c.yarn_container_id:
        if info is None:
            info = nm_container(c.yarn_node_http_address, c.yarn_container_id, timeout=2.0)
        code, reason = info.get("exitCode"), tidy(info.get("diagnostics") or "")
    message = (c.exit_message or "").strip()
    if not reason or (message and message not in reason and not message.startswith("Container failed during")):
        reason = "; ".join(x for x in (message, reason) if x)
    code = int(code) if code not in (None, NO_EXIT_STATUS) else None
    cause = cluster_cause(code, f"{message} {reason}")  # YARN's words only, not the log's
    if state == ContainerState.FAILED and cause is None and c.yarn_node_http_address and c.yarn_container_id:
        # skein sends the script's output to <service>.log, not the stderr YARN quotes (not
        # asked where the cluster took the container: its log does not say why).
        tail = node_log(c.yarn_node_http_address, c.yarn_container_id, f"{c.service_name}.log", timeout=2.0)
        if tail:
            text = tail.decode("utf-8", "replace").strip()
            if text:
                reason += f"; its log ends: {tidy(text[-600:])}"
    where = f" on {c.yarn_node_http_address}" if c.yarn_node_http_address else ""
    words = f"YARN container {c.yarn_container_id or c.id}{where} {state}"
    if code is not None:
        words += f", exit status {code}"
    started = c.start_time.timestamp() if getattr(c, "start_time", None) else None
    # A refusal of the node (container-executor's or Docker's words in the NodeManager's
    # diagnostics, or the launch line's in the log): the AM fails the job at once.
    refused = refusal(code, reason) if state == ContainerState.FAILED else ""
    return Ended(c.id, code, f"{words}: {reason}" if reason else words, role=c.service_name,
                 started_at=started, refusal=refused, cause=cause)

def refused_at_node(c: Any) -> Optional[Ended]:
    """A container (skein's RUNNING) whose launch its NodeManager says the node refused, before
    YARN reports it ended; None when its NodeManager knows of no such end."""
    info = nm_container(c.yarn_node_http_address, c.yarn_container_id, timeout=1.0)
    if nm_failure(info) is None:
        return None
    ended = container_end(c, ContainerState.FAILED.value, info)
    return ended if ended.refusal else None


def nm_failure(info: Dict[str, Any]) -> Optional[int]:
    """The exit status of a container its NodeManager's record (``nm_container``) says ended in
    failure; None while it runs, or when it ended with 0 or no status."""
    code = info.get("exitCode")
    if info.get("state") not in NM_EXITED or code in (None, 0, NO_EXIT_STATUS):
        return None
    return int(code)


def cluster_cause(code: Optional[int], diagnostics: str) -> Optional[Cause]:
    """The cluster's fault that ended a container, from YARN's exit status (the NodeManager's) or
    YARN's diagnostics (the RM's, passed on by skein, and the NodeManager's); None: the program's
    exit, as far as YARN says."""
    if code in CLUSTER_EXIT_STATUSES:
        return CLUSTER_EXIT_STATUSES[code]
    # Else YARN's words (the NodeManager may record the 143 of a container it killed for the RM),
    # not the stderr the NodeManager quotes after them, which the program wrote.
    text = re.split(r"last \d+ bytes of", diagnostics.lower())[0]
    return next((cause for words, cause in CLUSTER_DIAGNOSTICS if words in text), None)


def tidy(diagnostics: str) -> str:
    """YARN's container diagnostics without Java stack frames, on one line, their end kept."""
    lines = [ln.strip() for ln in diagnostics.splitlines()]
    text = " ".join(ln for ln in lines if ln and not ln.startswith("at ") and not ln.startswith("..."))
    parts, seen = [], set()
    for part in re.split(r"\[\d{4}-\d\d-\d\d [\d:.]+\]", text):  # the NM stamps each message
        part = re.sub(r"\s+", " ", part).strip()
        if part and part not in seen:
            seen.add(part)
            parts.append(part)
    text = " ".join(parts)
    return text if len(text) <= MAX_DIAGNOSTICS else "..." + text[-MAX_DIAGNOSTICS:]
