"""The line's steward: one AM reads the cluster's room for every waiting gang and tells each its
verdict, so that what the ResourceManager serves to waiting gangs does not grow with their
number (issue 44). The protocol between AMs is in ``../protocol.py``; the rules in
``admission.py`` (:func:`~submarine_py.admission.decide_line` gives each gang the verdict its own
:func:`~submarine_py.admission.admit` would).

* **Who.** The oldest subm application whose AM is up (RUNNING in YARN; oldest by application
  id) is the steward: any AM can be, none is elected, no daemon is installed. It steps in when
  a waiting AM first asks it (:meth:`Steward.ask`), reads the room while asked (every
  :data:`STEWARD_SECONDS`, with jitter), and stops reading :data:`IDLE_SECONDS` after the last ask.
* **What it reads**, once per round for every gang: the cluster's metrics; this tool's
  applications (slim) only where the RM's counts of applications changed, the last round let a
  gang ask, or :data:`LINE_SECONDS` passed; the running nodes and the queues only where the
  metrics say some gang may fit (or a gang is new, holds containers, YARN preempts, or a minute
  has passed).
* **How the others learn.** A waiting AM (:class:`Stewardship`) takes the applications it read
  whole once, finds the oldest one's AM address in the report that AM leaves in its log folder
  (through its NodeManager, not the RM), and asks it over HTTP each poll. Where the steward does
  not answer (it ended, its node died, it is an older subm), the next oldest is asked; where
  none answers, or its verdict is stale, the AM decides alone for that poll, as before: any AM
  may die at any moment and admission goes on within a poll or two.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import astuple, dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ....admission import Gang, Room, Verdict, admit, decide_line, line, short_in_all, total
from ..capacity import Capacity, needs_of, node_room, node_totals, room_in, waiting_gangs
from ..hadoop.resourcemanager import ResourceManager
from ....executor.protocol import PATH_LINE
from ..protocol import REPORT_FILE, TAG

log = logging.getLogger("subm.am.yarn")

#: How often the steward reads the room while asked (seconds, on average; drawn within JITTER).
STEWARD_SECONDS, JITTER = 2.0, 0.25
#: The steward stops reading this long after the last ask; it reads whole at least this often.
IDLE_SECONDS, WHOLE_SECONDS = 30.0, 60.0
#: The RM's counts of applications (its ``/metrics``): while they stay the same, no job came or
#: went, and the line is read again only after LINE_SECONDS, or after a round that let a gang
#: ask (its progress changes).
APP_COUNTS, LINE_SECONDS = ("appsSubmitted", "appsCompleted", "appsPending", "appsRunning"), 30.0
#: A verdict read longer ago than this is not taken: the gang decides alone.
FRESH_SECONDS = 10.0
#: How long a waiting AM waits for the steward's answer, and how long it leaves a steward that
#: did not answer before asking it again.
ASK_TIMEOUT, RETRY_SECONDS = 2.0, 30.0


@dataclass(frozen=True)
class Snapshot:
    """One round of the steward: every queued gang's verdict, from one reading of the room."""

    read_at: float
    verdicts: Mapping[str, Verdict]
    #: Each queue's room (read whole), for a gang that asks to be spread; None: metrics only.
    rooms: Optional[Mapping[str, Room]] = None
    gangs: Tuple[Gang, ...] = ()


class Steward:
    """The steward's side (in every AM; active only while asked)."""

    def __init__(self, rm: ResourceManager, app_id: str, capacity: Capacity,
                 clock: Callable[[], float] = time.time, rng: Optional[random.Random] = None):
        self.rm, self.app_id, self.capacity = rm, app_id, capacity
        self.clock, self.rng = clock, rng or random.Random()
        self.snapshot: Optional[Snapshot] = None
        self.asked_at = float("-inf")
        #: Gangs the last whole read decided (a new one is read whole), when, and who can never fit.
        self.seen: frozenset = frozenset()
        self.whole_at = float("-inf")
        self.never: Dict[str, Verdict] = {}
        #: This tool's applications as last read, when, the RM's counts then, and whether the
        #: last round let some gang ask (read the line again).
        self.listed: Optional[List[Dict[str, Any]]] = None
        self.listed_at = float("-inf")
        self.counts: Tuple[Any, ...] = ()
        self.admitted = False
        self.lock = threading.Lock()
        self.thread: Optional[threading.Thread] = None

    def ask(self, app: str, spread: bool = False) -> Optional[Verdict]:
        """``app``'s verdict from the latest round (None: not read yet, or ``app`` not in it);
        starts the rounds if they were not running."""
        self.asked_at = self.clock()
        self._run()
        snap = self.snapshot
        verdict = snap.verdicts.get(app) if snap is not None else None
        if verdict is None or snap is None:
            return None
        if spread and verdict.fits and snap.rooms is not None:  # decided packed: spread it
            gang = next(g for g in snap.gangs if g.job == app)
            verdict = admit(gang, snap.rooms[gang.queue], now=snap.read_at, spread=True)
        return replace(verdict, told_by=self.app_id)

    def answer(self, query: Mapping[str, str]) -> Dict[str, Any]:
        """The HTTP answer to another AM's ask (``PATH_LINE``): see ``../protocol.py``."""
        app = query.get("app") or ""
        verdict = self.ask(app, spread=query.get("spread") == "1") if app else None
        snap = self.snapshot
        return {"steward": self.app_id, "read_at": snap.read_at if snap else None,
                "verdict": to_wire(verdict) if verdict is not None else None}

    def _run(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._rounds, name="steward", daemon=True)
                self.thread.start()

    def _rounds(self) -> None:
        log.info("stewarding the line: deciding for every waiting gang while they ask")
        while self.clock() - self.asked_at < IDLE_SECONDS:
            try:
                self.snapshot = self.read()
            except Exception as exc:  # the RM unreachable, refused: the gangs decide alone
                log.debug("the steward's round: %s", exc)
                self.snapshot = None
            time.sleep(STEWARD_SECONDS * self.rng.uniform(1 - JITTER, 1 + JITTER))
        log.info("no gang asked for %.0f s: stewarding stops", IDLE_SECONDS)
        self.snapshot = None

    def read(self) -> Snapshot:
        """One round: the cluster's metrics, the line where a job came or went (or a while
        passed), then the room as little as the decision needs."""
        cap, now = self.capacity, self.clock()
        metrics = self.rm.metrics()
        counts = tuple(metrics.get(k) for k in APP_COUNTS)
        if self.listed is None or counts != self.counts or self.admitted or now - self.listed_at > LINE_SECONDS:
            self.listed = self.rm.apps(tags=[TAG], states=["ACCEPTED", "RUNNING"], slim=True)
            self.listed_at, self.counts = now, counts
        gangs = waiting_gangs(self.listed, "", cap.min_memory_mb)
        queued = [g for g in gangs if not g.asked]
        self.admitted = False
        if not queued:
            return Snapshot(now, {}, None, gangs)
        free = None
        if not (cap.preemption or any(g.holding for g in queued) or now - self.whole_at > WHOLE_SECONDS
                or not {g.job for g in queued} <= self.seen):
            free = cap.free_in_all(metrics)
        if free is not None and not any(total(g.needs).fits_in(free) for g in queued):
            place_of = {g.job: i for i, g in enumerate(line(gangs))}
            verdicts = {g.job: self.never.get(g.job) or replace(short_in_all(g.needs, free, g.queue) or Verdict(False),
                                                                ahead=place_of[g.job]) for g in queued}
            return Snapshot(now, verdicts, None, gangs)
        listed = self.rm.nodes(running_only=True)
        scheduler = self.rm.scheduler()
        nodes, totals = node_room(listed), node_totals(listed)
        rooms = {queue: room_in(nodes, totals, scheduler, queue, cap.preemption, gangs)
                 for queue in {g.queue for g in queued}}
        verdicts = decide_line(rooms, now=now)
        self.seen, self.whole_at = frozenset(verdicts), now
        self.admitted = any(v.fits for v in verdicts.values())
        self.never = {job: v for job, v in verdicts.items() if v.never}
        return Snapshot(now, verdicts, rooms, gangs)


def to_wire(v: Verdict) -> Dict[str, Any]:
    return {"fits": v.fits, "why": v.why, "placement": list(v.placement), "never": v.never, "ahead": v.ahead,
            "told_by": v.told_by}


def from_wire(d: Mapping[str, Any]) -> Verdict:
    ahead = d.get("ahead")
    return Verdict(bool(d["fits"]), str(d.get("why") or ""), tuple(str(n) for n in d.get("placement") or ()),
                   bool(d.get("never")), int(ahead) if ahead is not None else None, str(d.get("told_by") or ""))


def candidates(apps: Sequence[Mapping[str, Any]]) -> List[Tuple[str, str, str]]:
    """Who may steward, oldest first: (application id, its AM's NodeManager, its AM's container)
    of this tool's applications whose AM is up."""
    out = []
    for a in apps:
        logs = str(a.get("amContainerLogs") or "")
        cid = next((p for p in logs.split("/") if p.startswith("container_")), "")
        if a.get("state") == "RUNNING" and a.get("amHostHttpAddress") and cid and TAG in str(a.get("applicationTags")):
            out.append((str(a["id"]), str(a["amHostHttpAddress"]), cid))
    return sorted(out, key=lambda c: _age(c[0]))


def _age(app_id: str) -> Tuple[int, int]:
    parts = app_id.split("_")
    try:
        return int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return (1 << 62, 0)


def report_url(node_http: str, container_id: str) -> Optional[str]:
    """An AM's own address, from the report it leaves in its log folder (its NodeManager serves it)."""
    import json

    from ..hadoop.nodemanager import node_log

    data = node_log(node_http, container_id, REPORT_FILE, timeout=ASK_TIMEOUT)
    try:
        url = json.loads(data).get("status_url") if data else None
    except (ValueError, AttributeError):
        return None
    return str(url) if url else None


@dataclass
class Stewardship:
    """How a waiting AM learns its verdict: from the steward (itself, or another AM over HTTP);
    None: it decides alone this poll."""

    app_id: str
    own: Steward
    #: An AM's address from (NodeManager, container) (:func:`report_url`; the bench gives its own).
    find: Callable[[str, str], Optional[str]] = report_url
    clock: Callable[[], float] = time.time
    stewards: List[Tuple[str, str, str]] = field(default_factory=list)
    urls: Dict[str, str] = field(default_factory=dict)
    failed: Dict[str, float] = field(default_factory=dict)
    #: The steward whose verdicts this gang took last (said in the log when it changes).
    heeded: str = ""
    #: One kept connection to the steward for every ask (not one new connection a poll).
    session: Any = None

    learnt_at: float = float("-inf")

    def learn(self, apps: Sequence[Mapping[str, Any]]) -> None:
        """Who may steward, from the applications the AM read whole."""
        self.stewards, self.learnt_at = candidates(apps), self.clock()

    def stale(self) -> bool:
        """Whether who may steward should be read again (none answered, learnt a while ago)."""
        return self.clock() - self.learnt_at > RETRY_SECONDS

    def told(self, capacity: Capacity, tasks: Sequence[Any], gang: Sequence[Any], spread: bool) -> Optional[Verdict]:
        """The verdict for ``tasks`` where they are the job's whole ``gang`` (what its tag says;
        growth and a sweep's trials are decided by the AM itself), once its AM read the room
        whole (who may steward, whether the gang can ever fit). None: decide alone this poll."""
        if not capacity.read_whole or sorted(map(astuple, needs_of(tasks))) != sorted(map(astuple, needs_of(gang))):
            return None
        verdict = self.verdict(spread)
        if verdict is None and self.stale():  # nobody stewards: the next read is whole (who may now)
            capacity.read_whole = False
        return verdict

    def verdict(self, spread: bool) -> Optional[Verdict]:
        now = self.clock()
        for app, node, container in self.stewards:
            if now - self.failed.get(app, float("-inf")) < RETRY_SECONDS:
                continue
            if app == self.app_id:
                return self._fresh(self.own.ask(app, spread), self.own.snapshot.read_at if self.own.snapshot else None)
            try:
                got = self._ask(app, node, container, spread)
            except Exception as exc:  # gone, an older subm, unreachable: the next oldest
                log.info("the line's steward %s does not answer (%s): asking the next", app, exc)
                self.failed[app] = now
                continue
            return self._fresh(*got)
        return None  # nobody stewards: decide alone (and read the room whole: who may now)

    def _ask(self, app: str, node: str, container: str, spread: bool) -> Tuple[Optional[Verdict], Any]:
        import requests

        url = self.urls.get(app) or self.find(node, container)
        if not url:
            raise LookupError(f"no address in {app}'s report")
        self.urls[app] = url
        if self.session is None:
            self.session = requests.Session()
        resp = self.session.get(url.rstrip("/") + PATH_LINE, params={"app": self.app_id, "spread": int(spread)},
                            timeout=ASK_TIMEOUT)
        resp.raise_for_status()
        body = resp.json()
        told = body.get("verdict")
        return (from_wire(told) if told else None), body.get("read_at")

    def _fresh(self, verdict: Optional[Verdict], read_at: Any) -> Optional[Verdict]:
        if verdict is None or read_at is None or self.clock() - float(read_at) > FRESH_SECONDS:
            return None
        if verdict.told_by != self.heeded:
            self.heeded = verdict.told_by
            log.info("the line's steward is %s: this gang takes its verdicts", verdict.told_by)
        return verdict
