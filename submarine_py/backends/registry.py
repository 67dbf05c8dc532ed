"""The backends subm knows, one entry each (the way torchx lists its schedulers).

The CLI reads it for ``--backend``'s choices, its help and its default; ``status``,
``kill`` and ``logs`` for which backend an application id belongs to; ``subm history``
for which backends to collect finished jobs from. Entries name their class by import
path, so reading the registry imports no backend (nor skein).

Adding a backend: its own package under ``backends/`` (a :class:`~.base.Backend`
subclass with its rules) and one entry in :data:`BACKENDS`.
"""
from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Pattern, Tuple

from ..errors import SpecError

if TYPE_CHECKING:
    from .base import Backend

#: What an entry asks of the environment (``os.environ``, or a test's mapping).
EnvTest = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class BackendEntry:
    """One backend: its name, where its class lives, its ids, and when it is the default."""

    name: str
    #: ``module:Class``, imported when the backend is first used.
    target: str
    #: One line: where it runs jobs (``--backend``'s help).
    summary: str
    #: The application ids it gives its jobs (one safe path component each).
    app_id: Pattern[str]
    #: How messages name its ids ("YARN ids look like ..."), with an example id.
    title: str
    app_id_example: str
    #: When it is the default without ``--backend``; None for the fallback (one entry),
    #: used when no other entry's test holds. Entries are tried in :data:`BACKENDS` order.
    default_when: Optional[EnvTest]
    #: Why it was chosen by default (``subm run`` prints ``Backend: NAME (WHY)``).
    default_because: str
    #: Whether ``subm history`` collects its finished jobs.
    collect_when: EnvTest


def _hadoop_conf_dir(env: Mapping[str, str]) -> bool:
    return bool(env.get("HADOOP_CONF_DIR"))


def _yarn_named(env: Mapping[str, str]) -> bool:
    return bool(env.get("HADOOP_CONF_DIR") or env.get("SUBM_YARN_RM_URL"))


def _always(env: Mapping[str, str]) -> bool:
    return True


#: Every backend, in the order a default is looked for.
BACKENDS: Tuple[BackendEntry, ...] = (
    BackendEntry(
        name="yarn", target="submarine_py.backends.yarn:YarnBackend",
        summary="a skein application on the YARN cluster HADOOP_CONF_DIR names",
        app_id=re.compile(r"^application_[0-9]{1,19}_[0-9]{1,10}$"),
        title="YARN", app_id_example="application_1700000000000_0001",
        default_when=_hadoop_conf_dir, default_because="HADOOP_CONF_DIR is set",
        collect_when=_yarn_named),
    BackendEntry(
        name="local", target="submarine_py.backends.local:LocalBackend",
        summary="the AM and every task on this machine",
        app_id=re.compile(r"^local_[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"),
        title="local", app_id_example="local_20260101-120000_ab12",
        default_when=None, default_because="no HADOOP_CONF_DIR",
        collect_when=_always),
)


def names() -> List[str]:
    """The backends' names, sorted (``--backend``'s choices)."""
    return sorted(e.name for e in BACKENDS)


def entry(name: str) -> BackendEntry:
    for e in BACKENDS:
        if e.name == name:
            return e
    raise SpecError([("--backend", f"expected one of {', '.join(names())}, got {name!r}")])


def get_backend(name: str, **options: Any) -> "Backend":
    """A new instance of the backend ``name`` (bad input, exit 2, for a name not registered)."""
    module, _, cls = entry(name).target.partition(":")
    return getattr(importlib.import_module(module), cls)(**options)


def _fallback() -> BackendEntry:
    return next(e for e in BACKENDS if e.default_when is None)


def default_entry(env: Optional[Mapping[str, str]] = None) -> BackendEntry:
    """The backend used without ``--backend``: the first whose test holds, else the fallback."""
    env = os.environ if env is None else env
    return next((e for e in BACKENDS if e.default_when is not None and e.default_when(env)), _fallback())


def choose_backend(name: Optional[str]) -> str:
    """The backend to use: the one named, else YARN where HADOOP_CONF_DIR is set, else local."""
    return name or default_entry().name


def why_chosen(name: str, named: bool) -> str:
    """What ``subm run`` adds to ``Backend: NAME``: nothing when named, else why it is the default."""
    return "" if named else f" ({entry(name).default_because})"


def default_help() -> str:
    """``yarn where HADOOP_CONF_DIR is set, else local``: how the default is chosen, for help texts."""
    chosen = [f"{e.name} where {e.default_because}" for e in BACKENDS if e.default_when is not None]
    return ", ".join(chosen + [f"else {_fallback().name}"])


def summaries() -> str:
    """``local (the AM and every task on this machine), yarn (...)``, for help texts."""
    return ", ".join(f"{e.name} ({e.summary})" for e in sorted(BACKENDS, key=lambda e: e.name))


def backend_for_app(app_id: str) -> str:
    """The backend an application id belongs to; a malformed id is bad input (exit 2),
    before any backend is asked (YARN's RM would answer 400, the local one read a path)."""
    for e in BACKENDS:
        if e.app_id.match(app_id) and ".." not in app_id:
            return e.name
    first, *rest = BACKENDS
    forms = [f"{first.title} ids look like {first.app_id_example}"] + \
            [f"{e.title} ones like {e.app_id_example}" for e in rest]
    raise SpecError([("APP_ID", f"{app_id!r} is not a job id: {', '.join(forms)}")])


def collected(env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The backends ``subm history`` collects finished jobs from, by name."""
    env = os.environ if env is None else env
    return [e.name for e in sorted(BACKENDS, key=lambda e: e.name) if e.collect_when(env)]
