"""Jinja2 templates shipped with the package (scaffolding, status page, configs), and the
``--set KEY=VALUE`` options that fill templates (job files, ``subm hadoop-conf``)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, List, Tuple

import jinja2

from .errors import SpecError


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("submarine_py", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, /, **context: Any) -> str:
    return _env().get_template(template).render(**context)


def split_set_options(pairs: Iterable[str], identifiers: bool = False) -> List[Tuple[str, str]]:
    """``--set KEY=VALUE`` options as ``(key, raw value)`` pairs, keys stripped.

    ``identifiers``: keys must be Python identifiers (template variables). Every
    malformed option is named in one :class:`SpecError` (exit 2).
    """
    out: List[Tuple[str, str]] = []
    problems = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if identifiers and (not sep or not key.isidentifier()):
            problems.append(("--set", f"expected key=value with an identifier as key, got {pair!r}"))
        elif not sep or not key:
            problems.append(("--set", f"expected KEY=VALUE, got {pair!r}"))
        else:
            out.append((key, raw))
    if problems:
        raise SpecError(problems)
    return out
