"""The machine's GPUs, shared by every local job: who holds which device, and who waits.

Each local job's AM runs alone, so without a common record two jobs would hand out the same
devices. The ledger is a small JSON file under ``$SUBM_HOME/local/`` that every AM reads and
rewrites under an exclusive ``fcntl.flock``::

    {"gpus":    {"0": {"job": "local_…", "task": "worker:0", "executor": "worker-0-e1",
                       "pid": 4242, "pid_started": "123456", "since": 1764000000.0}},
     "waiting": {"local_…": {"pid": 4343, "pid_started": "…", "submitted_at": 1764000001.0,
                             "gpus": [1, 1], "since": 1764000002.0}}}

A job takes every GPU its gang needs at once or none (:meth:`GpuLedger.reserve`); jobs that
wait are listed, so that admission can take them oldest first and keep a large gang from being
starved by small ones (:func:`...admission.admit`, the same rule as on YARN). An entry whose
AM process is gone (its pid dead, or reused by another process: its start time differs) is
dropped by whoever opens the ledger next, so a crashed job never keeps a GPU.

The ledger is per ``SUBM_HOME`` (one per user by default): jobs of two users with different
homes do not see each other's entries.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ...admission import Gang, Need, Room, admit
from ...home import subm_home
from ...procs import pid_alive

LEDGER_NAME = "gpu-ledger.json"
#: The one node of a local "cluster", as admission names it.
MACHINE = "this machine"


def ledger_path(home: Optional[str] = None) -> str:
    return os.path.join(home or subm_home(), "local", LEDGER_NAME)


def process_started(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, from /proc): tells a reused pid; "" if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def holder_alive(entry: Mapping[str, Any]) -> bool:
    """Whether the AM that wrote ``entry`` still runs (same pid, same start time)."""
    pid = entry.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    started = entry.get("pid_started") or ""
    return not started or started == process_started(pid)


@dataclass(frozen=True)
class Reservation:
    """The answer of :meth:`GpuLedger.reserve`: the devices of each task, or why none."""

    gpus: Dict[str, List[str]]
    why: str = ""

    @property
    def granted(self) -> bool:
        return not self.why


class GpuLedger:
    """The machine-wide record of GPUs held by local jobs. ``devices``: the machine's GPU ids
    (``gpus.local_gpu_ids()``); ``job``: the job this AM runs; ``pid``: the AM's process."""

    def __init__(self, path: str, devices: Sequence[str], job: str, pid: Optional[int] = None):
        self.path = path
        self.devices = list(devices)
        self.job = job
        self.pid = os.getpid() if pid is None else pid
        self.pid_started = process_started(self.pid)

    # -- the file ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _open(self) -> Iterator[Dict[str, Any]]:
        """The ledger, locked against every other AM, reclaimed of dead holders; written back."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                state = self._read()
                before = json.dumps(state, sort_keys=True)
                for key in ("gpus", "waiting"):
                    state[key] = {k: v for k, v in state[key].items() if holder_alive(v)}
                yield state
                if json.dumps(state, sort_keys=True) != before:
                    tmp = f"{self.path}.{os.getpid()}.tmp"
                    with open(tmp, "w") as f:
                        json.dump(state, f, indent=1, sort_keys=True)
                    os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read(self) -> Dict[str, Any]:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (OSError, ValueError):  # none yet (or torn by hand): start from empty
            data = {}
        if not isinstance(data, dict):
            data = {}
        return {key: dict(data.get(key) or {}) for key in ("gpus", "waiting")}

    def _mine(self, **fields: Any) -> Dict[str, Any]:
        return dict(fields, job=self.job, pid=self.pid, pid_started=self.pid_started, since=time.time())

    # -- what AMs ask ----------------------------------------------------------------------------
    def reserve(self, want: Mapping[str, int], submitted_at: float, now: Optional[float] = None, *,
                queue: bool = True) -> Reservation:
        """Every GPU ``want`` (task id -> count) asks, at once, or none.

        GPUs this job already holds count as its own (a gang restarted after its executors
        ended never waits for itself), a task keeping the devices it had. When some are short,
        or an older waiting job goes first (:func:`admit`), the job is listed as waiting and the
        answer says why, naming who holds what. ``queue=False``: a replacement under a gang that
        is up, which takes free devices without passing admission or being listed."""
        now = time.time() if now is None else now
        want = {task: n for task, n in want.items() if n > 0}
        with self._open() as state:
            gpus, waiting = state["gpus"], state["waiting"]
            mine = {g: e for g, e in gpus.items() if e["job"] == self.job
                    and (e.get("task") in want or (queue and not e.get("executor")))}
            pool = [g for g in self.devices if g not in gpus or g in mine]
            me = Gang(self.job, "", submitted_at, tuple(Need(gpus=n) for n in want.values()))
            others = tuple(Gang(job, "", float(w.get("submitted_at") or 0.0),
                                tuple(Need(gpus=int(n)) for n in w.get("gpus") or ()))
                           for job, w in waiting.items() if job != self.job and queue)
            verdict = admit(me, Room({MACHINE: Need(gpus=len(pool))}, others=others), now=now)
            if not verdict.fits:
                if queue:
                    waiting[self.job] = self._mine(submitted_at=submitted_at, gpus=list(want.values()))
                return Reservation({}, self._why(sum(want.values()), pool, gpus, others, submitted_at, now))
            if queue:
                waiting.pop(self.job, None)
            out = {task: [g for g in pool if g in mine and mine[g].get("task") == task][:n]
                   for task, n in want.items()}  # a task keeps the devices it had
            kept = {g for devices in out.values() for g in devices}
            rest = [g for g in pool if g not in kept]
            for task, n in want.items():
                while len(out[task]) < n:
                    out[task].append(rest.pop(0))
            for g in mine:
                gpus.pop(g, None)
            for task, devices in out.items():
                for g in devices:
                    gpus[g] = self._mine(task=task, executor=None)
            return Reservation(out)

    def bind(self, task: str, executor: str) -> List[str]:
        """The devices reserved for ``task``, now used by ``executor``; [] if none are."""
        with self._open() as state:
            held = sorted((g for g, e in state["gpus"].items() if e["job"] == self.job and e.get("task") == task),
                          key=self._order)
            for g in held:
                state["gpus"][g]["executor"] = executor
            return held

    def release(self, executor: Optional[str] = None) -> List[str]:
        """Give back the devices ``executor`` uses (None: every device of this job, and its place
        among the waiting jobs); returns them."""
        with self._open() as state:
            gone = [g for g, e in state["gpus"].items()
                    if e["job"] == self.job and (executor is None or e.get("executor") == executor)]
            for g in gone:
                del state["gpus"][g]
            if executor is None:
                state["waiting"].pop(self.job, None)
            return sorted(gone, key=self._order)

    def holders(self) -> Dict[str, Dict[str, Any]]:
        """GPU id -> its entry, for every GPU held by a live AM."""
        with self._open() as state:
            return dict(state["gpus"])

    # -- words ---------------------------------------------------------------------------------
    def _order(self, gpu: str) -> Tuple[int, str]:
        return (self.devices.index(gpu) if gpu in self.devices else len(self.devices), gpu)

    def _why(self, asked: int, pool: List[str], gpus: Mapping[str, Any], others: Sequence[Gang],
             submitted_at: float, now: float) -> str:
        """'waiting for 2 GPUs: 1 free on this machine (GPU 0 held by job X)'."""
        words = f"waiting for {asked} GPU{'s' if asked != 1 else ''}: {len(pool)} free on this machine"
        held = [f"GPU {g} held by job {gpus[g]['job']}" for g in self.devices if g in gpus and g not in pool]
        if held:
            words += f" ({', '.join(held)})"
        if asked <= len(pool):
            older = sorted((g for g in others if g.submitted_at <= submitted_at), key=lambda g: g.submitted_at)
            if older:
                g = older[0]
                n = sum(need.gpus for need in g.needs)
                words += (f", kept for {len(older)} older job{'s' if len(older) > 1 else ''} waiting first "
                          f"({g.job}, {n} GPU{'s' if n != 1 else ''}, waiting {now - g.submitted_at:.0f} s)")
        return words
