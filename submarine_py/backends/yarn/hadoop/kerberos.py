"""Who submits to a secure (Kerberized) cluster, and the checks that they can, before anything
is submitted.

A cluster is secure when its ``core-site.xml`` says ``hadoop.security.authentication:
kerberos``; then the user logs in one of two ways:

- the ticket cache of ``kinit`` (``KRB5CCNAME``, as ``yarn jar`` uses it), or
- a principal and keytab: ``--principal/--keytab``, else ``SUBM_PRINCIPAL/SUBM_KEYTAB``, else
  the job file's ``kerberos`` section. subm logs in with them into a ticket cache of its own
  (``$SUBM_HOME/krb5/``, via ``kinit -kt``) for its REST calls and logs in again when that
  ticket nears its end; skein's driver logs in from the keytab itself.

No ticket, an expired ticket or a keytab that does not log in is a :class:`CredentialsError`
(exit 2) naming which and what to run. A plain cluster needs none of this.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Optional, Tuple

from ....errors import CredentialsError, SpecError
from ....home import subm_home
from .conf import hadoop_conf

#: What to install where requests-gssapi (and python-gssapi under it) is missing, said the same way
#: by every message that needs it: the extra, and what its gssapi builds with where no wheel fits.
INSTALL_GSSAPI = ("pip install 'submarine-py[kerberos]' (its gssapi builds where no wheel fits: "
                  "Debian/Ubuntu libkrb5-dev and a C compiler, RHEL krb5-devel)")

#: A ticket with less than this left is renewed (``kinit -R``) or taken again from the keytab.
REFRESH_BEFORE_SECONDS = 120.0


@dataclass(frozen=True)
class Login:
    """How this process proves who it is: a keytab's principal, or the ticket cache's."""

    principal: Optional[str] = None
    keytab: Optional[str] = None
    #: Where it came from, for messages: ``--keytab``, ``SUBM_KEYTAB``, ``kerberos.keytab``.
    source: str = ""
    #: The ticket cache (``KRB5CCNAME``) a ticket-cache login uses.
    cache: str = ""

    @property
    def key(self) -> str:
        """What a skein driver started for this login is kept under: never shared with another."""
        if self.keytab:
            return f"keytab:{self.principal}:{os.path.realpath(self.keytab)}"
        # A driver reads the ticket cache it was started with (and renews it): another cache
        # is another login, even for the same principal.
        return f"ticket:{self.principal or ''}:{self.cache}"


def is_secure(conf_dir: str) -> bool:
    """Whether the cluster configured in ``conf_dir`` authenticates with Kerberos."""
    return hadoop_conf("core-site.xml", conf_dir).get("hadoop.security.authentication", "").lower() == "kerberos"


def requested(spec_kerberos=None, principal: Optional[str] = None, keytab: Optional[str] = None) -> Login:
    """The login asked for: the given principal/keytab (``--principal/--keytab``), else
    SUBM_PRINCIPAL/SUBM_KEYTAB, else the job file's ``kerberos``; none: the ticket cache."""
    where = "--principal/--keytab"
    if not principal and not keytab:
        principal, keytab = os.environ.get("SUBM_PRINCIPAL") or None, os.environ.get("SUBM_KEYTAB") or None
        where = "--principal/--keytab or SUBM_PRINCIPAL/SUBM_KEYTAB"
    if not principal and not keytab and spec_kerberos is not None:
        principal, keytab, where = spec_kerberos.principal, spec_kerberos.keytab, "the job file's kerberos"
    if bool(principal) != bool(keytab):
        missing = "keytab" if principal else "principal"
        raise SpecError([(where, f"a {missing} is needed too: give both a principal and a keytab, or "
                                 "neither to use the ticket cache of kinit")])
    if keytab:
        return Login(principal=principal, keytab=os.path.abspath(os.path.expanduser(keytab)), source=where)
    return Login()


#: The login this process uses (set by :func:`log_in`): REST calls refresh its ticket.
_active: Optional[Login] = None
#: When the active login's ticket ends (time.time()), as klist said at the last look.
_expires: Optional[float] = None


def log_in(conf_dir: str, login: Login) -> Login:
    """Check that ``login`` can talk to the secure cluster of ``conf_dir`` and make it this
    process's: a keytab logs in now into subm's own ticket cache (``KRB5CCNAME`` points there
    from then on); the ticket cache must hold a valid ticket. Returns the login with its
    principal. On a plain cluster nothing is checked."""
    global _active, _expires
    if not is_secure(conf_dir):
        return login
    if _active is not None and (not login.keytab or _active == login):
        return _active
    if login.keytab:
        _kinit_keytab(login)
    else:
        login = Login(principal=ticket_principal(), source="ticket cache",
                      cache=os.environ.get("KRB5CCNAME") or f"FILE:/tmp/krb5cc_{os.getuid()}")
    _active, _expires = login, _ends()
    return login


def active() -> Optional[Login]:
    return _active


def refresh() -> None:
    """Before a REST call: a ticket near its end is renewed (the ticket cache, if renewable) or
    taken again from the keytab; a failure is left to the call, which then explains."""
    global _expires
    login = _active
    if login is None or _expires is None or _expires - time.time() > REFRESH_BEFORE_SECONDS:
        return
    try:
        if login.keytab:
            _kinit_keytab(login)
        elif shutil.which("kinit"):
            subprocess.run(["kinit", "-R"], capture_output=True, timeout=30)
    except (CredentialsError, OSError, subprocess.SubprocessError):
        pass
    _expires = _ends()


def _cache_for(login: Login) -> str:
    folder = os.path.join(subm_home(), "krb5")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, "cc-" + hashlib.sha256(login.key.encode()).hexdigest()[:16])


def _kinit_keytab(login: Login) -> None:
    keytab, principal = login.keytab or "", login.principal or ""
    if not os.path.isfile(keytab):
        raise CredentialsError(f"the keytab {keytab} ({login.source}) does not exist: give the keytab of "
                               f"{principal}, or run `kinit {principal}` and leave the keytab out")
    if not os.access(keytab, os.R_OK):
        raise CredentialsError(f"the keytab {keytab} ({login.source}) is not readable by this user: "
                               f"chmod it, or run `kinit {principal}` and leave the keytab out")
    if not shutil.which("kinit"):
        raise CredentialsError("logging in with a keytab needs MIT Kerberos's kinit: install your "
                               "distribution's Kerberos client (Debian: krb5-user)")
    cache = "FILE:" + _cache_for(login)
    try:
        done = subprocess.run(["kinit", "-kt", keytab, "-c", cache, principal], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise CredentialsError(f"kinit -kt {keytab} {principal} did not answer in 60 s: is the KDC "
                               "of /etc/krb5.conf reachable?") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())
        raise CredentialsError(f"the keytab {keytab} ({login.source}) does not log in {principal}: {said}; "
                               f"check the principal (`klist -kt {keytab}` lists those it holds) or run "
                               f"`kinit {principal}` and leave the keytab out")
    os.environ["KRB5CCNAME"] = cache


def ticket_principal() -> str:
    """The principal of the ticket cache's valid ticket; else a :class:`CredentialsError`
    saying whether there is none or it expired, and to run ``kinit``."""
    listed = _klist()
    if listed is None:  # no klist: gssapi says what it can
        return _gssapi_principal()
    principal, expires = listed
    if not principal:
        raise CredentialsError("no Kerberos ticket: this cluster is secure (hadoop.security.authentication="
                               "kerberos); run `kinit` (or `kinit -kt KEYTAB PRINCIPAL`), or give "
                               "a principal and keytab (--principal/--keytab, SUBM_PRINCIPAL/SUBM_KEYTAB)")
    if expires is not None and expires <= time.time():
        raise CredentialsError(f"the Kerberos ticket of {principal} expired at "
                               f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(expires))}: run "
                               f"`kinit {principal}` (or `kinit -R` while it is renewable), or give "
                               "a principal and keytab (--principal/--keytab, SUBM_PRINCIPAL/SUBM_KEYTAB)")
    return principal


def _klist() -> Optional[Tuple[str, Optional[float]]]:
    """(principal, when its TGT expires) of the ticket cache, ("", None) when there is no ticket;
    None when there is no klist to ask."""
    if not shutil.which("klist"):
        return None
    try:
        done = subprocess.run(["klist"], capture_output=True, text=True, timeout=10,
                              env=dict(os.environ, LC_ALL="C", LANG="C"))
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^Default principal:\s*(\S+)", done.stdout, re.M)
    if done.returncode != 0 or not m:
        return "", None
    principal = m.group(1)
    for line in done.stdout.splitlines():
        parts = line.split()
        # "11/24/26 23:58:01  11/25/26 00:03:01  krbtgt/RIG.TEST@RIG.TEST"
        if len(parts) >= 5 and parts[4].startswith("krbtgt/"):
            return principal, _klist_time(parts[2], parts[3])
    return principal, None


def _klist_time(day: str, clock: str) -> Optional[float]:
    for form in ("%m/%d/%y %H:%M:%S", "%m/%d/%Y %H:%M:%S", "%d/%m/%y %H:%M:%S"):
        try:
            return time.mktime(time.strptime(f"{day} {clock}", form))
        except ValueError:
            continue
    return None


def _ends() -> Optional[float]:
    """When the ticket cache's TGT ends (None: unknown, so every call looks again)."""
    listed = _klist()
    return listed[1] if listed else None


def _gssapi_principal() -> str:
    try:
        import gssapi
    except ImportError:
        raise CredentialsError("this cluster is secure (Kerberos) and neither klist nor python-gssapi is "
                               "installed: install your distribution's Kerberos client (Debian: krb5-user) "
                               f"and {INSTALL_GSSAPI}") from None
    try:
        creds = gssapi.Credentials(usage="initiate")
        return str(creds.name)
    except gssapi.exceptions.ExpiredCredentialsError:
        raise CredentialsError("your Kerberos ticket expired: run `kinit`, or give a principal and keytab "
                               "(--principal/--keytab, SUBM_PRINCIPAL/SUBM_KEYTAB)") from None
    except gssapi.exceptions.GSSError:
        raise CredentialsError("no Kerberos ticket: this cluster is secure; run `kinit`, or give a principal "
                               "and keytab (--principal/--keytab, SUBM_PRINCIPAL/SUBM_KEYTAB)") from None
