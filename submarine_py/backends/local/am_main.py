"""The local backend's ApplicationMaster process: ``python -m submarine_py.backends.local.am_main JOB_DIR``.

Started by ``subm run`` (:meth:`LocalBackend.submit`) in the job's directory;
runs the executors as local processes or Docker containers (:class:`LocalContainers`).
"""
from __future__ import annotations

import json
import os
import sys
from typing import List

from ...am.process import load_job_file, make_am, plan_of, run_am, setup_logging
from ...states import JobState
from .backend import SHARED_DIR
from .containers import LocalContainers


def main_local(job_dir: str) -> int:
    meta = load_job_file(os.path.join(job_dir, "job.json"))
    plan = plan_of(meta)
    host = os.environ.get("SUBM_LOCAL_HOST", "127.0.0.1")
    shared = os.path.join(job_dir, SHARED_DIR)
    os.makedirs(shared, exist_ok=True)
    containers = LocalContainers(job_dir, meta["app_id"], dict(plan.job.files), host=host, shared_dir=shared,
                                 submitted_at=meta["submitted_at"])
    am = make_am(plan, meta["app_id"], containers, submitted_at=meta["submitted_at"],
                 report_path=os.path.join(job_dir, "report.json"), shared_dir=shared)
    info_path = os.path.join(job_dir, "am.json")

    def write_info() -> None:
        fd = os.open(info_path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "url": am.url, "token": am.token}, f)
        os.replace(info_path + ".tmp", info_path)

    report = run_am(am, host, host, on_ready=write_info)
    return 0 if report.state == JobState.SUCCEEDED else 1


def main(argv: List[str]) -> int:
    setup_logging()
    if len(argv) != 1:
        print(f"usage: python -m {__spec__.name if __spec__ else __name__} JOB_DIR", file=sys.stderr)
        return 2
    return main_local(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
