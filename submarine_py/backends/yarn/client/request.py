"""What the YARN backend submits, built whole before anything is submitted: skein's application
spec (with the gang's containers when they are asked for with the application), the job file the
AM reads, and where :meth:`YarnBackend.submit` writes what skein ships. ``subm run --dry-run``
prints this request; ``submit`` sends it unchanged.
"""
from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from ....errors import BackendError
from ....home import subm_home
from ....plan import Plan
from . import shipping
from .app_spec import EXECUTOR_FILE, JOB_FILE, YarnOptions, build_application_spec
from ..protocol import GANG_ASKED_AT_SUBMISSION
from .shared_executor import SharedExecutor
from .travel import Travel


@dataclass(frozen=True)
class YarnRequest:
    """What :meth:`YarnBackend.submit` hands skein, built before submitting (``--dry-run`` prints it)."""

    plan: Plan
    #: The ``skein.ApplicationSpec``: the AM (skein's master) and one service per role.
    app_spec: Any
    #: The job file the AM reads (shipped to every container as ``subm_job.json``); submit() adds
    #: only the moment of submission (``submitted_at``) and the job's secret (``token``).
    job: Mapping[str, Any]
    #: Where :meth:`YarnBackend.submit` writes ``job`` for skein to ship (mode 0600, removed after
    #: submitting): the one file each job ships, which also carries the job's secret, since YARN
    #: localizes it into each container's private directory (``app_spec.JOB_FILE``).
    job_file: str
    #: The job's secret, shared by the AM and the executors; never printed.
    token: str
    #: Where :meth:`YarnBackend.submit` packs the job's local files for skein to ship, if any.
    files_archive: Optional[str] = None
    #: Where :meth:`YarnBackend.submit` writes the executor with its modules, as one file, where
    #: it travels with the job (None: its shared copy on the cluster's filesystem, ``shared_executor``).
    executor_bundle: Optional[str] = None
    #: The executor's shared copy (uploaded by submit() where it is not there yet).
    shared_executor: Optional[SharedExecutor] = None
    #: The whole gang is asked for with the application (it fitted when the request was built).
    gang_with_application: bool = False
    #: The submitting environment's parts, which submit() packs and uploads where the cluster lacks them.
    travel: Optional[Travel] = None

    def describe(self) -> str:
        head = (f"# YARN backend: skein's ApplicationSpec; {JOB_FILE} is the validated spec, "
                f"written to {self.job_file} at submission\n")
        if self.gang_with_application:
            head += "# the whole gang fits now: its containers are asked for with the application\n"
        if self.shared_executor:
            head += (f"# the executor: {self.shared_executor.uri}, shared by every job"
                     + ("\n" if self.shared_executor.present else " (uploaded at submission: not there yet)\n"))
        if self.travel:
            head += ("# the environment travels (packed and uploaded at submission where the cluster lacks it): "
                     + ", ".join(p.uri for p in self.travel.parts) + "\n")
        return (head + self.app_spec.to_yaml()).replace(self.token, "<token>")

    def to_dict(self) -> Dict[str, Any]:
        data = {"backend": "yarn", "job_file": self.job_file, "gang_with_application": self.gang_with_application,
                "shared_executor": ({"uri": self.shared_executor.uri, "present": self.shared_executor.present}
                                    if self.shared_executor else None),
                "travel": [p.uri for p in self.travel.parts] if self.travel else [],
                "application_spec": self.app_spec.to_dict()}
        return json.loads(json.dumps(data).replace(self.token, "<token>"))


def build_request(plan: Plan, rm_urls: Sequence[str], node_hosts: Sequence[str] = (),
                  gang_with_application: bool = False, travel: Optional[Travel] = None,
                  shared_executor: Optional[SharedExecutor] = None, ca_bundle: Optional[str] = None) -> YarnRequest:
    """The whole request for ``plan``: files named (in a private folder submit() creates), the
    app spec, the job file's content. Builds, writes nothing."""
    token = secrets.token_hex(32)
    job_dir = os.path.join(tempfile.gettempdir(), f"subm-{secrets.token_hex(8)}")
    job_file = os.path.join(job_dir, "job.json")
    files_archive = (os.path.join(job_dir, shipping.FILES_ARCHIVE.lstrip("."))
                     if shipping.local_sources(plan.job.files) else None)
    executor_bundle = None if shared_executor else os.path.join(job_dir, EXECUTOR_FILE)
    archive = plan.job.environment.archive
    opts = YarnOptions(job_file=job_file, rm_urls=tuple(rm_urls), node_hosts=tuple(node_hosts), ca_bundle=ca_bundle,
                       archive_sha256=archive_checksum(archive) if archive and "://" not in archive else None,
                       files_archive=files_archive,
                       executor_bundle=shared_executor.uri if shared_executor else executor_bundle,
                       gang_with_application=gang_with_application, travel=travel)
    job = {"name": plan.job.name, "spec": plan.job.to_dict()}
    if gang_with_application:
        job[GANG_ASKED_AT_SUBMISSION] = True
    return YarnRequest(plan=plan, app_spec=build_application_spec(plan, opts), job=job, job_file=job_file,
                       token=token, files_archive=files_archive, executor_bundle=executor_bundle,
                       shared_executor=shared_executor, gang_with_application=gang_with_application,
                       travel=travel)


def require_skein() -> Any:
    """skein, or an error saying how to install it (it is the ``yarn`` extra, not a dependency)."""
    try:
        import skein
    except ImportError:
        raise BackendError(f"the YARN backend needs skein, which is not installed for {sys.executable}: "
                           "pip install 'submarine-py[yarn]' (in the environment that runs subm)") from None
    return skein


def archive_checksum(path: str) -> str:
    """sha256 of a local environment archive: the key of the nodes' environment cache.

    Remembered in ``$SUBM_HOME/archive-sums.json`` by path, size and mtime, so that
    submitting the same archive again does not read hundreds of MB again.
    """
    from ....executor.envcache import sha256_of

    st = os.stat(path)
    key = f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}"
    memo_path = os.path.join(subm_home(), "archive-sums.json")
    try:
        with open(memo_path) as f:
            memo = json.load(f)
    except (OSError, ValueError):
        memo = {}
    if not isinstance(memo, dict) or not isinstance(memo.get(key), str):
        memo = memo if isinstance(memo, dict) else {}
        memo[key] = sha256_of(path)
        memo = dict(list(memo.items())[-50:])
        try:
            os.makedirs(os.path.dirname(memo_path), exist_ok=True)
            with open(memo_path + ".tmp", "w") as f:
                json.dump(memo, f)
            os.replace(memo_path + ".tmp", memo_path)
        except OSError:
            pass  # only a memo
    return memo[key]
