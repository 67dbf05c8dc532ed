"""Parsing of human-readable quantities: memory sizes, ``host:port`` addresses."""
from __future__ import annotations

import re
from typing import Tuple, Union

_UNITS = {
    "": 1, "m": 1, "mb": 1, "mib": 1, "mi": 1,
    "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024, "ki": 1 / 1024,
    "g": 1024, "gb": 1024, "gib": 1024, "gi": 1024,
    "t": 1024 ** 2, "tb": 1024 ** 2, "tib": 1024 ** 2, "ti": 1024 ** 2,
}
#: Larger than any machine (1 PiB): a typo, or YAML's ``.inf``.
MAX_MIB = 1024 ** 3
_MEMORY = re.compile(r"^\s*([-+]?\d*\.?\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: Union[str, int, float]) -> int:
    """Return a memory size in MiB.

    Accepts plain integers (MiB) and strings like ``"512 MiB"``, ``"2 GiB"``,
    ``"2G"``. Decimal units (MB, GB) are read as binary ones, as YARN does.
    Raises ``ValueError`` with a message meant for the user.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size like '2 GiB' or a number of MiB, got {value!r}")
    if isinstance(value, (int, float)):
        mib = float(value)
    elif isinstance(value, str):
        m = _MEMORY.match(value)
        unit = m.group(2).lower() if m else None
        if not m or unit not in _UNITS:
            raise ValueError(f"expected a size like '512 MiB' or '2 GiB', got {value!r} (a plain number is MiB)")
        mib = float(m.group(1)) * _UNITS[unit]
    else:
        raise ValueError(f"expected a size like '2 GiB' or a number of MiB, got {value!r}")
    if mib != mib or mib < 1:
        raise ValueError(f"must be at least 1 MiB, got {value!r}")
    if mib > MAX_MIB:
        plain = isinstance(value, (int, float)) or not value.strip().rstrip("0123456789.").strip()
        hint = "; a plain number is MiB, not bytes: write units, e.g. '2 GiB'" if plain else ""
        raise ValueError(f"must be at most 1 PiB, got {value!r}{hint}")
    return int(round(mib))


def format_memory(mib: int) -> str:
    """Format MiB as the shortest exact string: ``2048 -> '2 GiB'``."""
    if mib % 1024 == 0:
        return f"{mib // 1024} GiB"
    return f"{mib} MiB"


def split_address(address: str) -> Tuple[str, str]:
    """``"host:port"`` as ``(host, port)``; the last colon splits, so IPv6 hosts keep theirs."""
    host, _, port = address.rpartition(":")
    return host, port
