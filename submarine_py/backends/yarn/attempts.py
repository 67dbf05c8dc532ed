"""A YARN application's attempts: how many the job gets, the report each AM attempt leaves, and
whether an earlier attempt already decided the job.

Asked by the application spec (``max_attempts``), by the AM of a later attempt (``am/main.py``: go
on from the job so far, or repeat a verdict) and by the client (``YarnBackend.status``: a
verdict that YARN's next attempt will only repeat is the end), so that the three agree.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ...jobfile.model import DEFAULT_MAX_RESTARTS, RestartSpec
from ...restarts import AM_ATTEMPTS_WITH_RESTARTS, Restarts
from ...states import JobState, Phase, RestartPolicy
from ...interpreters import NODE_LACKS
from .hadoop.nodemanager import node_log
from .protocol import REPORT_FILE

def am_attempts(restart: RestartSpec, sweep: bool = False) -> int:
    """YARN attempts of the application (see :attr:`Restarts.am_attempts`); a sweep's always
    has a second: its new AM goes on from the trials so far (its restart section does not apply)."""
    if sweep:
        return AM_ATTEMPTS_WITH_RESTARTS
    return Restarts(restart).am_attempts


def saved_am_attempts(spec: Optional[Mapping[str, Any]]) -> int:
    """:func:`am_attempts` of a job from the spec its report saved (``JobSpec.to_dict``)."""
    spec = spec or {}
    restart = spec.get("restart") or {}
    try:
        parsed = RestartSpec(policy=RestartPolicy(restart.get("policy", RestartPolicy.GANG.value)),
                             max_restarts=int(restart.get("max_restarts", DEFAULT_MAX_RESTARTS)))
    except (TypeError, ValueError, AttributeError):
        return 1
    return am_attempts(parsed, sweep=spec.get("sweep") is not None)


def decided(report: Mapping[str, Any]) -> bool:
    """Whether the AM that wrote ``report`` (its JSON) decided the job's end: a verdict reached
    (FINISHING or DONE, in a final state), whatever YARN made of the attempt afterwards."""
    return (report.get("phase") in (Phase.FINISHING.value, Phase.DONE.value)
            and report.get("state") in (JobState.SUCCEEDED.value, JobState.FAILED.value, JobState.KILLED.value))


@dataclass(frozen=True)
class Left:
    """What the latest AM attempt that left a readable report left."""

    #: The attempt's number (YARN's, from 1).
    attempt: int
    #: Its AM's container.
    container: str
    #: The report as its AM wrote it last (JSON).
    report: Dict[str, Any]

    @property
    def decided(self) -> bool:
        return decided(self.report)

    def repeated(self) -> bool:
        """Whether YARN starts another attempt whose AM only repeats this attempt's verdict:
        skein unregisters the application at once only after a success, or from the job's last
        attempt."""
        return (self.decided and self.report.get("state") != JobState.SUCCEEDED.value
                and self.attempt < saved_am_attempts(self.report.get("spec")))


def last_left(rm: Any, app_id: str, before: Optional[int] = None, timeout: float = 10.0) -> Optional[Left]:
    """The report the latest AM attempt (before attempt ``before``, if given) left in its log
    directory, read from its NodeManager; None when none can be read (say their machine is
    gone). The RM's errors reach the caller."""
    attempts = [a for a in rm.app_attempts(app_id) if before is None or int(a.get("id") or 0) < before]
    for a in sorted(attempts, key=lambda a: -int(a.get("id") or 0)):
        node, cid = a.get("nodeHttpAddress"), a.get("containerId")
        data = node_log(node, cid, REPORT_FILE, timeout=timeout) if node and cid else None
        try:
            found = json.loads(data) if data else None
        except ValueError:
            found = None
        if isinstance(found, dict):
            return Left(attempt=int(a.get("id") or 1), container=cid, report=found)
    return None


#: The log file of skein's AM container that holds the output of the script it runs (the
#: Python AM's launch lines: ``app_spec.master``).
DRIVER_LOG = "application.driver.log"


def node_could_not_start(rm: Any, app_id: str, timeout: float = 10.0) -> Optional[str]:
    """The one line the latest AM attempt's launch printed when its node could not start the
    ApplicationMaster (``interpreters.am_start_check``: which node, what it lacks, what to
    set), read from its NodeManager; None when it printed none or cannot be read."""
    attempt = rm.am_container(app_id)
    node, cid = attempt.get("nodeHttpAddress"), attempt.get("containerId")
    data = node_log(node, cid, DRIVER_LOG, timeout=timeout) if node and cid else None
    lines = [line.strip() for line in (data or b"").decode(errors="replace").splitlines()
             if line.startswith(NODE_LACKS)]
    return lines[-1][len("[subm] "):] if lines else None
