"""The YARN backend's ApplicationMaster process: ``python -m submarine_py.backends.yarn.am.main JOB_FILE``.

skein's master script (see ``app_spec``) runs it in the application's master
container; the executors' containers are skein services (:class:`YarnContainers`).
"""
from __future__ import annotations

import logging
import os
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from ....report import JobReport
from ....am.process import load_job_file, make_am, plan_of, run_am, setup_logging
from ....am.reporting import write_json
from ....states import JobState, Phase
from ..attempts import last_left
from ..protocol import GANG_ASKED_AT_SUBMISSION, REPORT_FILE
from .containers import YarnContainers
from ..hadoop.addresses import AM_RM_URLS_ENV
from ..hadoop.resourcemanager import ResourceManager
from ..hadoop.spnego import without_kerberos
from .tokens import rm_token_header

log = logging.getLogger("subm.am.yarn")


def main_yarn(job_file: str) -> int:
    """Run the job's AM in this container."""
    import skein

    # The container holds YARN's tokens, not a Kerberos ticket: no SPNEGO here. The RM is read
    # with its delegation token; where that is refused, admission admits every gang at once
    # (YarnContainers.admit), and the NodeManagers' answers (diagnostics) go missing.
    without_kerberos()
    meta = load_job_file(job_file)
    # The job's files were checked where it was submitted; YARN localized them.
    plan = plan_of(meta, check_files=False)
    app = skein.ApplicationClient.from_current()
    app_id = os.environ.get("SKEIN_APPLICATION_ID") or meta.get("app_id") or "application"
    # The AM never blocks on the RM; on a secure cluster it reads it with the application's RM
    # delegation token (no ticket in a container).
    rm = ResourceManager(os.environ.get(AM_RM_URLS_ENV) or None, wait_seconds=0, token_headers=rm_token_header())
    containers = YarnContainers(app, plan, rm=rm, app_id=app_id, submitted_at=meta.get("submitted_at"),
                                gang_asked=bool(meta.get(GANG_ASKED_AT_SUBMISSION)))
    log_dir = (os.environ.get("LOG_DIRS") or ".").split(",")[0]
    shared_root = plan.job.shared_dir
    shared = os.path.join(shared_root, app_id) if shared_root else None
    if shared:  # one subfolder per job, made before any task starts
        try:
            os.makedirs(shared, exist_ok=True)
        except OSError as exc:
            why = (f"shared_dir: cannot create {shared} on {socket.getfqdn()}: {exc.strerror or exc}; "
                   "shared_dir must be a path every node mounts (NFS...) and the job's user can write")
            log.error(why)
            app.shutdown(JobState.FAILED.value, why)
            return 1
    report_path = os.path.join(log_dir, REPORT_FILE)
    am = make_am(plan, app_id, containers, submitted_at=meta.get("submitted_at"),
                 token=meta["token"], report_path=report_path, shared_dir=shared, snapshots=True)
    attempt = app_attempt(os.environ.get("CONTAINER_ID"))
    if attempt > 1:  # YARN started this AM because an earlier one was lost, or ended the job
        kind, previous, lost = earlier_attempts(rm, app_id, attempt)
        if kind == "final" and previous:
            return _repeat_verdict(app, previous, report_path, attempt)
        am.take_over(_as_report(previous), lost)
    host = os.environ.get("NM_HOST") or socket.getfqdn()
    try:
        report = run_am(am, "0.0.0.0", host)
    except Exception as exc:
        log.exception("the ApplicationMaster failed")
        app.shutdown(JobState.FAILED.value, f"the submarine ApplicationMaster failed: {exc}")
        return 1
    return 0 if report.state == JobState.SUCCEEDED else 1


def app_attempt(container_id: Optional[str]) -> int:
    """The application attempt a container belongs to: container_[e<epoch>_]<ts>_<app>_<attempt>_<n>."""
    parts = (container_id or "").split("_")
    try:
        return int(parts[-2]) if len(parts) >= 5 else 1
    except ValueError:
        return 1


def earlier_attempts(rm: ResourceManager, app_id: str,
                     attempt: int) -> Tuple[Optional[str], Optional[Dict[str, Any]], int]:
    """What the AMs of earlier attempts left in their report file (rewritten while they ran):
    ("final", the report, 0) when one decided the job's end; else ("state", the latest report
    one saved, attempts lost since), or (None, None, attempts lost) when none can be read
    (say their machine is gone)."""
    try:
        left = last_left(rm, app_id, before=attempt, timeout=3.0)
    except Exception as exc:
        log.warning("cannot read the earlier attempts of %s: %s", app_id, exc)
        left = None
    if left is None:
        return None, None, attempt - 1
    kind = "final" if left.decided else "state"
    log.info("attempt %s of %s left its report (%s, %s)", left.attempt, app_id, kind, left.container)
    return kind, left.report, attempt - left.attempt


def _as_report(saved: Optional[Dict[str, Any]]) -> Optional[JobReport]:
    try:
        return JobReport.from_dict(saved) if saved else None
    except (KeyError, TypeError, ValueError):
        return None


def _repeat_verdict(app, report: Dict[str, Any], report_path: str, attempt: int) -> int:
    """An earlier AM decided the job's end, but skein leaves the application to YARN's next
    attempt unless the attempt was the last (it unregisters only then): say it again at once."""
    state, diagnostics = str(report.get("state") or JobState.FAILED.value), str(report.get("diagnostics") or "")
    log.info("attempt %d: the job already ended %s; ending the application again", attempt, state)
    events = list(report.get("events") or [])
    events.append({"time": round(time.time(), 3),
                   "message": f"YARN attempt {attempt} started after the job had ended {state}; ended it again"})
    report = dict(report, events=events, phase=Phase.DONE.value, final=True)
    write_json(report_path, report)
    final = JobState(state) if state in JobState.__members__ else JobState.FAILED
    app.shutdown((final if final.is_terminal() else JobState.FAILED).value, diagnostics[:60000])
    return 0 if state == JobState.SUCCEEDED else 1


def main(argv: List[str]) -> int:
    setup_logging()
    if len(argv) != 1:
        print(f"usage: python -m {__spec__.name if __spec__ else __name__} JOB_FILE", file=sys.stderr)
        return 2
    return main_yarn(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
