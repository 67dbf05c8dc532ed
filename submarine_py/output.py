"""How reports and plans look to a person (text) and to CI (JSON)."""
from __future__ import annotations

import json
from typing import Any, Dict, List

from .plan import Plan
from .units import format_memory


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False)


def public_report(report: Dict[str, Any]) -> Dict[str, Any]:
    """The report as ``--output json`` promises it (stable keys first)."""
    keys = ("app_id", "name", "state", "attempts", "diagnostics", "tasks", "timings", "backend",
            "framework", "status_url")
    out = {k: report.get(k) for k in keys if k in report}
    out["tasks"] = [
        {k: t.get(k) for k in ("role", "index", "state", "exit_code", "restarts", "host", "log", "tracked")}
        for t in report.get("tasks") or []
    ]
    out.setdefault("timings", {"gang_ready_seconds": None, "total_seconds": None})
    return out


def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def format_report(report: Dict[str, Any]) -> str:
    t = report.get("timings") or {}
    attempts = report.get("attempts") or 1
    state = report.get("state")
    if state in ("SUCCEEDED", "FAILED", "KILLED"):
        head = (f"Job {report.get('name', '')} ({report.get('app_id')}) {state} "
                f"after {attempts} attempt{'s' if attempts != 1 else ''}")
        if t.get("total_seconds") is not None:
            head += f" in {t['total_seconds']:.1f} s"
    else:
        head = f"Job {report.get('name', '')} ({report.get('app_id')}) {state}, attempt {attempts}"
        if t.get("total_seconds") is not None:
            head += f", {t['total_seconds']:.1f} s since submission"
    if t.get("gang_ready_seconds") is not None:
        head += f" (gang ready after {t['gang_ready_seconds']:.1f} s)"
    lines = [head]
    tasks = report.get("tasks") or []
    if tasks:
        rows = [["TASK", "STATE", "EXIT", "RESTARTS", "HOST", "LOG"]]
        for task in tasks:
            code = task.get("exit_code")
            rows.append([f"{task['role']}:{task['index']}" + ("" if task.get("tracked", True) else "*"),
                         str(task.get("state")), "" if code is None else str(code),
                         str(task.get("restarts", 0)), str(task.get("host") or ""), str(task.get("log") or "")])
        lines += _table(rows)
        if any(not task.get("tracked", True) for task in tasks):
            lines.append("  * untracked: stopped when every tracked task has succeeded")
    if report.get("diagnostics"):
        lines.append(f"Diagnostics: {report['diagnostics']}")
    return "\n".join(lines)


def format_events(events: List[Dict[str, Any]], start: float) -> List[str]:
    """AM decisions as progress lines (``start``: the submission's wall-clock time)."""
    return [f"[{max(0.0, e['time'] - start):6.1f}s] AM: {e['message']}" for e in events]


def format_progress(report: Dict[str, Any], elapsed: float) -> str:
    state = report.get("state")
    if state in ("ACCEPTED", None) or report.get("phase") == "STARTING" and not report.get("tasks"):
        return f"[{elapsed:6.1f}s] {state or 'SUBMITTED'}: waiting for the ApplicationMaster"
    total = report.get("total") or len(report.get("tasks") or [])
    registered = sum(1 for t in report.get("tasks") or [] if t.get("state") in ("REGISTERED", "RUNNING"))
    attempt = report.get("attempts", 1)
    if report.get("phase") == "STARTING":
        return f"[{elapsed:6.1f}s] attempt {attempt}: gang {registered}/{total} tasks up"
    failed = [f"{t['role']}:{t['index']} (exit {t.get('exit_code')})" for t in report.get("tasks") or []
              if t.get("state") == "FAILED"]
    done = sum(1 for t in report.get("tasks") or [] if t.get("state") == "SUCCEEDED")
    line = (f"[{elapsed:6.1f}s] attempt {attempt}: {report.get('running', 0)}/{total} tasks running, "
            f"{done} succeeded")
    if failed:
        line += f", failed: {', '.join(failed)}"
    if state in ("SUCCEEDED", "FAILED", "KILLED"):
        line += f"; job {state}, stopping"
    return line


def format_plan(plan: Plan, envs: Dict[str, Dict[str, str]]) -> str:
    job = plan.job
    r = job.restart
    lines = [f"Job {job.name}: framework {job.framework}, queue {job.queue}, restart {r.policy} "
             f"(max_restarts {r.max_restarts}), gang timeout {job.timeouts.gang_seconds} s"]
    if job.files:
        lines.append("Files: " + ", ".join(f"{d} <- {s}" for d, s in job.files.items()))
    for t in plan.tasks:
        res = t.resources
        lines.append(f"{t.id}  {'tracked' if t.tracked else 'untracked'}  {format_memory(res.memory_mb)}, "
                     f"{res.vcores} vcore{'s' if res.vcores != 1 else ''}, {res.gpus} GPU"
                     f"{'s' if res.gpus != 1 else ''}"
                     + (f", image {t.docker.image}" if t.docker else "")
                     + (f", node label {t.node_label}" if t.node_label else ""))
        lines.append(f"    command: {t.command}")
        for k, v in sorted(envs[t.id].items()):
            lines.append(f"    {k}={v}")
    return "\n".join(lines)
