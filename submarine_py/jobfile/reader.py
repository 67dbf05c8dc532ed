"""Reading one field of a job file's dict: a mapping of known fields, a whole number, seconds,
a string, a choice. Each reader records a problem with the field's path and returns a default,
so that one pass finds every problem. The sections (``validate.Builder``, ``access.py``,
``sweep.py``) are written with these."""
from __future__ import annotations

import difflib
from typing import Any, Dict, Optional, Tuple

from ..errors import ProblemCollector
from .fields import join_path, show


class FieldReader(ProblemCollector):
    """Collects problems by path while reading fields; ``base_dir``: the job file's folder,
    against which its relative paths are read."""

    def __init__(self, base_dir: str) -> None:
        super().__init__()
        self.base_dir = base_dir

    def mapping(self, value: Any, path: str, known: Tuple[str, ...]) -> Dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping, got {show(value)}")
            return {}
        for key in value:
            if not isinstance(key, str):
                self.fail(join_path(path, str(key)), f"field names must be strings, got {show(key)}")
            elif key not in known:
                hint = difflib.get_close_matches(key, known, n=1)
                more = f"; did you mean '{hint[0]}'?" if hint else f"; known fields: {', '.join(known)}"
                self.fail(join_path(path, key), f"unknown field{more}")
        return value

    def integer(self, value: Any, path: str, minimum: int, default: int, maximum: Optional[int] = None) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(path, f"expected a whole number >= {minimum}, got {show(value)}")
            return default
        if maximum is not None and value > maximum:
            self.fail(path, f"expected at most {maximum}, got {show(value)}")
            return default
        return value

    def seconds(self, value: Any, path: str, default: float, maximum: float, minimum: float = 0) -> float:
        """A duration in seconds: a number (whole or not) from ``minimum`` to ``maximum``."""
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not minimum <= value <= maximum:
            self.fail(path, f"expected a number of seconds from {minimum:g} to {maximum:g}, got {show(value)}")
            return default
        return float(value)

    def string(self, value: Any, path: str, default: Optional[str] = None, required: bool = False) -> Optional[str]:
        if value is None:
            if required:
                self.fail(path, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(path, f"expected a string, got {show(value)}")
            return default
        value = str(value)
        if required and not value.strip():
            self.fail(path, "must not be empty")
        if "\x00" in value:  # no process argument, path or environment value can hold one
            self.fail(path, "must not contain a NUL character")
            return default
        return value

    def choice(self, value: Any, path: str, choices: Tuple[str, ...], default: str) -> str:
        if value is None:
            return default
        if value not in choices:
            self.fail(path, f"expected one of {', '.join(choices)}, got {show(value)}")
            return default
        return value
