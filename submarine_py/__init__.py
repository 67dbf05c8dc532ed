"""submarine-py: distributed deep-learning jobs on Hadoop YARN, or on this machine.

The Python API (``client.py``; docs/python-api.md): :func:`load` a job file, :func:`submit`
it, :func:`wait` for it, ask its :func:`status`, :func:`kill` it, read its :func:`logs`;
each answer a :class:`JobReport`, each error a :class:`SubmarineError`.

The API's names are imported on first use, so that importing a part of the package (the
job file's, the AM's) imports no backend: data flows one way (docs/architecture.md).
"""
import os
from typing import TYPE_CHECKING, Any, List

from .errors import BackendError, JobNotFoundError, SpecError, SubmarineError, WaitTimeout

if TYPE_CHECKING:
    from .client import (Job, Prepared, cluster, jobs, kill, load, logs, prepare, run, status, submit, wait,
                         write_logs)
    from .report import JobReport, TaskReport
    from .metrics import report_metric
    from .states import JobState, TaskState

__version__ = "0.1.0"
#: The folder holding this package: what an AM started from this tree puts on its PYTHONPATH
#: (both backends), so that it imports the code that submitted the job, installed or not.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = [
    "BackendError", "Job", "JobNotFoundError", "JobReport", "JobState", "Prepared", "SpecError", "SubmarineError",
    "TaskReport", "TaskState", "WaitTimeout", "__version__", "cluster", "jobs", "kill", "load", "logs", "prepare",
    "report_metric", "run", "status", "submit", "wait", "write_logs",
]
#: Name -> the module it comes from, imported on first use.
_LAZY = {**{name: "client" for name in ("Job", "Prepared", "cluster", "jobs", "kill", "load", "logs", "prepare",
                                        "run", "status", "submit", "wait", "write_logs")},
         "JobReport": "report", "TaskReport": "report", "JobState": "states", "TaskState": "states",
         # For a sweep's trials: prints ``name=value step=N`` (standard library only).
         "report_metric": "metrics"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
