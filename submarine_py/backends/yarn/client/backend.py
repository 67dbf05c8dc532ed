"""The client side of the YARN backend.

Only :meth:`YarnBackend.submit` needs skein's driver (a JVM); it reuses the
driver started for the cluster HADOOP_CONF_DIR names (and, on a secure cluster, for
the same Kerberos login), and starts one when there is none (see skein_driver.py).
Status, list, kill and logs use the RM and NM REST APIs. On a secure cluster the
login is checked first (kerberos.py): no ticket, an expired one or a keytab that
does not log in stops the command before anything reaches the cluster.
"""
from __future__ import annotations

import functools
import json
import os
import posixpath
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Set, TextIO

from .... import extras
from ....errors import AccessDeniedError, BackendError, ClusterLimitError, JobNotFoundError, SpecError
from ....jobfile.model import JobSpec
from ....plan import Plan
from ....report import SIGNALLED, JobReport, Timings, replace
from ....states import JobState, Phase, TaskState
from ....units import format_memory
from ...base import KILLED_BY_USER, Backend, Problem
from ....executor import bundle, protocol
from ..attempts import last_left, node_could_not_start
from ..capacity import admit_at_submission, leaf_queue, task_containers_counted
from ..hadoop import addresses, kerberos, spnego
from ..hadoop.conf import hadoop_conf_dir
from ..hadoop.nodemanager import node_log
from ..hadoop.resourcemanager import (APP_ENDED, APP_LIVE, GPU, AppState, FinalStatus, ResourceManager, say,
                                      view_refused, withheld, yarn_user)
from ..hadoop.webhdfs import ClusterFilesystem, Files
from ..protocol import REPORT_FILE, TAG
from . import rules, shared_executor, shipping, travel
from .app_logs import write_app_logs
from .request import YarnRequest, build_request, require_skein
from .skein_driver import client_for

if TYPE_CHECKING:
    from ....queue_view import QueueView

#: A YARN application's state (but FINISHED) in subm's words.
STATE_OF_APP = {AppState.NEW: JobState.ACCEPTED, AppState.NEW_SAVING: JobState.ACCEPTED,
                AppState.SUBMITTED: JobState.ACCEPTED, AppState.ACCEPTED: JobState.ACCEPTED,
                AppState.RUNNING: JobState.RUNNING, AppState.FAILED: JobState.FAILED, AppState.KILLED: JobState.KILLED}
#: A FINISHED application's final status in subm's words (UNDEFINED, or none: FAILED).
STATE_OF_FINAL = {FinalStatus.SUCCEEDED: JobState.SUCCEEDED, FinalStatus.FAILED: JobState.FAILED,
                  FinalStatus.KILLED: JobState.KILLED}
#: Finished jobs whose reports `subm history` reads at a time (finished_reports).
REPORT_READERS = 8


class YarnBackend(Backend):
    name = "yarn"
    poll_seconds = 0.5
    starting_poll_seconds = 2.0  # 256 tasks starting: 50 -> 13 proxied 256-task reports
    # Each ask is two requests to the RM (the application, the AM's report through its proxy).
    queued_poll_seconds = 5.0  # the AM asks admission every ~2 s: a start is seen within ~5 s
    steady_poll_seconds = 4.0  # a long job's task that ends is seen within 4 s, at 1/8 the load

    def __init__(self, rm_urls: Optional[Sequence[str]] = None):
        #: The RMs' URLs; default: the cluster's (``hadoop/addresses.py``).
        self.rm_urls = rm_urls
        #: Who this process is to a secure cluster (kerberos.py); None until asked.
        self.login: Optional[kerberos.Login] = None

    def log_in(self, spec_kerberos=None) -> Optional[kerberos.Login]:
        """On a secure cluster, check that requests-gssapi is installed (the ``kerberos`` extra)
        and the login (``SUBM_PRINCIPAL/SUBM_KEYTAB``, else the job file's ``kerberos``, else the
        ticket cache) before anything reaches it: exit 2 naming what is wrong and what to run or
        install. A plain cluster: None."""
        conf_dir = hadoop_conf_dir()
        if self.login is None and kerberos.is_secure(conf_dir):
            if not extras.importable("requests_gssapi"):
                # The client's REST calls, and the travelling environment's, answer SPNEGO with it.
                raise SpecError([("kerberos", f"the cluster is Kerberized and requests-gssapi is not installed "
                                              f"for {sys.executable} (subm's environment, which a job takes "
                                              f"along to the nodes): {kerberos.INSTALL_GSSAPI}")])
            self.login = kerberos.log_in(conf_dir, kerberos.requested(spec_kerberos))
        return self.login

    @functools.cached_property
    def rm(self) -> ResourceManager:
        """The cluster's RM, from HADOOP_CONF_DIR (checked on first use, so that a missing
        skein is reported first), after the login on a secure cluster."""
        if os.environ.get("HADOOP_CONF_DIR"):
            self.log_in()
        return ResourceManager(self.rm_urls)

    @functools.cached_property
    def rm_now(self) -> ResourceManager:
        """The same RM for views of the moment (``subm cluster``, history collection): an RM that
        does not answer is reported at once, not waited for."""
        return ResourceManager(self.rm.active_first(), wait_seconds=0)

    def shared_dir(self, plan: Plan, app_id: str) -> Optional[str]:
        """The job's subfolder of ``shared_dir`` (a path every node mounts), when it names one."""
        return posixpath.join(plan.job.shared_dir, app_id) if plan.job.shared_dir else None

    # -- before submission --------------------------------------------------------
    def check(self, spec: JobSpec) -> List[Problem]:
        """YARN's rules on the spec alone (``rules.py``): no cluster, no skein; and the packages
        its features need where they run with this interpreter (:mod:`submarine_py.extras`)."""
        choice = travel.choose(spec)
        return rules.problems(spec) + extras.missing(spec, am_here=choice.am_here, tasks_here=choice.tasks_here)

    def check_cluster(self, plan: Plan) -> None:
        """Refuse what this cluster can never run, with the numbers, before submitting; on a
        secure cluster, a login that cannot submit first."""
        require_skein()
        self.log_in(plan.job.kerberos)
        limits = self.rm.limits()
        problems = []
        if not limits.nodes:
            problems.append(("", f"the YARN cluster at {self.rm.url} has no RUNNING NodeManager"))
        for role, spec in plan.job.roles.items():
            r, path = spec.resources, f"roles.{role}.resources"
            if limits.nodes and r.memory_mb > limits.max_memory_mb:
                problems.append((f"{path}.memory", f"{format_memory(r.memory_mb)} asked, the cluster's maximum per "
                                                   f"container is {format_memory(limits.max_memory_mb)}"))
            if limits.nodes and r.vcores > limits.max_vcores:
                problems.append((f"{path}.vcores", f"{r.vcores} asked, the cluster's maximum per container is "
                                                   f"{limits.max_vcores}"))
            if r.gpus and GPU not in limits.resource_types:
                problems.append((f"{path}.gpus", f"{r.gpus} asked, but the cluster does not offer {GPU} "
                                                 "(see hadoop-conf/README.md to enable GPU scheduling)"))
            elif limits.nodes and r.gpus > limits.max_gpus:
                problems.append((f"{path}.gpus", f"{r.gpus} asked, the cluster's maximum per container is "
                                                 f"{limits.max_gpus}"))
            if spec.node_label:
                labels = self.rm.node_labels()
                if spec.node_label not in labels:
                    problems.append((f"roles.{role}.node_label", f"the cluster has no node label "
                                     f"{spec.node_label!r}; known: {', '.join(labels) or 'none'}"))
        if limits.queues and plan.job.queue not in limits.queues:
            problems.append(("queue", f"the cluster has no leaf queue {plan.job.queue!r}; "
                                      f"known: {', '.join(limits.queues)}"))
        if problems:
            raise ClusterLimitError(problems)

    def request(self, plan: Plan) -> YarnRequest:
        """The whole request (``request.py``), the gang included where it fits now: what
        ``--dry-run`` prints and :meth:`submit` sends."""
        require_skein()
        try:
            hosts = [n["nodeHostName"] for n in self.rm.running_nodes() if n.get("nodeHostName")]
        except BackendError:
            hosts = []
        return build_request(plan, self.rm.active_first(), hosts,
                             gang_with_application=self._gang_with_application(plan), travel=self._travel(plan),
                             ca_bundle=self._ca_bundle(),
                             shared_executor=shared_executor.locate(self._cluster_files, yarn_user(),
                                                                    bundle.bundle_source()))

    def _ca_bundle(self) -> Optional[str]:
        """What the AM and executors trust for the RMs' HTTPS (the client's own trust), where
        the cluster's YARN speaks HTTPS."""
        if not any(u.startswith("https:") for u in self.rm.urls):
            return None
        return addresses.current_trust().bundle

    def _travel(self, plan: Plan) -> Optional[travel.Travel]:
        """What of the submitting environment travels to the nodes (``travel/``): where the AM
        runs it, unless SUBM_SHIP_ENVIRONMENT=no says the nodes have it at its path."""
        if not travel.choose(plan.job).ships:
            return None
        return travel.plan(ClusterFilesystem.from_conf(hadoop_conf_dir()), yarn_user())

    def _cluster_files(self) -> Files:
        conf_dir = hadoop_conf_dir()
        secure = kerberos.is_secure(conf_dir)
        return Files(ClusterFilesystem.from_conf(conf_dir), yarn_user(), spnego.http_auth() if secure else None)

    def _gang_with_application(self, plan: Plan, now: Optional[float] = None) -> bool:
        """Whether to ask for the whole gang with the application: where admission says it fits
        now (``capacity.admit_at_submission``), each service then declares its tasks, which
        skein's AM asks for at once, and the AM takes them as its gang (``YarnContainers.admit``).
        Else (it does not fit, its gang grows, the RM's REST cannot be read) nothing is asked for
        with the application: the AM waits for room, holding nothing.

        Not on a secure cluster: an executor of a container declared with the application finds
        its AM through the RM's web proxy, which asks for SPNEGO, and a container holds no
        ticket (seen on the Kerberized rig: the gang never registered). There the AM asks for
        every container itself and gives each executor its address."""
        try:
            if kerberos.is_secure(hadoop_conf_dir()):
                return False
            return admit_at_submission(plan, self.rm_now, time.time() if now is None else now).fits
        except Exception:  # the AM reads the room itself
            return False

    # -- submission ------------------------------------------------------------------
    def _client(self):
        """skein's client, through the driver started for the cluster HADOOP_CONF_DIR names."""
        require_skein()
        return client_for(hadoop_conf_dir(), self.log_in())

    def submit(self, request: YarnRequest, *, detach: bool = False) -> str:
        job_dir = os.path.dirname(request.job_file)
        try:
            os.makedirs(job_dir, mode=0o700)
        except OSError as exc:
            raise BackendError(f"cannot create {job_dir}: {exc.strerror}") from None
        job = dict(request.job, submitted_at=time.time(), token=request.token)
        try:
            # The token and the roles' env are secret: the file is the user's alone.
            fd = os.open(request.job_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(job))
            if request.executor_bundle:
                with open(request.executor_bundle, "w") as f:
                    f.write(bundle.bundle_source())
            if request.files_archive:  # one archive, unpacked as real files by each executor
                shipping.pack_files(request.plan.job.files, request.files_archive)
            client = self._client()
            # Before skein checks that its files exist.
            files = self._cluster_files() if request.shared_executor or request.travel else None
            if request.shared_executor:
                shared_executor.ensure(files, request.shared_executor, say)
            if request.travel:
                request.travel.ensure(files, say)
            try:
                app_id = client.submit(request.app_spec)
            except Exception as exc:
                raise BackendError(f"YARN refused the application: {exc}") from None
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
        try:
            self.rm.app(app_id)  # visible to the REST API before we return
        except BaseException:
            _kill_quietly(client, app_id)
            raise
        return app_id

    # -- after submission ---------------------------------------------------------------
    def status(self, app_id: str) -> JobReport:
        app = self._settled(self.rm.app(app_id))
        if withheld(app):  # the RM's reduced record, for someone outside the job's view ACL
            raise view_refused(app, app_id)
        yarn_state, state = app.get("state"), _state_of(app)
        done = state.is_terminal() and yarn_state in APP_ENDED
        am: Optional[JobReport] = None
        if yarn_state == AppState.RUNNING:
            am = _parse_report(self.rm.proxy_get(app_id, protocol.PATH_STATUS))
        elif done:
            am = _killed_tasks_settled(self._final_report(app))
        if am is None and not done and yarn_state in (AppState.ACCEPTED, AppState.RUNNING):
            # No AM answers: if the last one decided a failure and YARN has another attempt left,
            # that is the end. skein leaves such an application to YARN's next attempt, whose AM
            # only repeats the verdict (am/main.py's _repeat_verdict), seconds later: after the
            # NodeManager reports the AM's container finished (it cleans up failed containers
            # one after the other), and after the new AM starts. YARN's own record follows then.
            am = self._decided(app_id)
            if am is not None:
                done, state = True, am.state
        report = am or JobReport(
            app_id=app_id, name=app.get("name"), state=state,
            # Until the Python AM has published its endpoint, YARN's RUNNING means "AM starting".
            phase=Phase.STARTING if yarn_state == AppState.RUNNING else None,
            timings=Timings(total_seconds=_elapsed(app)))
        report = replace(report, app_id=app_id, backend=self.name, final=done, yarn_state=yarn_state,
                         tracking_url=app.get("trackingUrl"))
        if done:  # else the AM's own word (RUNNING, or its verdict while finishing)
            report = replace(report, state=state)
        counted = task_containers_counted(app) if report.waiting_for and not done else None
        if counted and counted > (report.held_containers or 0):  # never "holding none" while the RM counts some
            report = replace(report, held_containers=counted)
        if done and state == JobState.KILLED and app.get("diagnostics") and \
                report.diagnostics.startswith(SIGNALLED):
            # The AM only saw YARN's SIGTERM; YARN knows who killed it and why (`subm kill` says).
            report = replace(report, diagnostics=app["diagnostics"])
        if done and am is None and state == JobState.FAILED:
            # No Python AM ever ran: its node may have said why (never skein's "see logs").
            said = self._node_could_not_start(app_id)
            if said:
                report = replace(report, diagnostics=said)
        if done and not report.diagnostics and state != JobState.SUCCEEDED:
            default = "killed" if state == JobState.KILLED else ""
            report = replace(report, diagnostics=app.get("diagnostics") or default)
        # The RM's word on who ran it where; its times where the AM gave none.
        facts: Dict[str, Any] = {k: app[k] for k in ("user", "queue") if app.get(k)}
        if "queue" in facts:
            facts["queue"] = leaf_queue(facts["queue"])
        for key, rm_key in (("submitted_at", "startedTime"), ("started_at", "launchTime"),
                            ("finished_at", "finishedTime")):
            if getattr(report, key) is None and app.get(rm_key):
                facts[key] = app[rm_key] / 1000.0
        report = replace(report, **facts)
        return report

    def _settled(self, app: Dict[str, Any]) -> Dict[str, Any]:
        """The application once a restarted RM has it back as it was.

        After a restart with work-preserving recovery the RM shows a running application
        ACCEPTED until its AM re-registers (seconds); meanwhile the AM and the tasks run on.
        Such a state is waited out (within the RM's wait), not reported as the job's.
        """
        if app.get("state") != AppState.ACCEPTED or not app.get("startedTime"):
            return app
        started_on = self.rm.started_on()
        if not started_on or app["startedTime"] >= started_on:
            return app  # submitted to this RM: ACCEPTED means waiting for an AM container
        try:
            had_am = bool(self.rm.am_container(app["id"]).get("containerId"))
        except (BackendError, JobNotFoundError):
            had_am = False
        if not had_am:
            return app
        self.rm.say(f"the YARN ResourceManager restarted; waiting for {app['id']}'s ApplicationMaster to "
                    "register with it again")
        deadline = time.monotonic() + self.rm.wait_seconds
        while app.get("state") == AppState.ACCEPTED and time.monotonic() < deadline:
            time.sleep(1.0)
            app = self.rm.app(app["id"])
        return app

    def _decided(self, app_id: str) -> Optional[JobReport]:
        """The verdict the last AM attempt that wrote a report left in it, if it reached one and
        YARN will start another attempt only to repeat it (``attempts.Left.repeated``)."""
        try:
            left = last_left(self.rm, app_id)
        except (BackendError, JobNotFoundError):
            return None
        return _parse_report(left.report) if left is not None and left.repeated() else None

    def _node_could_not_start(self, app_id: str) -> Optional[str]:
        try:
            return node_could_not_start(self.rm, app_id)
        except (BackendError, JobNotFoundError):
            return None

    def _final_report(self, app: Dict[str, Any]) -> Optional[JobReport]:
        """The AM's report, kept as a file of the AM container's log directory."""
        try:
            attempt = self.rm.am_container(app["id"])
        except (BackendError, JobNotFoundError):
            return None
        node, cid = attempt.get("nodeHttpAddress"), attempt.get("containerId")
        if not node or not cid:
            return None
        data = node_log(node, cid, REPORT_FILE)
        if not data:
            return None
        try:
            return _parse_report(json.loads(data))
        except ValueError:
            return None

    def kill(self, app_id: str, why: str = KILLED_BY_USER) -> JobReport:
        try:
            report = self.status(app_id)
        except AccessDeniedError:  # not in its view ACL: its modify ACL alone decides the kill
            self.rm.kill(app_id, diagnostics=why)
            return self._killed_unseen(app_id, 60)
        if report.final:
            return report
        self.rm.kill(app_id, diagnostics=why)
        return self.wait_final(app_id, 60)

    def _killed_unseen(self, app_id: str, seconds: float) -> JobReport:
        """What a user who may kill a job but not view it learns of it: YARN's state, once ended."""
        deadline = time.monotonic() + seconds
        app = self.rm.app(app_id)
        while app.get("state") not in APP_ENDED and time.monotonic() < deadline:
            time.sleep(self.poll_seconds)
            app = self.rm.app(app_id)
        return JobReport(app_id=app_id, name=app.get("name"), state=_state_of(app), backend=self.name,
                         final=app.get("state") in APP_ENDED, yarn_state=app.get("state"), user=app.get("user"),
                         queue=leaf_queue(app["queue"]) if app.get("queue") else None,
                         diagnostics=app.get("diagnostics") or "")

    def list(self, include_finished: bool = False) -> List[JobReport]:
        states = None if include_finished else [s.value for s in APP_LIVE]
        apps = sorted(self.rm.apps(tags=[TAG], states=states), key=lambda a: a.get("startedTime", 0))
        with ThreadPoolExecutor(max_workers=8) as pool:  # attempts: the AM's word, one request per job
            attempts = list(pool.map(self._attempts, apps))
        return [JobReport(app_id=a["id"], name=a.get("name"), state=_state_of(a), backend=self.name,
                          attempts=n, yarn_state=a.get("state"), tracking_url=a.get("trackingUrl"))
                for a, n in zip(apps, attempts)]

    def _attempts(self, app: Dict[str, Any]) -> Optional[int]:
        """The job's attempts so far, from its AM (running) or its report (finished); None
        while the AM is not up yet (or when it left no report)."""
        if app.get("state") == AppState.RUNNING:
            report = _parse_report(self.rm.proxy_get(app["id"], protocol.PATH_STATUS))
        elif app.get("state") in APP_ENDED:
            report = self._final_report(app)
        else:
            return None
        return report.attempts if report is not None else None

    def finished_reports(self, known: Set[str]) -> Iterator[JobReport]:
        """This user's finished applications of subm that the RM still lists (its
        ``yarn.resourcemanager.max-completed-applications``, 1000 by default), oldest first.
        Each report takes a few requests (the RM, the AM's node): :data:`REPORT_READERS` at a
        time, since the first ``subm history`` on a busy cluster finds hundreds."""
        apps = self.rm_now.apps(tags=[TAG], states=[s.value for s in APP_ENDED], user=yarn_user())
        ids = [a["id"] for a in sorted(apps, key=lambda a: a.get("startedTime") or 0)
               if a.get("id") and a["id"] not in known]
        if not ids:
            return
        _ = self.rm  # resolved (and logged in) once, before the readers share it
        with ThreadPoolExecutor(max_workers=min(REPORT_READERS, len(ids))) as readers:
            yield from readers.map(self.status, ids)

    def cluster(self) -> Dict[str, Any]:
        from ....cluster import yarn_cluster

        rm = self.rm_now
        nodes = rm.nodes()
        return yarn_cluster(rm.url, nodes, rm.scheduler(), rm.resource_types())

    def line(self) -> "QueueView":
        """The line of waiting gangs and the jobs holding GPUs (``line.py``: a few requests)."""
        from .line import read_line

        return read_line(self.rm_now, time.time(), _parse_report)

    def logs(self, app_id: str, out: TextIO, role: Optional[str] = None, index: Optional[int] = None,
             follow: bool = False, attempt: Optional[int] = None, tail: Optional[int] = None) -> None:
        """From the NodeManagers: every AM attempt's log and each task's containers' logs,
        those of earlier AM attempts too (see ``app_logs.py``)."""
        write_app_logs(self, app_id, out, role=role, index=index, follow=follow, attempt=attempt, tail=tail)


def _killed_tasks_settled(report: Optional[JobReport]) -> Optional[JobReport]:
    """A finished job's report: the AM's last snapshot when YARN ended it before the AM
    could write its final one (``subm kill``, the AM's container lost); the tasks it had
    not seen end were killed with the application."""
    if report is None or report.phase == Phase.DONE:
        return report
    live = (TaskState.PENDING, TaskState.REGISTERED, TaskState.RUNNING)
    tasks = tuple(replace(t, state=TaskState.KILLED) if t.state in live else t for t in report.tasks)
    return replace(report, phase=Phase.DONE, running=0, tasks=tasks)


def _state_of(app: Dict[str, Any]) -> JobState:
    """A YARN application's state in subm's words (ACCEPTED, RUNNING, SUCCEEDED, FAILED, KILLED)."""
    if app.get("state") == AppState.FINISHED:
        return STATE_OF_FINAL.get(app.get("finalStatus"), JobState.FAILED)
    return STATE_OF_APP.get(app.get("state"), JobState.ACCEPTED)


def _parse_report(data: Any) -> Optional[JobReport]:
    """The AM's report from its JSON (None when it is not one, e.g. a proxy's error page)."""
    if not isinstance(data, dict):
        return None
    try:
        return JobReport.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None


def _elapsed(app: Dict[str, Any]) -> Optional[float]:
    start, end = app.get("startedTime"), app.get("finishedTime")
    if not start:
        return None
    end = end or int(time.time() * 1000)
    return round((end - start) / 1000.0, 3)


def _kill_quietly(client, app_id: str) -> None:
    try:
        client.kill_application(app_id)
    except Exception as exc:  # best effort: report the original failure
        print(f"warning: could not kill {app_id}: {exc}", file=sys.stderr)
