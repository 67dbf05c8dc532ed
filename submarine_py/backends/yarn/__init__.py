"""The YARN backend: the job as a skein application on a Hadoop YARN 3.1+ cluster.

Three parts, as skein keeps its driver's client apart from its AM's: ``client/`` runs where the
user submits (the request, the travelling environment, submission through skein's driver,
status, logs), ``am/`` runs in the application's master container (skein's application client
as the AM's containers), and below both ``hadoop/`` knows where the cluster is and how to call
it (its configuration, the ResourceManagers, NameNodes and NodeManagers, Kerberos and SPNEGO).
What the client and the AM share of an application: ``protocol.py`` (its words), ``capacity.py``
(room for a gang, as the RM tells it) and ``attempts.py`` (its YARN attempts and their reports).
"""
from __future__ import annotations

from typing import Any

__all__ = ["YarnBackend"]


def __getattr__(name: str) -> Any:
    """``YarnBackend``, imported when asked for: the AM's process (``am/main.py``) imports this
    package too, and needs nothing of the submitting side."""
    if name == "YarnBackend":
        from .client.backend import YarnBackend

        return YarnBackend
    raise AttributeError(name)
