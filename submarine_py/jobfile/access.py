"""The job file's access sections, ``acls`` and ``kerberos``: who may see and stop the job,
and who submits it to a secure cluster. Read by ``validate.Builder``, which reports their
problems with the rest of the file's."""
from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Tuple

from .fields import show
from .model import GROUP_PREFIX, AclSpec, KerberosSpec
from .reader import FieldReader

#: A user or group name as YARN's ACL strings ("user1,user2 group1,group2") can hold it.
ACL_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@$-]{0,99}\Z")
#: ``name[/instance][@REALM]``: no blanks, one realm at most.
PRINCIPAL = re.compile(r"^[^\s@/]+(/[^\s@/]+)?(@[^\s@]+)?\Z")


def acls(builder: FieldReader, value: Any) -> Optional[AclSpec]:
    """``acls: {view: [...], modify: [...]}``: lists of user names, ``group:NAME``, or ``*``."""
    if value is None:
        return None
    d = builder.mapping(value, "acls", ("view", "modify"))
    if not isinstance(value, dict):
        return None
    return AclSpec(view=_names(builder, d.get("view"), "acls.view"),
                   modify=_names(builder, d.get("modify"), "acls.modify"))


def _names(builder: FieldReader, value: Any, path: str) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        builder.fail(path, f"expected a list of user names (group:NAME for a group, * for everyone), got {show(value)}")
        return ()
    out: List[str] = []
    for i, raw in enumerate(value):
        name = raw.strip() if isinstance(raw, str) else raw
        bare = name[len(GROUP_PREFIX):] if isinstance(name, str) and name.startswith(GROUP_PREFIX) else name
        if not isinstance(name, str) or not (name == "*" or ACL_NAME.match(bare or "")):
            builder.fail(f"{path}[{i}]", f"expected a user name, group:NAME or *, got {show(raw)}")
        elif name not in out:
            out.append(name)
    return tuple(out)


def kerberos(builder: FieldReader, value: Any) -> Optional[KerberosSpec]:
    """``kerberos: {principal: alice@REALM, keytab: path}``: both, or the section left out.
    A relative keytab is relative to the job file; whether it logs in is checked when the job
    is submitted to a secure cluster (``backends/yarn/hadoop/kerberos.py``)."""
    if value is None:
        return None
    d = builder.mapping(value, "kerberos", ("principal", "keytab"))
    if not isinstance(value, dict):
        return None
    principal = builder.string(d.get("principal"), "kerberos.principal", required=True)
    keytab = builder.string(d.get("keytab"), "kerberos.keytab", required=True)
    if principal and not PRINCIPAL.match(principal):
        builder.fail("kerberos.principal", f"expected name[/instance][@REALM], got {show(principal)}")
        principal = None
    if not principal or not keytab:
        return None
    return KerberosSpec(principal=principal, keytab=os.path.normpath(os.path.join(builder.base_dir, keytab)))
