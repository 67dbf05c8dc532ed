"""The plan as a ``skein.ApplicationSpec`` (the "app spec"; the job's own spec is a JobSpec):
a pure function, apart from submitting.

Every role becomes a skein service with no instance at submission: the AM asks for the
containers once the whole gang fits (gang admission, ``am/allocation.py``), so a job that
waits holds no task container; unless the whole gang fits at submission
(``YarnOptions.gang_with_application``), when each service declares its tasks. Each job says its gang in a tag (``capacity.gang_tag``) for
the other jobs' admission. Containers find the AM through the RM's web proxy (the AM adds its
endpoint to skein's UI) and carry the job's token; the AM gives them its URL directly.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .... import PACKAGE_PARENT, interpreters
from ....jobfile.model import AclSpec, JobSpec
from ....plan import Plan, TaskPlan
from ....executor import main as executor_module, protocol
from . import shipping
from ..attempts import am_attempts
from ..capacity import gang_tag
from ..hadoop.addresses import AM_RM_URLS_ENV
from ..protocol import LAUNCH_PAUSE_ENV, TAG
from .travel import Travel, choose

#: What containers get of the executor: one file, its modules embedded (executor/bundle.py).
#: Executors run ``python -S``: standard library only, so the interpreter's site-packages
#: (.pth files, editable installs' finders) would only delay the gang's registration.
EXECUTOR_FILE = executor_module.shipped_name("executor")
#: The job file, which also carries the job's secret (``token``): the one file each job ships
#: from the submitting machine. YARN localizes it into each container's private directory; the
#: secret is never an environment variable (YARN copies launch_container.sh, with every
#: variable, into the container's log directory, which the NodeManager serves to anyone).
#: Executors read the secret from it (``SUBM_TOKEN_FILE``), then drop their link to it.
JOB_FILE = "subm_job.json"
#: environment.archive as localized in task containers: a plain file, unpacked by the executor.
ENV_ARCHIVE = "subm-environment"
#: The YARN ApplicationMaster's entry point (``am/main.py`` of this backend).
AM_MODULE = "submarine_py.backends.yarn.am.main"
#: The client's CA bundle (YarnOptions.ca_bundle) as localized in the AM's and executors' containers.
CA_FILE = "subm-ca.pem"
#: Memory of the master container: skein's Java AM (-Xmx128M) plus the Python AM.
AM_MEMORY_MB = 768


@dataclass(frozen=True)
class YarnOptions:
    #: The job file (mode 0600, with the job's secret), which skein uploads to the staging directory.
    job_file: str
    #: Every ResourceManager's web URL (``addresses.py``), the active one first.
    rm_urls: Tuple[str, ...]
    #: The job's local files packed by :func:`shipping.pack_files` (when it has any).
    files_archive: Optional[str] = None
    #: The executor with its modules as one file (executor/bundle.py): its shared copy on the
    #: cluster's filesystem (``hdfs://...``, ``shared_executor.py``), else a local path that
    #: submit() writes and skein uploads with the job.
    executor_bundle: Optional[str] = None
    node_hosts: Sequence[str] = ()
    python: Optional[str] = None  # default: the submitting interpreter
    #: sha256 of environment.archive, computed at submission (None: the executors compute it).
    archive_sha256: Optional[str] = None
    #: The whole gang is asked for with the application (``capacity.admit_at_submission`` said
    #: it fits): each service declares its role's tasks. Else none: the AM asks once it fits.
    gang_with_application: bool = False
    #: The submitting environment, travelling to the nodes (``travel/``); None: the nodes have
    #: the interpreter (environment.python, SUBM_SHIP_ENVIRONMENT=no) or it is not built here.
    travel: Optional[Travel] = None
    #: A PEM file of the CAs the client trusts for the cluster's HTTPS endpoints
    #: (``addresses.trust``): it travels with the AM and the executors (CA_FILE), which reach
    #: the RMs over HTTPS too. None: the cluster speaks HTTP, or the system's CAs vouch for it.
    ca_bundle: Optional[str] = None


def python_command(plan: Plan, opts: YarnOptions) -> Dict[str, str]:
    """The interpreter the AM and executors use, and shell lines that make ``python`` resolve to
    it: ``setup`` for the AM; ``task_setup`` and ``task_env`` for executors, which write the
    wrappers themselves (see interpreters.WRAPPER_ENV).

    With ``environment.archive`` the executors run the submitting interpreter (or ``python3``
    where the node lacks it), not the archive's: they must not wait for the archive, and the
    executor puts the unpacked archive first on the task's PATH. The AM runs the travelling
    environment (``opts.travel``) where there is one, and so do the tasks outside images
    without an archive.
    Tasks in Docker images find their interpreter themselves (:func:`docker_script`).
    """
    env, travel = plan.job.environment, opts.travel
    if env.archive:
        python = opts.python or sys.executable
        setup = f'{interpreters.assign(python)}; [ -x {interpreters.PY} ] || {interpreters.PY_VAR}=$(command -v python3)'
        return {"python": interpreters.PY, "setup": travel.for_am().setup_lines() if travel else setup,
                "task_setup": setup, "task_env": {}}
    am_here = choose(plan.job).am_here
    if travel and am_here:  # tasks outside images run it too (in images: docker_script)
        return {"python": interpreters.PY, "setup": travel.for_am().setup_lines(),
                "task_setup": f"{travel.setup_lines()}\n{travel.task_path_line()}",
                "task_env": {interpreters.WRAPPER_ENV: "1"}}
    python = (opts.python or sys.executable) if am_here else env.python
    # The path once, as data (interpreters.assign); the executor writes the python/python3
    # wrappers of its own interpreter (WRAPPER_ENV): a venv's must be started by its own path.
    setup = f"{interpreters.assign(python)}\n{interpreters.shell_path(python)}"
    return {"python": interpreters.PY, "setup": setup, "task_setup": setup,
            "task_env": {interpreters.WRAPPER_ENV: "1"}}


def docker_script(plan: Plan) -> str:
    """The launch lines of a task in a Docker image: the executor runs with the image's python3
    (or ``environment.python``, which must then exist in the image), and ``python``/``python3``
    in the task's command are that interpreter (the executor writes the wrappers in
    ``.subm-bin``, first on PATH), as outside an image: many images have ``python3`` but no
    ``python``. What the image lacks is said in one line (stderr, which skein keeps in the
    service's log) and ends the container with 127: a refusal (``refusals.py``), no retry."""
    return interpreters.image_launch_lines(EXECUTOR_FILE, "$YARN_CONTAINER_RUNTIME_DOCKER_IMAGE",
                                           plan.job.environment.python or "")


def docker_env(task: TaskPlan, shared_dir: Optional[str] = None) -> Dict[str, str]:
    """YARN's Docker runtime variables for a task with an image (Hadoop 3.1+); the job's
    ``shared_dir`` is mounted read-write at the same path."""
    if not task.docker:
        return {}
    env = {
        "YARN_CONTAINER_RUNTIME_TYPE": "docker",
        "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE": task.docker.image,
        "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK": task.docker.network,
    }
    mounts = list(task.docker.mounts)
    if shared_dir:
        mounts.append(f"{shared_dir}:{shared_dir}:rw")
    if mounts:
        env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"] = ",".join(mounts)
    return env


def archive_env(plan: Plan, opts: YarnOptions) -> Dict[str, str]:
    """What the executor needs to unpack environment.archive into the node's cache."""
    env = plan.job.environment
    if not env.archive:
        return {}
    suffix = ".zip" if env.archive.endswith(".zip") else ".tar.gz"
    out = {protocol.ENV_ARCHIVE: ENV_ARCHIVE + suffix}
    if opts.archive_sha256:
        out[protocol.ENV_SHA256] = opts.archive_sha256
    if env.cache_dir:
        out[protocol.ENV_CACHE] = env.cache_dir
    return out


def build_application_spec(plan: Plan, opts: YarnOptions):
    """The plan as skein's ApplicationSpec: the AM as skein's master, one service per role."""
    import skein

    py = python_command(plan, opts)
    job_file = {JOB_FILE: skein.File(source=opts.job_file, type="file")}
    return skein.ApplicationSpec(
        name=plan.job.name,
        queue=plan.job.queue,
        tags=[TAG, gang_tag(plan), *plan.job.tags],
        master=master(opts, py, job_file),
        services={role: service(plan, role, opts, py, job_file) for role in plan.job.roles},
        max_attempts=am_attempts(plan.job.restart, sweep=plan.job.sweep is not None),
        acls=acls(plan),
        file_systems=file_systems(plan),
    )


def acls(plan: Plan):
    """YARN's application ACLs (skein's ``ACLs``), always on: the job's owner, YARN's admins and
    whom the job file's ``acls`` names may view it and modify (kill) it, nobody else. skein's
    own default (ACLs off) would let every user of a secure cluster kill the job. skein's page
    of the AM (``ui_users``) stays open: the RM's proxy in front of it checks the view ACL, and
    the AM's pages show nothing secret (its API takes the job's token)."""
    import skein

    spec = plan.job.acls or AclSpec()
    return skein.ACLs(enable=True, view_users=list(spec.users("view")), view_groups=list(spec.groups("view")),
                      modify_users=list(spec.users("modify")), modify_groups=list(spec.groups("modify")),
                      ui_users=["*"])


#: Schemes of filesystems that hand out delegation tokens (HDFS and its views).
TOKEN_SCHEMES = ("hdfs", "viewfs", "webhdfs", "swebhdfs")


def file_systems(plan: Plan) -> List[str]:
    """Every filesystem the job names (``files`` sources, ``environment.archive``, the
    TensorBoard log folder), ``scheme://authority``: skein gets a delegation token for each at
    submission, so that on a secure cluster the tasks read and write there as the user (the
    default filesystem's token comes anyway)."""
    job = plan.job
    paths = [*job.files.values(), job.environment.archive or "", (job.tensorboard.logdir or "") if job.tensorboard else ""]
    out: List[str] = []
    for path in paths:
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)", path or "")
        if m and m.group(2) and m.group(1).lower() in TOKEN_SCHEMES:  # no authority: the default's
            fs = f"{m.group(1).lower()}://{m.group(2)}"
            if fs not in out:
                out.append(fs)
    return out


def master(opts: YarnOptions, py: Dict[str, str], job_file: Dict[str, object]):
    """skein's master: the Python AM (``am/main.py``) reading the job file skein ships."""
    import skein

    return skein.Master(
        resources=skein.Resources(memory=AM_MEMORY_MB, vcores=1),
        files={**job_file, **(opts.travel.for_am().resources() if opts.travel else {}), **ca_files(opts)},
        env={AM_RM_URLS_ENV: ",".join(opts.rm_urls), "PYTHONUNBUFFERED": "1", **ca_env(opts),
             # The travelling environment brings this package (installed, or its editable code).
             **({} if opts.travel else {"PYTHONPATH": PACKAGE_PARENT}),
             **{k: os.environ[k] for k in (LAUNCH_PAUSE_ENV,) if os.environ.get(k)}},
        script=f"{py['setup']}\n{interpreters.am_start_check()}\nexec {py['python']} -m {AM_MODULE} {JOB_FILE}",
    )


def service(plan: Plan, role: str, opts: YarnOptions, py: Dict[str, str], job_file: Dict[str, object]):
    """One role's skein service: its executors, declared up front (the whole gang at once)."""
    import skein

    spec, task = plan.job.roles[role], plan.task(role, 0)
    if task.docker:
        script = docker_script(plan)
    else:
        script = f"{py['task_setup']}\nexec {py['python']} -S {EXECUTOR_FILE}"
    hints = {} if spec.node_label or not opts.node_hosts else {"nodes": list(opts.node_hosts), "relax_locality": True}
    return skein.Service(
        # The AM asks for them once the whole gang fits (am/allocation.py); where it fits at
        # submission, they are declared here instead (capacity.admit_at_submission).
        instances=sum(1 for t in plan.tasks if t.role == role) if opts.gang_with_application else 0,
        resources=skein.Resources(memory=spec.resources.memory_mb, vcores=spec.resources.vcores,
                                  gpus=spec.resources.gpus),
        files={EXECUTOR_FILE: executor_file(opts), **job_file, **user_files(plan, opts),
               **archive_files(plan, opts), **travel_files(plan, task, opts), **ca_files(opts)},
        env=task_env(plan, task, opts, py),
        script=script,
        # The AM starts every container (and every replacement) itself, through admission:
        # skein must not replace a preempted container behind its back.
        max_restarts=0,
        allow_failures=True,   # a failed container must not end the application
        node_label=spec.node_label or "",
        **hints,
    )


def task_env(plan: Plan, task: TaskPlan, opts: YarnOptions, py: Dict[str, str]) -> Dict[str, str]:
    """What a role's executors start with (the rest comes from the AM once they register)."""
    files = plan.job.files
    return {
        protocol.TOKEN_FILE: JOB_FILE,
        **plan.executor_settings(task.role),
        protocol.AM_DISCOVERY: ",".join(f"{u}/proxy/{{app}}/pages/subm{protocol.PATH_AM}" for u in opts.rm_urls),
        **ca_env(opts),
        protocol.LOG_TO_CONTAINER: "1",
        "PYTHONUNBUFFERED": "1",
        **shipping.executor_env(files),
        **docker_env(task, plan.job.shared_dir),
        **archive_env(plan, opts),
        # In an image the executor writes python/python3 wrappers of its own interpreter.
        **({interpreters.WRAPPER_ENV: "1"} if task.docker else py["task_env"]),
    }


def ca_files(opts: YarnOptions) -> Dict[str, object]:
    """The client's CA bundle, where the cluster speaks HTTPS, as CA_FILE."""
    import skein

    return {CA_FILE: skein.File(source=opts.ca_bundle, type="file")} if opts.ca_bundle else {}


def ca_env(opts: YarnOptions) -> Dict[str, str]:
    return {protocol.CA_BUNDLE: CA_FILE} if opts.ca_bundle else {}


def executor_file(opts: YarnOptions):
    """The executor's one file: its shared copy on the cluster's filesystem, PRIVATE (the
    NodeManager keeps it in the user's cache for every later job), else this job's own."""
    import skein

    source = opts.executor_bundle or "<executor bundle>"
    return skein.File(source=source, type="file", visibility="private" if "://" in source else "application")


def travel_files(plan: Plan, task: TaskPlan, opts: YarnOptions) -> Dict[str, object]:
    """The travelling environment, for the tasks that run it: outside images, without an archive."""
    if not opts.travel or task.docker or plan.job.environment.archive:
        return {}
    return opts.travel.resources()


def user_files(plan: Plan, opts: YarnOptions) -> Dict[str, object]:
    """The job's ``files``: local ones in one archive, ``scheme://`` ones each under a flat name."""
    import skein

    files = plan.job.files
    out: Dict[str, object] = {}
    if shipping.local_sources(files):
        out[shipping.FILES_ARCHIVE] = skein.File(source=opts.files_archive or "<files archive>", type="file")
    for dest, name in shipping.url_sources(files).items():
        out[name] = skein.File(source=files[dest], type="file")
    return out


def archive_files(plan: Plan, opts: YarnOptions) -> Dict[str, object]:
    """environment.archive as a plain file (never unpacked by YARN): the executor unpacks it
    into the node's cache unless an earlier job already did.

    One on the cluster's filesystem is localized PRIVATE, so that the NodeManager's per-user
    cache keeps it for every later job of the user with the same file (YARN keys it by path
    and modification time): a second run neither copies nor unpacks it. A local one is
    uploaded into each application's staging directory by skein, so it can only be
    APPLICATION (once per node and job).
    """
    import skein

    archive = plan.job.environment.archive
    if not archive:
        return {}
    return {archive_env(plan, opts)[protocol.ENV_ARCHIVE]: skein.File(
        source=archive, type="file", visibility="private" if "://" in archive else "application")}

