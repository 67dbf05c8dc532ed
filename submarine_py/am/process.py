"""What every ApplicationMaster process does, whichever backend started it.

The entry points are the backends' own (``python -m submarine_py.backends.local.am_main``,
``python -m submarine_py.backends.yarn.am.main``): each builds its :class:`Containers`,
has :func:`make_am` pick the AM's strategy, and hands the AM to :func:`run_am`. Nothing here
imports a backend.
"""
from __future__ import annotations

import json
import logging
import signal
import sys
from typing import Any, Callable, Dict, Optional

from ..plan import Plan, make_plan
from ..report import SIGNALLED, JobReport
from .containers import Containers
from .master import ApplicationMaster
from .shell import AM, Shell
from .sweep.master import SweepMaster
from .server import serve
from ..jobfile.validate import spec_from_dict


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")


def load_job_file(path: str) -> Dict[str, Any]:
    """The job file a backend hands its AM (``job.json``): the spec and submission facts."""
    with open(path) as f:
        return json.load(f)


def plan_of(meta: Dict[str, Any], check_files: bool = True) -> Plan:
    """The plan of a job file's validated spec (its file sources are already absolute)."""
    return make_plan(spec_from_dict(meta["spec"], check_files=check_files))


def make_am(plan: Plan, job_id: str, containers: Containers, **kw: Any) -> Shell:
    """The AM for ``plan``, the one place its strategy is picked: a sweep's for a job with a
    ``sweep`` section, else a gang job's (the keywords are the shell's and the strategy's)."""
    strategy = SweepMaster if plan.job.sweep is not None else ApplicationMaster
    return strategy(plan, job_id, containers, **kw)


def run_am(am: AM, bind_host: str, advertise_host: str,
           on_ready: Optional[Callable[[], None]] = None) -> JobReport:
    """Serve the AM's endpoint, hand signals to it, and run the job to its end."""
    server, port = serve(am, host=bind_host)
    am.url = f"http://{advertise_host}:{port}"
    am.containers.set_status_url(am.url)
    if on_ready:
        on_ready()

    def on_signal(signum: int, frame: Any) -> None:
        am.signalled = signal.Signals(signum).name
        am.kill_requested = f"{SIGNALLED} {am.signalled}"

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return am.run()
    finally:
        server.shutdown()
