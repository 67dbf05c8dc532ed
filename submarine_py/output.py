"""How reports and plans look to a person (text) and to CI (JSON)."""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Sequence, Tuple

from .plan import Plan
from .queue_view import place_lines
from .report import Event, JobReport, SweepReport, restart_counts
from .states import Cause, JobState, Phase, TaskState, TrialState
from .units import format_memory

#: A running task silent for this share of timeouts.hang_seconds is named under its table.
QUIET_SHOWN_SHARE = 0.5


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False)


def public_report(report: JobReport) -> Dict[str, Any]:
    """The report as ``--output json`` promises it (docs/cli.md, "--output json")."""
    return report.public()


def public_list(reports: Sequence[JobReport]) -> List[Dict[str, Any]]:
    """``subm list --output json``: the keys docs/cli.md promises for each job."""
    return [{"app_id": r.app_id, "name": r.name, "state": r.state.value, "attempts": r.attempts} for r in reports]


def format_list(reports: Sequence[JobReport]) -> List[str]:
    width = max(len(r.app_id) for r in reports)
    return [f"{r.app_id.ljust(width)}  {str(r.state).ljust(9)}  {r.name or ''}" for r in reports]


def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def format_report(report: JobReport) -> str:
    t = report.timings
    attempts = report.attempts or 1
    state = report.state
    if state.is_terminal():
        head = (f"Job {report.name or ''} ({report.app_id}) {state} "
                f"after {attempts} attempt{'s' if attempts != 1 else ''}")
        if t.total_seconds is not None:
            head += f" in {t.total_seconds:.1f} s"
    else:
        head = f"Job {report.name or ''} ({report.app_id}) {state}, attempt {attempts}"
        if t.total_seconds is not None:
            head += f", {t.total_seconds:.1f} s since submission"
    if t.gang_ready_seconds is not None:
        # Same number, same words as the AM's "gang ready" line.
        head += f" (gang ready {t.gang_ready_seconds:.1f} s after submission)"
    lines = [head]
    if report.waiting_for:
        lines.append(f"Queued, {holding(report)}: {report.waiting_for}")
        if report.place is not None:
            lines += place_lines(report.place, time.time())
    elif t.queued_seconds:
        lines.append(f"Queued {t.queued_seconds:.1f} s for room for its gang")
    if report.tensorboard_url:
        lines.append(f"TensorBoard: {report.tensorboard_url}")
    if report.world_sizes:
        lines.append(f"Elastic: {report.world_sizes[-1]} task(s) in this attempt's world; by attempt: "
                     + ", ".join(str(n) for n in report.world_sizes))
    if report.tasks:
        with_gpu = any(task.gpu for task in report.tasks)
        rows = [["TASK", "STATE", "EXIT", "RESTARTS", "HOST"] + (["GPU MEAN/PEAK", "GPU MEM PEAK"] if with_gpu else [])
                + ["LOG"]]
        for task in report.tasks:
            code = task.exit_code
            rows.append([task.id + ("" if task.tracked else "*"), task_state_words(task.state, task.cause),
                         "" if code is None else str(code), restarts_cell(task.restarts, task.restarts_by_cause),
                         task.host or ""]
                        + (gpu_cells(task.gpu) if with_gpu else []) + [task.log or ""])
        lines += _table(rows)
        if any(not task.tracked for task in report.tasks):
            lines.append("  * untracked: stopped when every tracked task has succeeded")
        for task in report.tasks:
            if task.gpu and task.gpu.idle:
                lines.append(f"  ! {task.id} held {len(task.gpu.devices)} GPU(s) "
                             f"at 0 % utilization for {task.gpu.idle_seconds:.0f} s")
            hang = report.hang_seconds
            if hang and task.quiet_seconds is not None and task.quiet_seconds >= hang * QUIET_SHOWN_SHARE:
                lines.append(f"  ! {task.id} quiet for {task.quiet_seconds:.0f} s of {hang} "
                             f"(timeouts.hang_seconds: then it is stopped as hung)")
    if report.sweep is not None:
        lines += format_trials(report.sweep)
    counts = restart_counts(report.restarts_by_cause)
    if any(counts.values()):
        lines.append(f"Restarts: {causes_words(counts)} (the cluster's faults spend no max_restarts)"
                     if counts[Cause.PREEMPTED.value] or counts[Cause.NODE_LOST.value] else
                     f"Restarts: {causes_words(counts)} (an elastic world's resizes spend no budget)"
                     if counts[Cause.RESIZED.value] else f"Restarts: {causes_words(counts)}")
    if report.diagnostics:
        lines.append(f"Diagnostics: {report.diagnostics}")
    return "\n".join(lines)


def _param_words(params: Dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def format_trials(sweep: SweepReport) -> List[str]:
    """A sweep's trials (number, params, state, value, container, duration) and the best so far."""
    rows = [["TRIAL", "PARAMS", "STATE", sweep.metric.upper(), "STEP", "CONTAINER", "DURATION"]]
    for t in sweep.trials:
        rows.append([str(t.number), _param_words(t.params), t.state.value,
                     "" if t.value is None else f"{t.value:.6g}", "" if t.step is None else str(t.step),
                     t.container or "", _seconds(t.duration_seconds) if t.duration_seconds is not None else "-"])
    done = sum(1 for t in sweep.trials if t.state != TrialState.RUNNING)
    lines = [f"Sweep: {done} of {sweep.planned} trials ended, {sweep.metric} to {sweep.goal}"]
    lines += _table(rows)
    for t in sweep.trials:
        if t.state == TrialState.FAILED and t.diagnostics:
            lines.append(f"  ! trial {t.number}: {t.diagnostics}")
    if sweep.best is not None:
        lines.append(f"Best so far: trial {sweep.best.number}, {sweep.metric}={sweep.best.value:.6g} "
                     f"with {_param_words(sweep.best.params)}")
    return lines


def sweep_progress(sweep: SweepReport) -> str:
    """A sweep's progress in a few words: trials ended and running, the best so far."""
    ended = sum(1 for t in sweep.trials if t.state != TrialState.RUNNING)
    running = len(sweep.trials) - ended
    best = f", best {sweep.metric}={sweep.best.value:.6g} (trial {sweep.best.number})" if sweep.best else ""
    return f"sweep: {ended}/{sweep.planned} trials ended, {running} running{best}"


def task_state_words(state: Any, cause: Any) -> str:
    """A task's state for people: a task whose attempt the cluster ended, or that hung, says so
    (``PREEMPTED``, ``NODE LOST``, ``HUNG``) instead of ``FAILED``."""
    if str(state) == TaskState.FAILED.value and cause and str(cause) != Cause.FAILED.value:
        return Cause(str(cause)).words.upper()
    return str(state)


def causes_words(counts: Dict[str, int]) -> str:
    """``1 failed, 2 preempted``: the causes of restarts that happened."""
    return ", ".join(f"{n} {Cause(c).words}" for c, n in restart_counts(counts).items() if n)


def restarts_cell(restarts: Any, by_cause: Any) -> str:
    """A task's restarts, with their causes where any was not a plain failure: ``3 (2 preempted, 1 failed)``."""
    counts = restart_counts(by_cause)
    if not any(n for c, n in counts.items() if c != Cause.FAILED.value):
        return str(restarts or 0)
    return f"{restarts or 0} ({causes_words(counts)})"


def gpu_cells(g: Any) -> List[str]:
    """A task's GPU summary (a ``GpuSummary`` or its dict, as history keeps it) as two table
    cells: ``23%/87%`` (``IDLE`` appended) and peak memory."""
    if not g:
        return ["-", "-"]
    g = g if isinstance(g, dict) else g.to_dict()
    use = f"{g['mean_utilization']:.0f}%/{g['peak_utilization']}%" + (" IDLE" if g.get("idle") else "")
    return [use, format_memory(g["peak_memory_mb"]) if g["peak_memory_mb"] else "0 MiB"]


def history_json(row: Dict[str, Any], with_spec: bool = False) -> Dict[str, Any]:
    """A history row for scripts: times as ISO 8601 UTC; the spec (one job only) as an object."""
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items() if k != "spec"}
    if with_spec:
        out["spec"] = json.loads(row["spec"]) if row.get("spec") else None
    if row.get("trials"):  # a sweep's: each trial's params as an object
        out["trials"] = [dict(t, params=json.loads(t["params"]) if t.get("params") else {}) for t in row["trials"]]
    return out


def _when(t: Any) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t is not None else "-"


def _seconds(s: Any) -> str:
    if s is None:
        return "-"
    s = float(s)
    return f"{s:.1f}s" if s < 120 else f"{s / 60:.1f}m" if s < 7200 else f"{s / 3600:.1f}h"


def format_history(rows: List[Dict[str, Any]]) -> str:
    table = [["APP_ID", "NAME", "STATE", "ATTEMPTS", "SUBMITTED (UTC)", "DURATION", "GANG READY", "USER",
              "BACKEND", "GPU MEAN/PEAK"]]
    for r in rows:
        gpus = [t["gpu"] for t in r.get("tasks") or [] if t.get("gpu")]
        gpu = "-"
        if gpus:
            mean = sum(g["mean_utilization"] or 0 for g in gpus) / len(gpus)
            gpu = f"{mean:.0f}%/{max(g['peak_utilization'] or 0 for g in gpus)}%" + (
                " IDLE" if any(g.get("idle") for g in gpus) else "")
        table.append([r["app_id"], str(r.get("name") or ""), str(r.get("state")),
                      restarts_cell(r.get("attempts") or "-", r.get("restarts_by_cause")),
                      _when(r.get("submitted_at")), _seconds(r.get("total_seconds")),
                      _seconds(r.get("gang_ready_seconds")), str(r.get("user") or "-"), str(r.get("backend") or "-"),
                      gpu])
    return "\n".join(line[2:] for line in _table(table))


def format_history_job(r: Dict[str, Any]) -> str:
    counts = restart_counts(r.get("restarts_by_cause"))
    lines = [f"Job {r.get('name') or ''} ({r['app_id']}) {r.get('state')} after {r.get('attempts') or 1} "
             f"attempt(s)" + (f" (restarts: {causes_words(counts)})" if any(counts.values()) else ""),
             f"  backend {r.get('backend') or '-'}, framework {r.get('framework') or '-'}, user {r.get('user') or '-'}"
             + (f", queue {r['queue']}" if r.get("queue") else ""),
             f"  submitted {_when(r.get('submitted_at'))} UTC, started {_when(r.get('started_at'))}, "
             f"ended {_when(r.get('finished_at'))}; took {_seconds(r.get('total_seconds'))}, "
             f"gang ready {_seconds(r.get('gang_ready_seconds'))} after submission"]
    tasks = r.get("tasks") or []
    if tasks:
        rows = [["TASK", "STATE", "EXIT", "RESTARTS", "HOST", "GPU MEAN/PEAK", "GPU MEM PEAK"]]
        for t in tasks:
            code = t.get("exit_code")
            rows.append([f"{t.get('role')}:{t.get('index')}", task_state_words(t.get("state"), t.get("cause")),
                         "" if code is None else str(code),
                         restarts_cell(t.get("restarts"), t.get("restarts_by_cause")),
                         str(t.get("host") or "")] + gpu_cells(t.get("gpu")))
        lines += _table(rows)
    trials = r.get("trials") or []
    if trials:
        metric = str(r.get("metric") or "value")
        rows = [["TRIAL", "PARAMS", "STATE", metric.upper(), "CONTAINER", "DURATION"]]
        for t in trials:
            params = json.loads(t["params"]) if t.get("params") else {}
            rows.append([str(t.get("number")), _param_words(params), str(t.get("state")),
                         "" if t.get("value") is None else f"{t['value']:.6g}", str(t.get("container") or ""),
                         _seconds(t.get("duration_seconds"))])
        lines += _table(rows)
    if r.get("diagnostics"):
        lines.append(f"Diagnostics: {r['diagnostics']}")
    if r.get("spec"):
        lines.append("Spec: " + r["spec"])
    return "\n".join(lines)


def format_events(events: Sequence[Event], submitted_at: float) -> List[str]:
    """AM decisions as progress lines, each at its own time (seconds since ``submitted_at``,
    the job's submission as its report gives it: the origin of the AM's "gang ready ... s
    after submission")."""
    return [f"[{max(0.0, e.time - submitted_at):6.1f}s] AM: {e.message}" for e in events]


def progress_seconds(report: JobReport, elapsed: float) -> float:
    """When the state a progress line shows held, in seconds since submission: the AM's own
    time (the job's end for an ended job, else when the AM made the report), which orders it
    with the AM's decisions; ``elapsed`` (the client's count) only where no AM has answered."""
    if report.state.is_terminal() and report.finished_at is not None and report.submitted_at is not None:
        return max(0.0, report.finished_at - report.submitted_at)
    if report.phase is not None and report.timings.total_seconds is not None:
        return max(0.0, report.timings.total_seconds)
    return elapsed


def holding(report: JobReport) -> str:
    """What a queued job holds, in words: none, unless the cluster still lists task containers
    for it (its AM gives them back: issue 32)."""
    n = report.held_containers or 0
    if not n:
        return "holding no task container"
    return f"still holding {n} task container{'s' if n != 1 else ''} (giving {'them' if n != 1 else 'it'} back)"


def format_progress(report: JobReport, elapsed: float) -> str:
    """The job's state as one progress line, at :func:`progress_seconds`."""
    at = f"[{progress_seconds(report, elapsed):6.1f}s]"
    state = report.state
    if state == JobState.ACCEPTED or report.phase == Phase.STARTING and not report.tasks:
        return f"{at} {state}: waiting for the ApplicationMaster"
    total = report.total or len(report.tasks)
    if not total:  # nothing from the AM (it is gone, or never answered): no task counts to show
        if state.is_terminal():
            return f"{at} job {state}"
        return f"{at} {state}: the ApplicationMaster does not answer"
    if report.sweep is not None and report.phase != Phase.QUEUED:
        return f"{at} {sweep_progress(report.sweep)}" + (f"; job {state}" if state.is_terminal() else "")
    registered = sum(1 for t in report.tasks if t.state in (TaskState.REGISTERED, TaskState.RUNNING))
    attempt = report.attempts
    if report.phase == Phase.QUEUED and not state.is_terminal():
        return f"{at} attempt {attempt}: queued, {holding(report)}" + (
            f": {report.waiting_for}" if report.waiting_for else "")
    if report.phase == Phase.STARTING:
        return f"{at} attempt {attempt}: gang {registered}/{total} tasks up"
    failed = [f"{t.id} ({t.cause.words if t.cause and t.cause != Cause.FAILED else f'exit {t.exit_code}'})"
              for t in report.tasks if t.state == TaskState.FAILED]
    done = sum(1 for t in report.tasks if t.state == TaskState.SUCCEEDED)
    line = f"{at} attempt {attempt}: {report.running}/{total} tasks running, {done} succeeded"
    if failed:
        line += f", failed: {', '.join(failed)}"
    if state.is_terminal():
        line += f"; job {state}, stopping"
    return line


def split_process_envs(envs: Sequence[Dict[str, str]]) -> Tuple[Dict[str, str], List[Dict[str, str]]]:
    """A task's processes' environments as (what every process gets, what each process gets
    of its own, in local-rank order): one process has everything in the first."""
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    if len(envs) == 1:
        return common, []
    return common, [{k: v for k, v in e.items() if k not in common} for e in envs]


def plan_json(plan: Plan, envs: Dict[str, List[Dict[str, str]]]) -> Dict[str, Any]:
    """``subm validate --output json``: the plan, each task with ``env`` (what all its processes
    get) and, for a task of several processes, ``process_env`` (what each gets of its own,
    ``LOCAL_RANK``, ``RANK`` ..., in local-rank order)."""
    d = plan.to_dict()
    for t in d["tasks"]:
        common, own = split_process_envs(envs[t["id"]])
        t["env"] = common
        if own:
            t["process_env"] = own
    return d


def sweep_plan_lines(sw: Any) -> List[str]:
    """What ``subm validate`` says of a sweep: its search, and what each trial gets."""
    from .jobfile.sweep import param_variable

    def shown(p: Any) -> str:
        return f"{list(p.choices)}" if p.choices else f"{p.low:g}..{p.high:g}" + (" (log)" if p.log else "")

    early = (f", early stop: {sw.early_stop.rule} (warmup {sw.early_stop.warmup_steps} steps, after "
             f"{sw.early_stop.startup_trials} trials)" if sw.early_stop else "")
    return [f"Sweep: {sw.trials} trials, {sw.parallel} at a time, {sw.algorithm}"
            + (f" (seed {sw.seed})" if sw.seed is not None else "") + f", {sw.goal} {sw.metric}{early}; "
            f"at most {sw.max_failed_trials} failed",
            "  each trial gets SUBM_TRIAL and " + ", ".join(f"{param_variable(n)} ({shown(p)})"
                                                          for n, p in sw.params.items())]


def format_plan(plan: Plan, envs: Dict[str, List[Dict[str, str]]]) -> str:
    job = plan.job
    r = job.restart
    lines = [f"Job {job.name}: framework {job.framework}, queue {job.queue}, restart {r.policy} "
             f"(max_restarts {r.max_restarts}, max_cluster_restarts {r.max_cluster_restarts}), "
             f"gang timeout {job.timeouts.gang_seconds} s, stop grace {job.timeouts.stop_grace_seconds:g} s"
             + (f", hang after {job.timeouts.hang_seconds} s without output" if job.timeouts.hang_seconds else "")]
    if job.files:
        lines.append("Files: " + ", ".join(f"{d} <- {s}" for d, s in job.files.items()))
    if job.sweep is not None:
        lines += sweep_plan_lines(job.sweep)
    for t in plan.tasks:
        res = t.resources
        lines.append(f"{t.id}  {'tracked' if t.tracked else 'untracked'}  {format_memory(res.memory_mb)}, "
                     f"{res.vcores} vcore{'s' if res.vcores != 1 else ''}, {res.gpus} GPU"
                     f"{'s' if res.gpus != 1 else ''}"
                     + (f", {t.processes} processes" if t.processes != 1 else "")
                     + (f", image {t.docker.image}" if t.docker else "")
                     + (f", node label {t.node_label}" if t.node_label else ""))
        lines.append(f"    command: {t.command}")
        common, own = split_process_envs(envs[t.id])
        for k, v in sorted(common.items()):
            lines.append(f"    {k}={v}")
        for local_rank, env in enumerate(own):
            lines.append(f"    process {local_rank}: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    return "\n".join(lines)
