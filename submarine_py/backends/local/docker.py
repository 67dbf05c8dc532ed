"""Docker on the local backend: one ``docker run`` per task executor."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Dict, List, Optional, Sequence, Tuple

from ... import interpreters
from ...plan import TaskPlan
from ...executor import main as executor_module, protocol

LABEL = "subm.job"
#: Variables passed by name only (see :func:`run_argv`).
SECRET_VARIABLES = frozenset({protocol.TOKEN})
#: Where the executor and its siblings are mounted (their shipped names, as on YARN).
EXECUTOR_DIR = "/opt/submarine"
EXECUTOR_IN_CONTAINER = f"{EXECUTOR_DIR}/{executor_module.shipped_name('executor')}"


def docker_binary() -> str:
    return shutil.which("docker") or "docker"


def run_argv(task: TaskPlan, env: Dict[str, str], workdir: str, executor_path: str, job_id: str,
             name: str, gpus: Sequence[str] = (), shared_dir: Optional[str] = None,
             logs: Optional[Tuple[str, str]] = None) -> List[str]:
    """The ``docker run`` command line for one task's executor (the executor runs inside);
    the job's shared folder is mounted at the same path, as SUBM_SHARED_DIR names it.
    ``logs``: the task's stdout and stderr files; their folder is mounted at the same path and
    the executor writes them from inside (``interpreters.image_launch_lines``), as a YARN
    container's executor writes its log files.

    The values of :data:`SECRET_VARIABLES` are not in it: the caller puts them in the
    environment of the ``docker`` process, so the job's token never shows in a command line.
    """
    assert task.docker is not None
    d = task.docker
    argv = [docker_binary(), "run", "--rm", "--init", "--name", name,
            "--label", f"{LABEL}={job_id}", "--label", f"subm.task={task.id}",
            "--network", d.network, "-w", workdir,
            "-v", f"{workdir}:{workdir}:rw",
            "-v", f"{executor_path}:{EXECUTOR_IN_CONTAINER}:ro",
            *executor_siblings(executor_path),
            "--memory", f"{task.resources.memory_mb}m", "--cpus", str(task.resources.vcores)]
    if task.processes > 1:
        # Processes of one task talk through /dev/shm (NCCL, DataLoader workers): Docker's 64 MiB
        # is too small for them. Its pages count against --memory, which bounds it anyway.
        argv += ["--shm-size", f"{task.resources.memory_mb}m"]
    if shared_dir:
        argv += ["-v", f"{shared_dir}:{shared_dir}:rw"]
    log_dirs = sorted({os.path.dirname(path) for path in logs or ()})
    for folder in log_dirs:
        argv += ["-v", f"{folder}:{folder}:rw"]
    if os.getuid() != 0:
        argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
    for m in d.mounts:
        argv += ["-v", m]
    if gpus:  # the devices LocalContainers assigned to this task, as YARN's GPU plugin would
        argv += ["--gpus", f'"device={",".join(gpus)}"']
    for k, v in env.items():
        # The secret's value comes from docker's own environment: argv is readable by anyone (ps).
        argv += ["-e", k if k in SECRET_VARIABLES else f"{k}={v}"]
    # As on YARN: the image's python3 runs the executor, and is the task's python (wrappers).
    argv += ["-e", f"{interpreters.WRAPPER_ENV}=1", d.image,
             "sh", "-c", interpreters.image_launch_lines(EXECUTOR_IN_CONTAINER, d.image, logs=logs)]
    return argv


def executor_siblings(executor_path: str) -> List[str]:
    """``-v`` options mounting the modules the executor imports (beside ``executor_path``)
    next to it in the container."""
    here = os.path.dirname(executor_path)
    out: List[str] = []
    for module in executor_module.SIBLINGS:
        out += ["-v", f"{os.path.join(here, module + '.py')}:{EXECUTOR_DIR}/{executor_module.shipped_name(module)}:ro"]
    return out


def remove_container(name: str) -> None:
    subprocess.run([docker_binary(), "rm", "-f", name], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)


def job_containers(job_id: str) -> List[str]:
    try:
        out = subprocess.run([docker_binary(), "ps", "-aq", "--filter", f"label={LABEL}={job_id}"],
                             capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return out.stdout.split()


def remove_job_containers(job_id: str) -> None:
    ids = job_containers(job_id)
    if ids:
        subprocess.run([docker_binary(), "rm", "-f", *ids], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
