"""The YARN backend's ApplicationMaster process: ``python -m submarine_py.backends.yarn.am_main JOB_FILE``.

skein's master script (see ``app_spec``) runs it in the application's master
container; the executors' containers are skein services (:class:`YarnContainers`).
"""
from __future__ import annotations

import logging
import os
import socket
import sys
from typing import List, Mapping

from ...runtime.am import ApplicationMaster
from ...runtime.am_process import load_job_file, plan_of, run_am, setup_logging
from ...states import JobState
from .app_spec import TOKEN_FILE
from .containers import YarnContainers
from .rest import ResourceManager

log = logging.getLogger("subm.am.yarn")


def read_token(env: Mapping[str, str]) -> str:
    """The job's secret, from the file YARN localized (see ``app_spec.TOKEN_FILE``)."""
    with open(env.get("SUBM_TOKEN_FILE") or TOKEN_FILE) as f:
        return f.read().strip()


def main_yarn(job_file: str) -> int:
    """Run the job's AM in this container."""
    import skein

    meta = load_job_file(job_file)
    # The job's files were checked where it was submitted; YARN localized them.
    plan = plan_of(meta, check_files=False)
    app = skein.ApplicationClient.from_current()
    app_id = os.environ.get("SKEIN_APPLICATION_ID") or meta.get("app_id") or "application"
    rm = ResourceManager(os.environ.get("SUBM_RM_URL") or None, wait_seconds=0)  # the AM never blocks on it
    containers = YarnContainers(app, plan, rm=rm)
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
    am = ApplicationMaster(plan, app_id, containers, submitted_at=meta.get("submitted_at"),
                           token=read_token(os.environ),
                           report_path=os.path.join(log_dir, "subm-report.json"), shared_dir=shared, snapshots=True)
    host = os.environ.get("NM_HOST") or socket.getfqdn()
    try:
        report = run_am(am, "0.0.0.0", host)
    except Exception as exc:
        log.exception("the ApplicationMaster failed")
        app.shutdown(JobState.FAILED.value, f"the submarine ApplicationMaster failed: {exc}")
        return 1
    return 0 if report.state == JobState.SUCCEEDED else 1


def main(argv: List[str]) -> int:
    setup_logging()
    if len(argv) != 1:
        print(f"usage: python -m {__spec__.name if __spec__ else __name__} JOB_FILE", file=sys.stderr)
        return 2
    return main_yarn(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
