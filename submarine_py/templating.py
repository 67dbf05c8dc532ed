"""Jinja2 templates shipped with the package (scaffolding, status page, configs)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2


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
