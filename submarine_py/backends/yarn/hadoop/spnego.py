"""SPNEGO for a secure cluster's web endpoints, only where they ask for it.

Every REST call (``rest.py``) carries the auth of :func:`http_auth`: it does nothing until an
endpoint answers ``401`` with ``WWW-Authenticate: Negotiate``, then answers with the Kerberos
ticket of this process's login (``kerberos.py``; ``requests-gssapi`` does the exchange), so plain
and secure clusters work alike without the user saying which. A 401 that stays one is a
:class:`CredentialsError` saying why (no ticket, an expired one, a host the realm does not know).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

import requests

from ....errors import CredentialsError


#: Whether calls answer a Negotiate challenge with SPNEGO. Off in the AM's container, which
#: holds YARN's tokens but no Kerberos ticket (see :func:`without_kerberos`).
_spnego = True


def without_kerberos() -> None:
    """Make this process's calls plain: a 401 stays a 401 (the AM's reads then fail, and what
    rests on them degrades: admission admits at once, diagnostics go without the node's word)."""
    global _spnego
    _spnego = False


def _asks_negotiate(resp: requests.Response) -> bool:
    return resp.status_code == 401 and "negotiate" in resp.headers.get("WWW-Authenticate", "").lower()


def _refused(resp: requests.Response) -> CredentialsError:
    """Why a secure cluster's endpoint still answered 401 after SPNEGO, as one line."""
    from . import kerberos

    host = requests.utils.urlparse(resp.url).hostname
    principal = kerberos.ticket_principal()  # raises for no ticket or an expired one
    return CredentialsError(f"{host} refused the Kerberos ticket of {principal} (SPNEGO, 401): is HTTP/{host} "
                            "a principal of the cluster's realm, and the host name the one in its keytab? "
                            "`kvno HTTP/" + f"{host}` tells")


class _NoGssapi(requests.auth.AuthBase):
    """Where requests-gssapi is not installed: a Negotiate challenge is answered by saying so."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.register_hook("response", self._check)
        return request

    @staticmethod
    def _check(resp: requests.Response, **_: Any) -> requests.Response:
        if _asks_negotiate(resp):
            from .kerberos import INSTALL_GSSAPI

            raise CredentialsError(f"{requests.utils.urlparse(resp.url).hostname} asks for Kerberos (SPNEGO) and "
                                   f"requests-gssapi is not installed: {INSTALL_GSSAPI}")
        return resp


def http_auth() -> Optional[requests.auth.AuthBase]:
    """The auth every call carries: SPNEGO, used only when the endpoint answers 401 asking for
    it (None in the AM, see :func:`without_kerberos`)."""
    if not _spnego:
        return None
    try:
        from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth
    except ImportError:
        return _NoGssapi()
    # requests-gssapi logs a failed GSSAPI step with its traceback; the failure is ours to say.
    logging.getLogger("requests_gssapi").setLevel(logging.CRITICAL)

    class Negotiate(HTTPSPNEGOAuth):
        def handle_response(self, response: requests.Response, **kwargs: Any) -> requests.Response:
            if "num_401s" in kwargs or not _asks_negotiate(response):
                return super().handle_response(response, **kwargs)
            from . import kerberos

            kerberos.refresh()  # a ticket near its end, renewed or taken again from the keytab
            answer = super().handle_response(response, **kwargs)
            if _asks_negotiate(answer):
                raise _refused(answer)
            return answer

    # Hadoop's endpoints do not always send a token back: mutual authentication is optional.
    return Negotiate(mutual_authentication=OPTIONAL)
