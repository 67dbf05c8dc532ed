"""``pip install 'submarine-py[yarn]'`` works on a fresh Linux machine without a C compiler or
system headers: the ``yarn`` extra names only packages with Linux wheels. What a Kerberized
cluster needs, requests-gssapi (whose gssapi has no Linux wheel and builds against MIT
Kerberos), is an extra of its own, ``kerberos``, installed beside it."""
from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

pytestmark = [pytest.mark.unit, pytest.mark.skipif(tomllib is None, reason="tomllib: Python 3.11+")]

#: Packages with no wheel for Linux on PyPI: pip builds them, with a C compiler and MIT
#: Kerberos's headers (Debian's libkrb5-dev).
BUILT_FROM_SOURCE = ("requests-gssapi", "gssapi", "pykerberos", "kerberos", "requests-kerberos")


def extras() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def names(requirements) -> list:
    """The distributions' names of requirements, normalized as PyPI does (``Requests_GSSAPI``
    is ``requests-gssapi``)."""
    return [re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9._-]+)", req).group(1)).lower() for req in requirements]


def test_the_yarn_extra_names_no_package_that_needs_a_compiler():
    yarn = names(extras()["yarn"])
    assert "skein" in yarn, yarn
    assert not set(yarn) & set(BUILT_FROM_SOURCE), yarn


def test_the_kerberos_extra_brings_requests_gssapi():
    assert "requests-gssapi" in names(extras()["kerberos"])
