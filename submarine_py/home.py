"""Where subm keeps its own state on this machine: ``$SUBM_HOME``, default ``~/.submarine``.

Every part reads it here: the local backend's jobs (``local/``), the job history
(``history/``), the YARN backend's skein drivers (``skein/``) and its memo of archive
checksums (``archive-sums.json``).
"""
from __future__ import annotations

import os

HOME_ENV = "SUBM_HOME"
DEFAULT_HOME = "~/.submarine"


def subm_home() -> str:
    """The absolute path of ``$SUBM_HOME`` (default ``~/.submarine``); not created here."""
    return os.path.abspath(os.path.expanduser(os.environ.get(HOME_ENV, DEFAULT_HOME)))
