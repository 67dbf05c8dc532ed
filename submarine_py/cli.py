"""``subm``: the command line, a thin layer over the Python API (``client.py``): each command
parses its options, calls the API, prints. Catches :class:`SubmarineError` once, prints ``Error: ...``.

Exit codes: 0 the job succeeded (or the command did what was asked), 1 the job
failed or was killed (or a backend error), 2 bad input, 124 ``subm wait --timeout`` passed.
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import time
from typing import Any, Optional, Sequence, Tuple

import click

from . import __version__, client
from .backends import registry
from .errors import JobNotFoundError, SpecError, SubmarineError
from .output import (format_events, format_list, format_plan, format_progress, format_report, plan_json,
                     public_list, public_report, to_json)
from .report import JobReport
from .states import JOB_ENDED, JobState

OUTPUT = click.option("--output", "-o", "output", type=click.Choice(["text", "json"]), default="text",
                      envvar="SUBM_OUTPUT", show_default=True, help="Text for people, JSON for CI.")
SET = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                   help="A template variable for the job file (repeatable).")


class _Group(click.Group):
    """Every error reaches a person as one ``Error: ...`` line, never a traceback
    (``SUBM_DEBUG=1`` shows the traceback of an unexpected one)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SubmarineError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:  # `subm logs ... | head`: the reader left; so do we, quietly
            _quiet_stdout()
            ctx.exit(1)
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            click.echo(f"Error: {exc.strerror or exc}{where}", err=True)
            ctx.exit(1)
        except Exception as exc:  # a bug: still one line, with how to see more
            if os.environ.get("SUBM_DEBUG"):
                raise
            click.echo(f"Error: unexpected {type(exc).__name__}: {exc} (SUBM_DEBUG=1 shows the traceback)",
                       err=True)
            ctx.exit(1)


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so flushing at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="subm")
def main() -> None:
    """Run distributed deep-learning jobs on YARN or on this machine."""


def _load(job_file: str, sets: Tuple[str, ...], backend: Optional[str]) -> client.Job:
    """The job file, planned; every problem of the file and of the backend's own rules
    (``Backend.check``) refused at once, exit 2."""
    from .templating import split_set_options

    return client.load(job_file, dict(split_set_options(sets, identifiers=True)), backend=backend)


def _backend_option(help_text: str):
    """``--backend``: the registry's names (also from SUBM_BACKEND)."""
    return click.option("--backend", "-b", type=click.Choice(registry.names()), envvar="SUBM_BACKEND",
                        help=help_text)


BACKEND = _backend_option(f"Where to run: {registry.summaries()}; default: {registry.default_help()}.")
#: ``--backend`` of the commands that ask a backend about its jobs or cluster (list, cluster).
BACKEND_TO_ASK = _backend_option(f"Default: {registry.default_help()}.")


def login_options(command):
    """``--principal/--keytab`` of every command that talks to a cluster: the option, else the
    variable (SUBM_PRINCIPAL, SUBM_KEYTAB). Either becomes the variable for this process when the
    command runs (not when its line is parsed), the one route to the backend (for the Python API
    too: kerberos.requested reads it, then, for ``subm run``, the job file's ``kerberos``;
    docs/security.md)."""
    @functools.wraps(command)
    def logged_in(*args: Any, principal: Optional[str] = None, keytab: Optional[str] = None, **kwargs: Any) -> Any:
        for name, value in (("SUBM_PRINCIPAL", principal), ("SUBM_KEYTAB", keytab)):
            if value:
                os.environ[name] = value
        return command(*args, **kwargs)

    logged_in = click.option("--keytab", metavar="PATH", envvar="SUBM_KEYTAB",
                             help="Secure YARN: the principal's keytab (also SUBM_KEYTAB).")(logged_in)
    return click.option("--principal", metavar="NAME@REALM", envvar="SUBM_PRINCIPAL",
                        help="Secure YARN: the Kerberos principal to log in as, with --keytab (also "
                             "SUBM_PRINCIPAL; default: kinit's ticket).")(logged_in)


@main.command(help=f"""Check a job file and print the plan: tasks, resources, environments (as the backend gives
    them). The rules are those of every backend and of the one `subm run` would use: --backend,
    else {registry.default_help()}.""")
@click.argument("job_file")
@SET
@BACKEND
@OUTPUT
def validate(job_file: str, sets: Tuple[str, ...], backend: Optional[str], output: str) -> None:
    job = _load(job_file, sets, backend)
    envs = job.environments()
    if output == "json":
        click.echo(to_json(plan_json(job.plan, envs)))
    else:
        click.echo(format_plan(job.plan, envs))
        click.echo(f"OK: the job is valid. Backend: {job.backend}{job.why_backend}", err=True)


@main.command()
@click.argument("job_file")
@SET
@BACKEND
@OUTPUT
@click.option("--detach", "-d", is_flag=True, help="Return once submitted, printing the application id.")
@click.option("--dry-run", is_flag=True, help="Print the backend's request; submit nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@login_options
def run(job_file: str, sets: Tuple[str, ...], backend: Optional[str], output: str, detach: bool,
        dry_run: bool, quiet: bool) -> None:
    """Run a job and wait for it (exit 0 succeeded, 1 failed or killed, 2 bad input)."""
    from . import progress

    # Packing and uploading show their bytes on a terminal, a line every few seconds elsewhere.
    progress.configure(progress.Display.OFF if quiet or output == "json" else None)
    prepared = client.prepare(_load(job_file, sets, backend))
    if dry_run:
        click.echo(to_json(prepared.request.to_dict()) if output == "json" else prepared.describe())
        return
    if not quiet:
        click.echo(f"Backend: {prepared.job.backend}{prepared.job.why_backend}", err=True)
    with _TermAsInterrupt():
        # Progress lines count from submission, as the AM's times ("gang ready ... after submission")
        # do; each at the time of what it shows (the AM's), this count only until the AM answers.
        app_id = client.submit(prepared, detach=detach)
        start, wall_start = time.monotonic(), time.time()  # after packing and uploading: from submission
        if detach:
            click.echo(to_json({"app_id": app_id, "backend": prepared.job.backend}) if output == "json" else app_id)
            return
        click.echo(f"Submitted {prepared.job.name} as {app_id}", err=True)
        seen = {"events": 0, "line": ""}

        def follow(report: JobReport) -> None:
            if quiet:
                return
            events = report.events
            for line in format_events(events[seen["events"]:], report.submitted_at or wall_start):
                click.echo(line, err=True)
            seen["events"] = max(seen["events"], len(events))
            line = format_progress(report, time.monotonic() - start)
            # A new status may read the same (e.g. the AM finishing, then done): print it once.
            what = line.split("] ", 1)[-1]
            if what != seen["line"]:
                click.echo(line, err=True)
                seen["line"] = what

        try:
            report = client.wait(app_id, on_update=follow)
        except KeyboardInterrupt:
            from .backends.base import KILLED_BY_INTERRUPT

            click.echo(f"Interrupted: killing {app_id}", err=True)
            report = client.kill(app_id, why=KILLED_BY_INTERRUPT)
    _print_report(report, output, shipped=progress.measured())
    _remember(report)
    sys.exit(0 if report.state == JobState.SUCCEEDED else 1)


def _remember(report: JobReport) -> None:
    """Keep a job seen to end in the history; a history that cannot be written only warns."""
    from .history import remember

    try:
        remember(report)
    except SubmarineError as exc:
        click.echo(f"Warning: {exc}", err=True)


def _print_report(report: JobReport, output: str, shipped: Sequence[Any] = ()) -> None:
    """The report; in JSON, with what submission packed and uploaded (``timings.shipping``)."""
    if output != "json":
        click.echo(format_report(report))
        return
    data = public_report(report)
    if shipped:
        data.setdefault("timings", {})["shipping"] = [m.to_dict() for m in shipped]
    click.echo(to_json(data))


class _TermAsInterrupt:
    """SIGTERM behaves like Ctrl-C while a job is followed, so both stop it."""

    def __enter__(self) -> None:
        self.old = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        signal.signal(signal.SIGTERM, self.old)


@main.command()
@click.argument("app_id")
@OUTPUT
@login_options
def status(app_id: str, output: str) -> None:
    """Show a job's state and tasks."""
    report = client.status(app_id)
    _print_report(report, output)
    _remember(report)


@main.command()
@click.argument("app_id")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Give up after this long: exit 124; the job goes on.")
@OUTPUT
@login_options
def wait(app_id: str, timeout: Optional[float], output: str) -> None:
    """Wait for a job to end (one submitted with --detach) and print its report: exit 0
    succeeded, 1 failed or killed, 2 not a job's id, 124 --timeout passed first."""
    try:
        report = client.wait(app_id, timeout=timeout)
    except JobNotFoundError as exc:  # for CI: a wrong id is not a failed job
        raise SpecError([("APP_ID", str(exc))]) from None
    except KeyboardInterrupt:
        click.echo(f"Stopped waiting; {app_id} goes on", err=True)
        sys.exit(130)
    _print_report(report, output)
    _remember(report)
    sys.exit(0 if report.state == JobState.SUCCEEDED else 1)


@main.command(name="list")
@click.option("--all", "-a", "include_all", is_flag=True, help="Include finished jobs.")
@BACKEND_TO_ASK
@OUTPUT
@login_options
def list_jobs(include_all: bool, backend: Optional[str], output: str) -> None:
    """List jobs (running ones unless --all)."""
    jobs = client.jobs(include_finished=include_all, backend=backend)
    if output == "json":
        click.echo(to_json(public_list(jobs)))
        return
    if not jobs:
        click.echo("no jobs" + ("" if include_all else " running (--all shows finished ones)"), err=True)
        return
    for line in format_list(jobs):
        click.echo(line)


@main.command()
@BACKEND_TO_ASK
@OUTPUT
@login_options
def cluster(backend: Optional[str], output: str) -> None:
    """Show what the cluster offers: YARN's nodes (memory, vcores, GPUs: total, used, free) and
    queues; locally, this machine's GPUs (NVML), CPUs and memory."""
    from .cluster import format_cluster

    info = client.cluster(backend=backend)
    click.echo(to_json(info) if output == "json" else format_cluster(info))


@main.command(name="queue")
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@BACKEND_TO_ASK
@click.option("--output", "-o", "output", type=click.Choice(["text", "json", "prometheus"]), default="text",
              envvar="SUBM_OUTPUT", show_default=True,
              help="Text for people, JSON for CI, Prometheus' text format for node_exporter's textfile collector.")
@login_options
def queue(queue_name: Optional[str], backend: Optional[str], output: str) -> None:
    """Show the gangs waiting for room (in QUEUE, else every queue) in the order admission takes
    them, each with its expected start and the basis of the estimate, and the jobs holding GPUs."""
    from .queue_view import format_queue, queue_json, queue_prometheus

    view = client.queue(queue_name, backend=backend)
    if output == "prometheus":
        click.echo(queue_prometheus(view, [queue_name] if queue_name else ()), nl=False)
    else:
        click.echo(to_json(queue_json(view)) if output == "json" else format_queue(view))


@main.command()
@click.argument("app_id")
@OUTPUT
@login_options
def kill(app_id: str, output: str) -> None:
    """Stop a job and every one of its tasks."""
    report = client.kill(app_id)
    _print_report(report, output)
    _remember(report)


@main.command()
@click.argument("app_id", required=False)
@click.option("--name", "-n", help="Only jobs of this name (a glob such as 'mnist-*' works).")
@click.option("--state", "-s", type=click.Choice([s.value for s in JOB_ENDED], case_sensitive=False),
              help="Only jobs that ended so.")
@click.option("--since", help="Only jobs submitted since: 7d, 12h, 30m, or a date (2026-11-01; UTC).")
@click.option("--no-collect", is_flag=True, help="Do not first collect jobs that ended unseen.")
@OUTPUT
@login_options
def history(app_id: Optional[str], name: Optional[str], state: Optional[str], since: Optional[str],
            no_collect: bool, output: str) -> None:
    """List finished jobs (or show one) from the history, a Parquet dataset ($SUBM_HISTORY,
    default $SUBM_HOME/history). First collects the jobs that ended unseen (detached ones): local
    ones always, YARN ones where HADOOP_CONF_DIR (or SUBM_YARN_RM_URL) names a cluster."""
    from .history import History, collect, collected_backends, parse_since
    from .output import format_history, format_history_job, history_json

    after = parse_since(since) if since else None
    store = History()
    if not no_collect:
        _, problems = collect(store, collected_backends())
        for p in problems:
            click.echo(f"Warning: could not collect finished jobs from {p}", err=True)
        try:
            store.compact()
        except SubmarineError as exc:  # the history stays readable as it is
            click.echo(f"Warning: {exc}", err=True)
    if app_id:
        rows = _read(store, app_id=app_id)
        if not rows:
            raise JobNotFoundError(f"the history at {store.location} holds no job {app_id}")
        click.echo(to_json(history_json(rows[0], with_spec=True)) if output == "json"
                   else format_history_job(rows[0]))
        return
    rows = _read(store, name=name, state=state, since=after)
    if output == "json":
        click.echo(to_json([history_json(r) for r in rows]))
    elif not rows:
        click.echo(f"no finished jobs{' match' if name or state or since else ''} in {store.location}", err=True)
    else:
        click.echo(format_history(rows))


def _read(store: Any, **filters: Any) -> Any:
    rows = store.rows(**filters)
    for problem in store.problems:
        click.echo(f"Warning: skipped an unreadable history file: {problem}", err=True)
    return rows


@main.command()
@click.argument("app_id")
@click.option("--role", "-r", help="Only this role's tasks.")
@click.option("--index", "-i", type=click.IntRange(min=0), help="Only this task index.")
@click.option("--attempt", type=click.IntRange(min=1), metavar="N",
              help="Only each task's attempt N (from 1, as reports count); the AM's log stays whole.")
@click.option("--tail", type=click.IntRange(min=0), metavar="N", help="Only the last N lines of each log.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@login_options
def logs(app_id: str, role: Optional[str], index: Optional[int], attempt: Optional[int], tail: Optional[int],
         follow: bool) -> None:
    """Print tasks' stdout/stderr, every attempt (and the AM's log, of every AM attempt, when
    no role or index is given)."""
    from .jobfile.fields import ROLE_NAME

    if role is not None and not ROLE_NAME.match(role):
        raise SpecError([("--role", f"expected a role name (a letter, then letters, digits or '-'), got {role!r}")])
    try:
        client.write_logs(app_id, sys.stdout, role=role, index=index, attempt=attempt, tail=tail, follow=follow)
    except KeyboardInterrupt:
        pass


@main.command()
@click.option("--framework", "-f", type=click.Choice(["pytorch", "tensorflow", "custom"]), default="pytorch",
              show_default=True)
@click.option("--name", "-n", default=None,
              help="Job name (default: made from the directory's name, e.g. 'My Project' -> my-project).")
@click.option("--path", "-p", type=click.Path(dir_okay=False), default="job.yaml", show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing job file (and train.py).")
def init(framework: str, name: Optional[str], path: str, force: bool) -> None:
    """Write a commented job file that runs as written (and, for pytorch and tensorflow,
    a small train.py beside it)."""
    from .scaffold import write_job_scaffold

    done = write_job_scaffold(framework, path, name=name, force=force)
    for written in done.written:
        click.echo(f"Wrote {written}", err=True)
    for kept in done.kept:
        click.echo(f"Kept the existing {kept} (the job runs it; --force replaces it)", err=True)
    click.echo(f"Check it with: subm validate {path}; run it with: subm run {path}", err=True)


@main.command(name="hadoop-conf")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="An admin value, lists comma-separated (repeatable); keys in hadoop-conf/README.md.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
def hadoop_conf(out_dir: str, sets: Tuple[str, ...], force: bool) -> None:
    """Write example YARN configuration for GPUs and Docker (yarn-site.xml, resource-types.xml,
    capacity-scheduler.xml, container-executor.cfg), rendered with an admin's values."""
    from .hadoopconf import mount_warnings, parse_values, write_hadoop_conf

    values = parse_values(sets)
    for path in write_hadoop_conf(out_dir, values, force=force):
        click.echo(path)
    for warning in mount_warnings(values):
        click.echo(f"Warning: {warning}", err=True)


if __name__ == "__main__":
    main()
