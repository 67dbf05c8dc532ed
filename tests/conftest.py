"""Shared fixtures and helpers.

Every test gets its own ``SUBM_HOME`` (jobs of the local backend live there), so
tests never see each other's jobs nor the user's ``~/.submarine``.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

import pytest

from venvs import (ISOLATED_NODES, REPO, in_shared_folder, new_shared_folder, preinstalled_python,  # noqa: F401
                   python_without, shared_python, slim_python, venv_with_subm)

JOBFILES = Path(__file__).resolve().parent / "jobfiles"


def _take_this_workers_rig() -> None:
    """Where scripts/with-rig.sh started several rigs (RIG_COUNT, SUBM_TEST_RIGS) and pytest-xdist
    runs several workers, worker N takes rig N: its settings (rig.sh's env.sh, its skein config
    and drivers) replace the first rig's before anything reads them. Each YARN test then has a
    cluster to itself, as in a run of one worker."""
    rigs = os.environ.get("SUBM_TEST_RIGS", "").split()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if len(rigs) < 2 or not worker.startswith("gw"):
        return
    rig = rigs[int(worker[2:]) % len(rigs)]
    dump = subprocess.run(["bash", "-c", 'source "$1/env.sh" && env -0', "-", rig],
                          capture_output=True, check=True).stdout.decode()
    os.environ.update(line.split("=", 1) for line in dump.split("\0") if "=" in line)
    os.environ.update(SKEIN_CONFIG=f"{rig}/skein", SUBM_SKEIN_HOME=f"{rig}/skein-drivers")


_take_this_workers_rig()
#: Environments packed to travel are kept for this session and later ones in a folder of the
#: tests' own (travel/kept.py), not in the user's; xdist workers share it, so each is packed once.
os.environ.setdefault("SUBM_PACK_CACHE", os.path.join(tempfile.gettempdir(), "subm-test-packed"))
#: The YARN cluster yarn-marked tests use, read before the fixture below hides it from other tests.
YARN_CONF_DIR = os.environ.get("HADOOP_CONF_DIR")
#: In CI (CI=true) every test must run: one that would skip, as it runs or as its module is
#: collected, fails instead, unless it needs what CI's kind of machine cannot have (UNOBTAINABLE).
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")

# What CI's kind of machine cannot have, one reason each; a skip whose reason holds one of them
# is the only kind CI accepts (docs/testing.md, "What green means"). Everything else the tests
# need, scripts/test.sh installs or starts.
#: Hadoop's setuid container-executor (the LinuxContainerExecutor, YARN's Docker runtime) ships
#: only in Apache's binary tarballs, which no registry serves; such tests run where
#: SUBM_HADOOP_DIST names an unpacked distribution.
NO_CONTAINER_EXECUTOR = "needs Hadoop's container-executor"
#: An NVIDIA GPU and its driver: CI's machines have none (scripts/gpu-check.sh, on one that has).
NO_GPU = "needs an NVIDIA GPU"
#: A machine without GPUs, for what subm does where NVML finds none: not a GPU machine.
GPUS_HERE = "needs a machine without GPUs"
#: The reasons CI accepts a skip for.
UNOBTAINABLE = (NO_CONTAINER_EXECUTOR, NO_GPU, GPUS_HERE)


def skip_without_container_executor(what: str) -> None:
    """Skip (a test, or a module) for want of Hadoop's setuid container-executor, even in CI."""
    pytest.skip(f"{NO_CONTAINER_EXECUTOR} ({what}): only Apache's binary distributions carry it; set "
                "SUBM_HADOOP_DIST to an unpacked one (docs/testing.md)", allow_module_level=True)


def _refused_in_ci(longrepr) -> Optional[str]:
    """The reason of a skip (its report's ``longrepr``) that CI refuses, failing the test; None
    where the skip may stand: outside CI, or for what cannot be had here (UNOBTAINABLE)."""
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
    if not IN_CI or any(why in reason for why in UNOBTAINABLE):
        return None
    return reason


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """In CI a module skipped as it is collected (a module-level ``pytest.importorskip`` of what
    scripts/test.sh installs, ``pytest.skip(allow_module_level=True)``) fails, in one line: its
    tests would not run, and no per-test hook sees them."""
    outcome = yield
    report = outcome.get_result()
    reason = _refused_in_ci(report.longrepr) if report.skipped else None
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"CI runs every test, but {report.nodeid} was skipped as it was collected: {reason}"


#: The markers of the tests that need a YARN cluster (HADOOP_CONF_DIR: scripts/test.sh starts the
#: project's rig for them).
YARN_MARKERS = ("yarn", "sharing", "preemption", "secure", "ha")
#: Why the YARN tests have no cluster in this session, or None: no HADOOP_CONF_DIR, or (as
#: require_yarn found) a ResourceManager that does not answer.
NO_YARN: Optional[str] = (None if YARN_CONF_DIR else "no YARN cluster: set HADOOP_CONF_DIR (bash scripts/test.sh "
                          "starts the project's rig: docs/testing.md)")


def require_yarn() -> str:
    """The URL of the ResourceManager of the cluster HADOOP_CONF_DIR names, for a module of yarn
    tests. Where none answers, a module's top level gets "" and its tests skip as they are set
    up (in CI: fail), saying why (NO_YARN): the module is still collected, so a pass whose ``-m``
    deselects its tests (scripts/test.sh's pass 0) runs without a cluster. Called in a test or
    a fixture, it skips at once."""
    global NO_YARN
    if NO_YARN is None:
        from submarine_py.backends.yarn.hadoop import addresses
        from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager
        from submarine_py.errors import BackendError

        rm = ResourceManager(addresses.from_conf(YARN_CONF_DIR).rm_urls, wait_seconds=0, timeout=3,
                             say=lambda _: None)
        try:
            rm.started_on()  # every RM of an HA rig tried: the active one answers
            return rm.url
        except BackendError as exc:
            NO_YARN = f"no YARN cluster: {exc}; start one: bash scripts/rig.sh up DIR"
    if sys._getframe(1).f_code.co_name == "<module>":
        return ""
    pytest.skip(NO_YARN)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that needs YARN (YARN_MARKERS) where there is none (NO_YARN) skips before its
    fixtures run, saying why; in CI that is a failure (pytest_runtest_makereport)."""
    if NO_YARN and any(item.get_closest_marker(m) for m in YARN_MARKERS):
        pytest.skip(NO_YARN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """In CI a test that skips (no cluster, a package or a program missing, a ``skipif``), whatever
    its markers, is reported as failed, in one line, unless it needs what cannot be had here
    (UNOBTAINABLE). An expected failure (xfail) is no skip."""
    outcome = yield
    report = outcome.get_result()
    reason = _refused_in_ci(report.longrepr) if report.skipped and not hasattr(report, "wasxfail") else None
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"CI runs every test, but this one skipped: {reason}"


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """For pytest-xdist's ``--dist loadgroup`` (scripts/test.sh's pass 1, a rig per worker): a
    module's tests go to one worker, so that a module's fixtures (a job submitted once, read by
    several tests) run once; the modules that use the isolated rig go to one worker together,
    so that it starts once."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        uses_isolated = "isolated_rig" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("isolated-rig" if uses_isolated else item.module.__name__))


@pytest.fixture(scope="session", autouse=True)
def skein_drivers(tmp_path_factory: pytest.TempPathFactory):
    """One place for the skein drivers (JVMs, one per cluster) the tests' ``subm run`` start,
    instead of one per test's SUBM_HOME; they are stopped when the session ends."""
    if os.environ.get("SUBM_SKEIN_HOME"):
        yield Path(os.environ["SUBM_SKEIN_HOME"])
        return
    home = tmp_path_factory.mktemp("skein-drivers")
    os.environ["SUBM_SKEIN_HOME"] = str(home)
    try:
        yield home
    finally:
        del os.environ["SUBM_SKEIN_HOME"]
        from submarine_py.backends.yarn.client.skein_driver import stop_drivers

        stop_drivers(str(home))


@pytest.fixture(scope="session")
def torch_only_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter whose environment is a PyTorch user's: this one's packages (torch,
    TensorBoard, submarine-py's own) without TensorFlow (see :func:`python_without`; made in
    a moment, a few hundred symlinks). Run PyTorch test programs with it.

    Why: the project's venv holds both frameworks, which a PyTorch user's seldom does, and
    with TensorFlow loaded in the same process (``torch.utils.tensorboard`` loads it when it is
    installed) each DDP worker of torch 2.13 and TensorFlow 2.21 dies of a segmentation fault,
    ``torchrun`` alike: not our code, and not our users' environments. Locally a job's tasks run
    the interpreter that runs ``subm`` (``subm(..., python=torch_only_python)``); on YARN, the
    job file's ``environment: {python: ...}``. Where the rig's nodes see this machine's folders,
    the NodeManagers read it where it is; for isolated nodes it is made in the rig's shared folder.
    """
    if ISOLATED_NODES:
        return python_without(in_shared_folder("torch-only"), ("tensorflow",), for_isolated_nodes=True)
    return python_without(tmp_path_factory.mktemp("torch-only-venv"), ("tensorflow",))


@pytest.fixture(autouse=True)
def subm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private SUBM_HOME for every test; no backend choice leaks in from the caller."""
    home = tmp_path / "subm-home"
    home.mkdir()
    monkeypatch.setenv("SUBM_HOME", str(home))
    for var in ("HADOOP_CONF_DIR", "SUBM_BACKEND", "SUBM_OUTPUT", "SUBM_HISTORY"):
        monkeypatch.delenv(var, raising=False)
    # The rig's nodes (but isolated ones) see this checkout and its venv at their paths, which
    # is what SUBM_SHIP_ENVIRONMENT=no says: packing this venv (gigabytes, torch and TensorFlow)
    # for each rig would cost CI minutes. The tests of the environment that travels unset it
    # (tests/test_the_environment_travels_to_nodes_that_have_nothing.py); on isolated nodes
    # every job's does (from a venv without torch and TensorFlow: subm_python), but PyTorch's and
    # TensorFlow's (_frameworks_on_isolated_nodes).
    if not ISOLATED_NODES:
        monkeypatch.setenv("SUBM_SHIP_ENVIRONMENT", "no")
    return home


def subm_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    # The package under test, whether or not it is installed.
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


@pytest.fixture
def shared_tmp_path(tmp_path: Path) -> Path:
    """A folder that this machine and every node see at the same path, for what a test's job
    shares with it or across nodes (a marker file the job waits for, ``shared_dir``, an
    environment cache): on the project's rig, a new folder in its shared one (RIG_SHARED, mounted
    on every node as an NFS share would be, isolated ones included); elsewhere ``tmp_path``."""
    return new_shared_folder(f"{tmp_path.name}.", elsewhere=tmp_path)


#: Whether the running test is marked torch or tensorflow (set by _frameworks_on_isolated_nodes).
_NEEDS_FRAMEWORKS = False


@pytest.fixture(autouse=True)
def _frameworks_on_isolated_nodes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """On isolated nodes a PyTorch or TensorFlow test's jobs run this venv "installed on every
    node" in the rig's shared folder (tests/venvs.py's shared_python): nothing travels."""
    global _NEEDS_FRAMEWORKS
    _NEEDS_FRAMEWORKS = any(request.node.get_closest_marker(m) for m in ("torch", "tensorflow"))
    if ISOLATED_NODES and _NEEDS_FRAMEWORKS:
        monkeypatch.setenv("SUBM_SHIP_ENVIRONMENT", "no")
    yield
    _NEEDS_FRAMEWORKS = False


def subm_python() -> str:
    """The interpreter that runs ``subm`` in the tests (and so, unless a job file names one, its
    jobs): this one where the rig's nodes see this machine's folders; on isolated nodes a venv
    of submarine-py[yarn,sweep] alone, whose jobs take it along (a user's environment of a few
    hundred MB), or for a PyTorch or TensorFlow test this venv in the rig's shared folder."""
    if not ISOLATED_NODES:
        return sys.executable
    return shared_python() if _NEEDS_FRAMEWORKS else slim_python()


def subm_argv(*args: str, python: Optional[str] = None) -> List[str]:
    """``subm ARGS...`` run by ``python`` (by default :func:`subm_python`)."""
    return [python or subm_python(), "-m", "submarine_py.cli", *args]


#: What a command runs under to read files as a user does (the permission bits hold): for root,
#: util-linux's setpriv taking away the capabilities that let it read every file
#: (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH); for anyone else, nothing.
AS_A_USER = (["setpriv", "--bounding-set=-dac_override,-dac_read_search",
              "--inh-caps=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else [])


def subm(*args: str, env: Optional[Mapping[str, str]] = None, cwd: Union[str, Path, None] = None,
         timeout: float = 120, python: Optional[str] = None, as_a_user: bool = False) -> Tuple[int, str, str]:
    """Run ``subm ARGS...`` as a real process; returns (exit code, stdout, stderr).
    ``python``: the interpreter that runs it (and so, on the local backend, the job's tasks),
    such as :func:`torch_only_python`'s; by default this one. ``as_a_user``: under
    :data:`AS_A_USER`, for what a user cannot read (root, in CI, could read everything)."""
    argv = [*(AS_A_USER if as_a_user else []), *subm_argv(*args, python=python)]
    proc = subprocess.run(argv, env=subm_env(env), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def cli(*args: str, env: Optional[Mapping[str, str]] = None,
        cwd: Union[str, Path, None] = None) -> Tuple[int, str, str]:
    """Run ``subm ARGS...`` in this process with click's ``CliRunner`` (for unit tests: no
    interpreter start per case); returns (exit code, stdout, stderr) like :func:`subm`.

    An exception the CLI did not turn into ``Error: ...`` propagates and fails the test,
    where a real process would have printed a traceback.
    """
    from click.testing import CliRunner

    from submarine_py.cli import main

    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click >= 8.2 keeps stderr apart itself
    old, environ = os.getcwd(), dict(os.environ)
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = runner.invoke(main, list(args), env=dict(env or {}), catch_exceptions=False,
                               prog_name="subm")
    finally:  # a process's state ends with it: --principal/--keytab become SUBM_* variables
        os.chdir(old)
        os.environ.clear()
        os.environ.update(environ)
    return result.exit_code, result.stdout, result.stderr


def start_subm(*args: str, env: Optional[Mapping[str, str]] = None,
               cwd: Union[str, Path, None] = None) -> subprocess.Popen:
    """Start ``subm ARGS...`` in the background (for signal tests), with SIGINT's default
    disposition: a test run started in the background of a non-interactive shell inherits SIGINT
    ignored, and Python then never turns it into KeyboardInterrupt (Ctrl-C of a user's terminal
    is what the signal tests stand for)."""
    return subprocess.Popen(subm_argv(*args), env=subm_env(env), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_json(*args: str, **kw) -> Tuple[int, dict, str]:
    """``subm ... --output json``; returns (exit code, the parsed JSON, stderr)."""
    rc, out, err = subm(*args, "--output", "json", **kw)
    assert "Traceback" not in err, err
    try:
        return rc, json.loads(out), err
    except ValueError:
        pytest.fail(f"stdout is not JSON (rc {rc}):\n{out}\nstderr:\n{err}")


def write_job(directory: Path, spec: str, files: Optional[Mapping[str, str]] = None) -> Path:
    """Write ``job.yaml`` (dedented) and the given scripts into ``directory``; returns the job file."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    job = directory / "job.yaml"
    job.write_text(textwrap.dedent(spec))
    return job


def job_dirs(home: Path) -> List[Path]:
    return sorted((home / "local").glob("local_*"))


def processes_of(job_id: str) -> List[int]:
    """Pids of live processes whose environment has ``SUBM_JOB_ID=<job_id>`` (executors, tasks, their children)."""
    needle = f"SUBM_JOB_ID={job_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry))
    return found


def describe_processes(pids: List[int]) -> str:
    lines = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            lines.append(f"{pid} (parent {ppid}, state {state}): {cmdline}")
        except OSError:
            pass
    return "\n".join(lines)


def wait_for(predicate, timeout: float = 60, what: str = "a condition", interval: float = 0.05,
             explain: Optional[Callable[[], str]] = None):
    """Poll ``predicate`` until it returns something truthy (this is synchronisation, not a timing check).
    On a timeout, ``explain()`` (when given) says what the world looked like then."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            picture = ""
            if explain is not None:
                try:
                    picture = "\n" + explain()
                except Exception as exc:  # the picture must not hide the timeout
                    picture = f"\n(no picture: {exc!r})"
            pytest.fail(f"timed out after {timeout} s waiting for {what}{picture}")
        time.sleep(interval)


@pytest.fixture
def no_leftovers():
    """Collects job ids; after the test, kills (and fails on) any process still carrying one."""
    ids: List[str] = []
    yield ids
    left = {job_id: processes_of(job_id) for job_id in ids}
    for pids in left.values():
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert not any(left.values()), f"processes left behind: {left}"


@pytest.fixture(scope="session")
def isolated_rig():
    """A 1-node rig whose node shares nothing with this machine (RIG_ISOLATED=1; root), shared by
    the modules that need one: a mount namespace of its own hides /tmp, /root, /home and this checkout."""
    require_yarn()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("isolated nodes need root and util-linux's unshare")
    directory = Path(tempfile.mkdtemp(prefix="subm-rig-isolated."))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_") and k != "HADOOP_CONF_DIR"}
    env.update(RIG_NODES="1", RIG_ISOLATED="1")
    up = subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "up", str(directory)], env=env,
                        capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, f"the isolated rig did not start:\n{up.stderr[-3000:]}"
        yield directory
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "rig.sh"), "down", str(directory)], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(directory, ignore_errors=True)
