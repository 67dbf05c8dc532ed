"""Gang admission: whether a job's whole gang may be asked for now (pure; the AM's gate is
``am/allocation.py``'s, the backends weigh the cluster's room with it, the client the submission).

YARN has no gang scheduling: a job that asks for its N containers and holds whatever arrives
can hold part of a gang while another job holds the rest, both idle until a timeout (TonY's
deadlock). So a job's gang goes through a gate:

* **QUEUED**: no task container held (the AM only). The backend says whether the whole gang
  fits now (:meth:`Containers.admit`: on YARN :func:`admit` over the RM's free resources per
  node and in the queue, older waiting jobs first; locally a machine-wide GPU ledger).
  Waiting is no failure; ``timeouts.queue_seconds`` (if set) bounds it.
* **ASKED**: the gang's containers are asked for. Admission is a forecast (other applications
  take resources too): if the cluster has not granted all of them within ``timeouts.hold_seconds``,
  every container goes back and the job waits again, with a backoff (:class:`Gate`).
* **HELD**: every container granted; ``timeouts.gang_seconds`` bounds the time to registration.

Order between jobs (:func:`admit`): jobs waiting for a gang are taken oldest first (higher YARN
priority first). A younger job may start before an older one whose gang does not fit yet
(backfill, Kueue's BestEffortFIFO) only while that older job has waited less than
``starve_seconds``; after that nobody passes it (StrictFIFO), so a stream of small jobs cannot
starve a large gang: the room they leave as they end is kept for it.

Everything here is pure: inputs in, a verdict out, for tests to drive alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .jobfile.model import Resources

#: How long a younger job may pass an older waiting one whose gang does not fit (seconds).
STARVE_SECONDS = 60.0


#: Resources of one container (or free on a node, or left in a queue): the job file's triple.
Need = Resources


def total(needs: Sequence[Need]) -> Need:
    out = Need()
    for n in needs:
        out = out + n
    return out


@dataclass(frozen=True)
class Gang:
    """A job's gang as admission sees it: one :class:`Need` per container."""

    job: str
    queue: str
    #: When the job was submitted (epoch seconds): older jobs go first.
    submitted_at: float
    needs: Tuple[Need, ...]
    priority: int = 0
    #: Containers it already holds or was granted (an admitted gang still arriving): they are
    #: subtracted first, and such a job is never passed.
    asked: bool = False
    #: Containers the cluster still counts for a job that waits, as its gang's needs say: its AM
    #: gives them back (issue 32), or it has asked and its word has not reached the RM yet (skein
    #: passes an AM's progress on at its next heartbeat, seconds later). Either way they are its
    #: own: it needs only the rest from the room. Named in the words of those behind.
    holding: Tuple[Need, ...] = ()


@dataclass(frozen=True)
class Room:
    """What the cluster has free now, as the backend read it."""

    #: Free resources per node (name -> free), running nodes only.
    nodes: Mapping[str, Need]
    #: What the job's queue may still take (its maximum less what it uses); None: no limit known.
    queue_free: Optional[Need] = None
    #: The queue's guaranteed share, for the words only (None: unknown).
    queue_guaranteed: Optional[Need] = None
    #: Other jobs waiting for their gang (or asked and still arriving), any queue.
    others: Tuple[Gang, ...] = ()
    #: What the job's queue uses now (None: unknown).
    queue_used: Optional[Need] = None
    #: YARN's preemption monitor is on: the scheduler takes containers back from queues above
    #: their guarantee for a queue below it.
    preemption: bool = False
    #: What each running node has in all (free or not), by name; empty: unknown.
    totals: Mapping[str, Need] = field(default_factory=dict)
    #: The most the job's queue may ever hold (None: unknown).
    queue_most: Optional[Need] = None


@dataclass(frozen=True)
class Verdict:
    """Admission's answer: ``fits`` and, when not, what the job waits for, in words."""

    fits: bool
    why: str = ""
    #: Where each container would go (node names, in the order of the gang's needs), if it fits.
    placement: Tuple[str, ...] = ()
    #: The gang can never fit, even on the cluster emptied (``why`` says what it asks and what
    #: the cluster has): waiting would never end.
    never: bool = False
    #: Jobs before this one in the line (asked gangs, then older or of higher priority; 0: it
    #: is the head); None where the verdict did not weigh the line (the cluster's metrics alone).
    ahead: Optional[int] = 0
    #: The AM that decided it for the whole line (the steward, ``backends/yarn/am/steward.py``:
    #: the verdict cost the RM nothing more, so the gang asks again at the head's pace); "":
    #: decided by the gang's own AM.
    told_by: str = ""

    @property
    def nodes(self) -> int:
        return len(set(self.placement))


def place(needs: Sequence[Need], nodes: Mapping[str, Need], spread: bool = False) -> Optional[List[str]]:
    """Nodes for ``needs`` (one each, in order) or None if they do not all fit at once.

    ``pack`` (the default): the largest needs first, each onto the node with the most free GPUs
    that takes it, so a gang spans as few machines as the free GPUs allow (collectives across
    machines cost). ``spread``: each onto the node with the most free GPUs left, one task per
    node where possible."""
    free: Dict[str, Need] = dict(nodes)
    out: List[Optional[str]] = [None] * len(needs)
    order = sorted(range(len(needs)), key=lambda i: (-needs[i].gpus, -needs[i].memory_mb, -needs[i].vcores))
    used: Dict[str, int] = {}
    for i in order:
        fitting = [n for n, room in free.items() if needs[i].fits_in(room)]
        if not fitting:
            return None
        if spread:
            best = min(fitting, key=lambda n: (used.get(n, 0), -free[n].gpus, -free[n].memory_mb, n))
        else:  # pack: keep filling a node already chosen, else the roomiest
            best = max(fitting, key=lambda n: (used.get(n, 0) > 0, free[n].gpus, free[n].memory_mb, n))
        free[best] = free[best] - needs[i]
        used[best] = used.get(best, 0) + 1
        out[i] = best
    return [n for n in out if n is not None]


def fewest_nodes(needs: Sequence[Need], nodes: Mapping[str, Need]) -> Optional[int]:
    """The fewest nodes ``needs`` can span on ``nodes`` (None: they do not fit)."""
    placed = place(needs, nodes)
    return len(set(placed)) if placed is not None else None


def line_key(g: Gang) -> Tuple[bool, int, float, str]:
    """A waiting gang's place in the line: asked gangs first (their containers are arriving),
    then higher YARN priority, then older, then by id (two jobs of the same millisecond)."""
    return (not g.asked, -g.priority, g.submitted_at, g.job)


def line(gangs: Iterable[Gang]) -> Tuple[Gang, ...]:
    """The waiting gangs in the order admission takes them (:func:`_admit`): the one line, which
    ``subm status`` and ``subm queue`` show (``queue_view.py``)."""
    return tuple(sorted(gangs, key=line_key))


def admit(me: Gang, room: Room, *, now: float, starve_seconds: float = STARVE_SECONDS,
          spread: bool = False) -> Verdict:
    """Whether ``me``'s whole gang may be asked for now (:func:`_admit`); when not, the words
    also name what jobs that wait themselves still hold (a GPU a waiting job holds is no one's
    use: its AM gives it back within seconds, and if it does not, here is whom to ask)."""
    return _held_words(_admit(me, room, now=now, starve_seconds=starve_seconds, spread=spread), me, room)


def _held_words(verdict: Verdict, me: Gang, room: Room) -> Verdict:
    held = [g for g in room.others if g.job != me.job and g.holding and not g.asked]
    if verdict.fits or verdict.never or not held:
        return verdict
    words = "; ".join(f"{_words(total(g.holding))} held by {g.job}, which waits itself" for g in held)
    return replace(verdict, why=f"{verdict.why}; {words}")


def _admit(me: Gang, room: Room, *, now: float, starve_seconds: float = STARVE_SECONDS,
           spread: bool = False) -> Verdict:
    """Whether ``me``'s whole gang may be asked for now.

    The jobs waiting (``room.others`` and ``me``) are taken in :func:`line`'s order: asked gangs
    first (their containers are arriving), then by priority and age. Each one that fits takes
    its room (the room left is what the next one sees); one that does not fit is passed by
    younger jobs only while it has waited less than ``starve_seconds``.
    """
    never = _never(me, room)
    if never:
        return Verdict(False, never, never=True)
    walk = _Walk(room, me.queue, now, starve_seconds)
    mine = line_key(me)[1:]
    ahead = line(g for g in room.others if g.job != me.job)
    for g in ahead:
        if not g.asked and line_key(g)[1:] > mine:
            break  # younger (or lower priority) than me: after me
        walk.take(g)
    older = sum(1 for g in ahead if line_key(g) < line_key(me))
    return walk.verdict(me, older, spread)


class _Walk:
    """The room as the line uses it up, gang after gang in :func:`line`'s order, as a gang of
    ``queue`` sees it (its queue's room is counted for gangs of its queue only): what
    :func:`_admit` weighs for one gang and :func:`decide_line` for every gang of a queue."""

    def __init__(self, room: Room, queue: str, now: float, starve_seconds: float):
        self.room, self.queue, self.now, self.starve_seconds = room, queue, now, starve_seconds
        self.free: Dict[str, Need] = dict(room.nodes)
        self.queue_free = room.queue_free
        #: Older jobs whose gangs fit (they take their room first), and those nobody passes.
        self.first: List[Gang] = []
        self.blocked_by: List[Gang] = []

    def take(self, g: Gang) -> None:
        """``g`` goes before those after it: its room is taken if it fits, else it blocks them
        once it is asked or starving."""
        rest = g.needs[len(g.holding):]  # what it holds is its own already
        placed = place(rest, self.free)
        same_queue = self.queue_free is not None and g.queue == self.queue
        if placed is not None and (not same_queue or total(rest).fits_in(self.queue_free)):
            for node, need in zip(placed, rest):
                self.free[node] = self.free[node] - need
            if same_queue:
                self.queue_free = self.queue_free - total(rest)
            self.first.append(g)
        elif g.asked or self.now - g.submitted_at >= self.starve_seconds:
            self.blocked_by.append(g)

    def verdict(self, me: Gang, older: int, spread: bool) -> Verdict:
        """``me``'s verdict after the gangs before it took their room (``older`` of them)."""
        room, free, queue_free, now = self.room, self.free, self.queue_free, self.now
        want = total(me.needs)
        if (room.preemption and room.queue_used is not None and room.queue_guaranteed is not None
                and (room.queue_used + want).fits_in(room.queue_guaranteed)):
            # Within its queue's guarantee: YARN preempts other queues' containers to make the room,
            # which it does only for containers asked for (a job that waited without asking would
            # wait for as long as the other queue's jobs run).
            return Verdict(True, why=f"within queue {me.queue}'s guarantee: YARN preempts for it")
        if self.blocked_by:
            g, n = self.blocked_by[0], len(self.blocked_by)
            return Verdict(False, _short(want, free, room, queue_free, me.queue)
                           + f"; {n} older job{'s' if n > 1 else ''} waiting first "
                             f"({g.job}, {_words(total(g.needs))}, waiting {now - g.submitted_at:.0f} s)", ahead=older)
        first = self.first
        after = (f"; {len(first)} older job{'s' if len(first) > 1 else ''} ({', '.join(g.job for g in first)}) "
                 f"first" if first else "")
        if queue_free is not None and not want.fits_in(queue_free):
            return Verdict(False, _short(want, free, room, queue_free, me.queue) + after, ahead=older)
        placed = place(me.needs, free, spread=spread)
        if placed is None:
            return Verdict(False, _short(want, free, room, queue_free, me.queue, per_node=True) + after, ahead=older)
        return Verdict(True, placement=tuple(placed))


def decide_line(rooms: Mapping[str, Room], *, now: float, starve_seconds: float = STARVE_SECONDS) -> Dict[str, Verdict]:
    """Every waiting gang's verdict at once, as :func:`admit` gives each (packed): the steward's
    decision for the whole line (``backends/yarn/am/steward.py``). ``rooms``: per queue, its
    room, whose ``others`` are every waiting gang (asked ones too), the same in each. One walk
    down the line per queue instead of one per gang: the room the gangs before a gang leave is
    what its own :func:`admit` computes, so the verdicts are the same."""
    out: Dict[str, Verdict] = {}
    for queue, room in rooms.items():
        walk = _Walk(room, queue, now, starve_seconds)
        for older, g in enumerate(line(room.others)):
            if not g.asked and g.queue == queue:
                never = _never(g, room)
                out[g.job] = _held_words(Verdict(False, never, never=True) if never
                                         else walk.verdict(g, older, spread=False), g, room)
            walk.take(g)
    return out


def short_in_all(needs: Sequence[Need], free: Need, queue: str = "") -> Optional[Verdict]:
    """A verdict from the cluster's totals alone (the RM's ``/metrics``: one small answer
    whatever the cluster's size): no, when the whole cluster has less free than the gang asks,
    which no placement and no order between jobs can change; None: the room must be read.
    (Within a queue's guarantee YARN may preempt for a gang: the caller does not ask this then.)"""
    want = total(needs)
    if want.fits_in(free):
        return None
    return Verdict(False, _short(want, {"": free}, Room(nodes={}), None, queue) + " (the cluster's metrics)",
                   ahead=None)


def _never(me: Gang, room: Room) -> str:
    """Why ``me`` can never fit (on every node emptied, in its queue's maximum), or ""."""
    want = total(me.needs)
    if room.queue_most is not None and not want.fits_in(room.queue_most):
        return (f"the gang asks {_words(want)} in {len(me.needs)} container(s), more than queue {me.queue} "
                f"may ever hold ({_words(room.queue_most)})")
    if room.totals and place(me.needs, room.totals) is None:
        largest = max(room.totals.values(), key=lambda n: (n.gpus, n.memory_mb, n.vcores))
        return (f"the gang asks {_words(want)} in {len(me.needs)} container(s), which cannot all fit at once on "
                f"this cluster's {len(room.totals)} node(s) even if they were empty (the largest has "
                f"{_words(largest)})")
    return ""


def _words(n: Need) -> str:
    parts = [f"{n.gpus} GPU{'s' if n.gpus != 1 else ''}"] if n.gpus else []
    return ", ".join(parts + [f"{n.memory_mb} MiB", f"{n.vcores} vcores"])


def _short(want: Need, free: Mapping[str, Need], room: Room, queue_free: Optional[Need], queue: str,
           per_node: bool = False) -> str:
    """What is short, GPUs first: "waiting for 4 GPUs: 2 free in queue teamb (3 guaranteed) and
    2 in the cluster, at most 1 on one node" (``free``: the nodes' room left after older jobs)."""
    cluster = total(list(free.values()))
    largest = max(free.values(), key=lambda n: (n.gpus, n.memory_mb), default=Need())
    for attr, unit in (("gpus", "GPUs"), ("memory_mb", "MiB"), ("vcores", "vcores")):
        asked = getattr(want, attr)
        if not asked:
            continue
        in_queue = getattr(queue_free, attr) if queue_free is not None else None
        have = min(getattr(cluster, attr), in_queue if in_queue is not None else getattr(cluster, attr))
        if asked <= have and not (per_node and attr == "gpus"):
            continue
        words = f"waiting for {asked} {unit}: {max(have, 0)} free"
        if in_queue is not None:
            guaranteed = getattr(room.queue_guaranteed, attr) if room.queue_guaranteed is not None else None
            words += f" in queue {queue}" + (f" ({guaranteed} guaranteed)" if guaranteed is not None else "")
        words += f" and {getattr(cluster, attr)} in the cluster" if in_queue is not None else " in the cluster"
        if per_node:
            words += f", at most {getattr(largest, attr)} on one node"
        return words
    return f"waiting for room for {_words(want)} across {len(free)} node(s) (no placement fits now)"
