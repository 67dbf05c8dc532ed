"""What ``subm logs`` shows of a log file, whichever backend reads its bytes.

A task's log holds every attempt it ran in that place (a local file, a YARN container), each
begun by the header line the AM sends with the task's command::

    [subm] job=<app id> role=<role> index=<index> attempt=<n> host=... container=... command: ...

``--attempt N`` keeps the lines from the header of attempt N to the next header (the attempt
counted from 1, as reports and the AM's decisions count it); ``--tail N`` keeps the last N
lines of what is selected, then (with ``--follow``) everything that comes. A backend reads
bytes in order from :attr:`LogFile.offset` on and hands them to :meth:`LogFile.feed`;
:class:`LogOutput` titles them ``==> NAME <==`` whenever the output turns to another file.
"""
from __future__ import annotations

import codecs
import re
from collections import deque
from typing import Callable, Deque, List, Optional, Set, TextIO, Tuple

from ..errors import JobNotFoundError

#: The line beginning each attempt of a task in its logs (``am/registration.py`` writes it).
ATTEMPT_HEADER = re.compile(r"^\[subm\] job=\S+ role=\S+ index=[0-9]+ attempt=([0-9]+)(?:\s|$)")
#: The first window read from a file's end for ``--tail``: grown until it holds enough lines.
TAIL_WINDOW = 1 << 16


class LogOutput:
    """Where ``subm logs`` writes: a title line before a file's text whenever the output turns
    to a file other than the last one written (as ``tail -f`` of several files does)."""

    def __init__(self, out: TextIO):
        self.out = out
        self.current: Optional[str] = None

    def write(self, title: str, text: str) -> None:
        if not text:
            return
        if title != self.current:
            self.out.write(f"==> {title} <==\n")
            self.current = title
        self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


class LogFile:
    """One log file as shown: bytes in, in order, what is selected out.

    ``attempt``: only that attempt's lines (the file is then read from its first byte, where
    the headers are); ``tail``: of the first read, only the last ``tail`` lines; later reads
    (``--follow``) show everything new.
    """

    def __init__(self, output: LogOutput, title: str, attempt: Optional[int] = None, tail: Optional[int] = None):
        self.output = output
        self.title = title
        self.attempt = attempt
        #: Bytes of the file consumed so far: where the next read begins.
        self.offset = 0
        #: The attempts whose headers were read.
        self.attempts_seen: Set[int] = set()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._section: Optional[int] = None  # the attempt of the lines being read (None before a header)
        self._partial = ""  # a line not finished yet (only kept when selecting an attempt)
        self._last: Optional[Deque[str]] = deque(maxlen=tail) if tail is not None else None
        self._last_partial = ""

    @property
    def tail_from_end(self) -> bool:
        """Whether the first read may start near the file's end: ``tail`` lines of a whole file
        (an attempt is found by reading from the first byte)."""
        return self._last is not None and self.attempt is None and self.offset == 0

    @property
    def tail_lines(self) -> int:
        return self._last.maxlen if self._last is not None and self._last.maxlen is not None else 0

    @property
    def shown_any(self) -> bool:
        """Whether the selected attempt was found (always, without ``attempt``)."""
        return self.attempt is None or self.attempt in self.attempts_seen

    def feed(self, data: bytes, offset: Optional[int] = None) -> None:
        """The file's next bytes (``offset``: where they end, when the read skipped some)."""
        self.offset = offset if offset is not None else self.offset + len(data)
        self._emit(self._select(self._decoder.decode(data)))

    def read_done(self) -> None:
        """The end of one read: the first one's last ``tail`` lines are written now."""
        if self._last is not None:
            shown = [*self._last, self._last_partial] if self._last_partial else list(self._last)
            self.output.write(self.title, "".join(shown[-self.tail_lines:] if self.tail_lines else []))
            self._last = None
            self._last_partial = ""
        self.output.flush()

    def close(self) -> None:
        """Nothing more comes: an unfinished last line is written too."""
        rest = self._decoder.decode(b"", final=True)
        if self.attempt is not None:
            rest, self._partial = self._partial + rest, ""
            if rest and self._section == self.attempt:
                self._emit(rest)
        else:
            self._emit(rest)
        self.read_done()

    def _select(self, text: str) -> str:
        if self.attempt is None:
            return text
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        kept: List[str] = []
        for line in lines:
            header = ATTEMPT_HEADER.match(line)
            if header:
                self._section = int(header.group(1))
                self.attempts_seen.add(self._section)
            if self._section == self.attempt:
                kept.append(line + "\n")
        return "".join(kept)

    def _emit(self, text: str) -> None:
        if self._last is None:
            self.output.write(self.title, text)
            return
        lines = (self._last_partial + text).split("\n")
        self._last_partial = lines.pop()
        self._last.extend(line + "\n" for line in lines)


def missing_attempt(views: List[LogFile], attempt: Optional[int], app_id: str) -> None:
    """``JobNotFoundError`` when ``attempt`` was asked for and no task log holds it."""
    if attempt is None or any(v.shown_any for v in views if v.attempt is not None):
        return
    seen = sorted(set().union(*(v.attempts_seen for v in views)))
    held = f"they hold attempt{'s' if len(seen) > 1 else ''} {', '.join(map(str, seen))}" if seen else \
        "they hold no attempt yet"
    raise JobNotFoundError(f"no attempt {attempt} in the task logs of {app_id}; {held}")


def read_tail(size: int, lines: int, read: Callable[[int, int], bytes]) -> Tuple[bytes, int]:
    """The last ``lines`` lines of a file of ``size`` bytes, read from its end with
    ``read(start, end)`` (its bytes from ``start`` to ``end``) in windows that grow until they
    hold enough lines (memory: those lines, not the file). Returns them and where they end."""
    if lines <= 0 or size <= 0:
        return b"", max(size, 0)
    window = TAIL_WINDOW
    while True:
        start = max(0, size - window)
        data = read(start, size)
        end = start + len(data)
        if start > 0:  # the window's first line is cut: complete lines only
            cut = data.find(b"\n")
            data = data[cut + 1:] if cut >= 0 else b""
        count = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        if count >= lines or start == 0:
            keep = data.split(b"\n")
            if data.endswith(b"\n"):
                keep.pop()
                return b"\n".join(keep[-lines:]) + b"\n", end
            return b"\n".join(keep[-lines:]), end
        window *= 4
