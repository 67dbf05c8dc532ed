"""Long work on the submitting machine (packing, uploading) shows how far it is: bytes done of
the total, the rate and the time left.

How it shows is decided once per command (:func:`configure`, by the CLI), else by stderr:

* ``LIVE``: stderr is a terminal: tqdm's live line (a well-kept library: rates and times left
  smoothed, the width of the terminal kept), or :data:`LINES`'s lines where tqdm is missing;
* ``LINES``: stderr is a file or a pipe (CI, a log): ``subm: uploading: 1.2 of 6.5 GB (18 %),
  190 MB/s, 28 s left`` every :data:`LINE_EVERY` seconds;
* ``OFF``: ``--quiet`` and ``--output json``: nothing shown.

Whatever shows, each meter's figures are kept (:func:`measured`) for ``--output json``'s
``timings``.
"""
from __future__ import annotations

import enum
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

#: Seconds between two lines where output is not a terminal.
LINE_EVERY = 5.0


class Display(enum.Enum):
    LIVE = "live"
    LINES = "lines"
    OFF = "off"


_display: Optional[Display] = None
_measured: List["Measured"] = []
_lock = threading.Lock()


def configure(display: Optional[Display]) -> None:
    """How meters show from now on (None: by whether stderr is a terminal)."""
    global _display
    _display = display


def current() -> Display:
    if _display is not None:
        return _display
    return Display.LIVE if sys.stderr.isatty() else Display.LINES


@dataclass(frozen=True)
class Measured:
    """What one meter measured."""

    what: str
    bytes: int
    seconds: float
    #: The archives it counted (packed or uploaded).
    parts: int

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"what": self.what, "bytes": self.bytes, "seconds": round(self.seconds, 2),
                "mb_per_s": round(self.mb_per_s, 1), "parts": self.parts}


def measured() -> Tuple[Measured, ...]:
    """What this command's meters measured, in the order they ended."""
    with _lock:
        return tuple(_measured)


def size(n: float) -> str:
    """Bytes for people: 950 kB, 12.3 MB, 6.50 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GB" else f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


class Meter:
    """Counts the bytes of one piece of long work (``with Meter("uploading", total) as m:
    m(n)``), callable from several threads at once."""

    def __init__(self, what: str, total: int, parts: int = 1, display: Optional[Display] = None):
        self.what, self.total, self.parts, self.done = what, max(int(total), 0), parts, 0
        self.display = display or current()
        self._began = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._bar: Any = None
        if self.display is Display.LIVE:
            try:
                from tqdm import tqdm
            except ImportError:
                self.display = Display.LINES
            else:
                self._bar = tqdm(total=self.total, desc=f"subm: {what}", unit="B", unit_scale=True,
                                 file=sys.stderr, leave=True, dynamic_ncols=True, mininterval=0.25)

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(n)
            elif self.display is Display.LINES and time.monotonic() - self._last >= LINE_EVERY:
                self._last = time.monotonic()
                print(f"subm: {self.what}: {self.line()}", file=sys.stderr, flush=True)

    def line(self) -> str:
        """``1.2 of 6.5 GB (18 %), 190 MB/s, 28 s left``"""
        elapsed = time.monotonic() - self._began
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = f" ({100 * self.done / self.total:.0f} %)" if self.total else ""
        left = f", {(self.total - self.done) / rate:.0f} s left" if rate > 0 and self.total > self.done else ""
        return f"{size(self.done)} of {size(self.total)}{share}, {rate / 1e6:.0f} MB/s{left}"

    def close(self) -> Measured:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            got = Measured(self.what, self.done, time.monotonic() - self._began, self.parts)
        with _lock:
            _measured.append(got)
        return got
