"""Entry point of the ApplicationMaster process: ``python -m submarine_py.runtime.am_main``.

    am_main local JOB_DIR      the local backend (started by ``subm run``)
    am_main yarn JOB_FILE      skein's master script on YARN
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
from typing import Any, Callable, Dict, Optional

from ..plan import make_plan
from ..spec.model import JobSpec
from .am import ApplicationMaster
from .server import serve


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")


def load_job_file(path: str) -> Dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def run_am(am: ApplicationMaster, bind_host: str, advertise_host: str,
           on_ready: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """Serve the AM's endpoint, hand signals to it, and run the job to its end."""
    server, port = serve(am, host=bind_host)
    am.url = f"http://{advertise_host}:{port}"
    am.driver.set_status_url(am.url)
    if on_ready:
        on_ready()

    def on_signal(signum: int, frame: Any) -> None:
        am.kill_requested = f"received {signal.Signals(signum).name}"

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return am.run()
    finally:
        server.shutdown()


def main_local(job_dir: str) -> int:
    from ..backends.local.driver import LocalDriver

    meta = load_job_file(os.path.join(job_dir, "job.json"))
    spec = JobSpec.from_dict(meta["spec"], base_dir=meta.get("base_dir"))
    plan = make_plan(spec)
    host = os.environ.get("SUBM_LOCAL_HOST", "127.0.0.1")
    driver = LocalDriver(job_dir, meta["app_id"], dict(spec.files), host=host)
    am = ApplicationMaster(plan, meta["app_id"], driver, submitted_at=meta["submitted_at"],
                           report_path=os.path.join(job_dir, "report.json"))
    info_path = os.path.join(job_dir, "am.json")

    def write_info() -> None:
        fd = os.open(info_path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "url": am.url, "token": am.token}, f)
        os.replace(info_path + ".tmp", info_path)

    report = run_am(am, host, host, on_ready=write_info)
    return 0 if report["state"] == "SUCCEEDED" else 1


def main(argv: list) -> int:
    setup_logging()
    if len(argv) != 2 or argv[0] not in ("local", "yarn"):
        print("usage: python -m submarine_py.runtime.am_main local JOB_DIR | yarn JOB_FILE", file=sys.stderr)
        return 2
    if argv[0] == "local":
        return main_local(argv[1])
    from ..backends.yarn.driver import main_yarn

    return main_yarn(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
