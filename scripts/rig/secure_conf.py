"""The Kerberized rig's additions to its configuration (RIG_KERBEROS=1), imported by conf.py.

Realm RIG.TEST, keytabs in KEYTABS (scripts/rig/kerberos.sh makes both): yarn.keytab holds
rm/rm.rig.test and nm/nm<i>.rig.test, hdfs.keytab nn/rm.rig.test and dn/nm<i>.rig.test,
http.keytab HTTP/<each host> (SPNEGO on every web endpoint). The masters answer as rm.rig.test,
node i as nm<i>.rig.test (kerberos.sh maps them to the rig's loopback addresses in /etc/hosts).
With RIG_HA=1 master 2 answers as rm2.rig.test (nn/, rm/ and HTTP/ of it in the same keytabs)
and the JournalNode (on master 1) as jn/rm.rig.test (hdfs.keytab); each ZKFC logs in as its
NameNode. ZooKeeper itself takes no authentication.

What is secure-mode specific and `subm hadoop-conf --set kerberos_realm=RIG.TEST` renders is set
as it renders it (tests/test_secure_clusters_with_kerberos.py checks): principals, keytabs,
auth_to_local (the daemons' rm, nm and HTTP principals are root, who runs them; nn and dn map
to themselves: HDFS's superuser is nn), YARN's ACLs with root its admin, queue administrators
root. Service-level authorization stays off: the NodeManagers and DataNodes reach the masters
from 127.0.0.1, which a host-bound service ACL would take for another host.
"""
from __future__ import annotations

import os
from typing import Dict

REALM = "RIG.TEST"
KEYTABS = "/tmp/krb"
MASTER = "rm.rig.test"
#: Master 2 of RIG_HA=1 (its NameNode nn2 and ResourceManager rm2).
MASTER2 = "rm2.rig.test"
ADMINS = "root"
#: What Hadoop on Java 17 needs opened (Kerberos SASL and a few reflective accesses): for the
#: daemons and the rig's commands (HADOOP_OPTS), skein's driver (SKEIN_DRIVER_JAVA_OPTIONS) and
#: skein's ApplicationMaster and the LCE's localizer in their containers (JDK_JAVA_OPTIONS).
JAVA_OPENS = " ".join(
    ["--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
     "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED"]
    + [f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
        "java.lang", "java.util", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.util.concurrent",
        "java.lang.reflect", "sun.net.dns", "sun.net.util")])


def enabled() -> bool:
    return os.environ.get("RIG_KERBEROS") == "1"


def node_name(i: int) -> str:
    return f"nm{i}.rig.test"


def core(host: str) -> Dict[str, str]:
    """core-site.xml of a conf folder whose daemons answer as ``host``."""
    return {
        "hadoop.security.authentication": "kerberos",
        "hadoop.security.authorization": "false",
        # (RIG_HA=1: the JournalNode's jn/ is nn, HDFS's user, as production maps nn/ and jn/ to
        # one user: its edits servlet serves only NameNodes whose short name is its own.)
        "hadoop.security.auth_to_local": "\n".join(
            ([f"RULE:[2:$1@$0](jn@{REALM})s/.*/nn/"] if os.environ.get("RIG_HA") == "1" else [])
            + [f"RULE:[2:$1@$0]({p}@{REALM})s/.*/{ADMINS}/" for p in ("rm", "nm", "HTTP")]
            + [f"RULE:[1:$1@$0](.*@{REALM})s/@.*//", "DEFAULT"]),
        "hadoop.http.filter.initializers": "org.apache.hadoop.security.AuthenticationFilterInitializer",
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.kerberos.principal": f"HTTP/{host}@{REALM}",
        "hadoop.http.authentication.kerberos.keytab": f"{KEYTABS}/http.keytab",
        "hadoop.http.authentication.simple.anonymous.allowed": "false",
    }


def hdfs(host: str) -> Dict[str, str]:
    """hdfs-site.xml: Kerberized NameNode and DataNodes, block access tokens. The DataNodes
    listen on unprivileged ports (no jsvc, no SASL with HTTPS): allowed for testing."""
    return {
        "dfs.namenode.kerberos.principal": f"nn/_HOST@{REALM}",
        "dfs.namenode.keytab.file": f"{KEYTABS}/hdfs.keytab",
        "dfs.namenode.kerberos.internal.spnego.principal": f"HTTP/_HOST@{REALM}",
        "dfs.datanode.kerberos.principal": f"dn/_HOST@{REALM}",
        "dfs.datanode.keytab.file": f"{KEYTABS}/hdfs.keytab",
        "dfs.web.authentication.kerberos.principal": f"HTTP/{host}@{REALM}",
        "dfs.web.authentication.kerberos.keytab": f"{KEYTABS}/http.keytab",
        "dfs.block.access.token.enable": "true",
        "ignore.secure.ports.for.testing": "true",
        **({"dfs.journalnode.kerberos.principal": f"jn/_HOST@{REALM}",
            "dfs.journalnode.keytab.file": f"{KEYTABS}/hdfs.keytab",
            "dfs.journalnode.kerberos.internal.spnego.principal": f"HTTP/_HOST@{REALM}"}
           if os.environ.get("RIG_HA") == "1" else {}),
    }


def yarn(host: str) -> Dict[str, str]:
    """yarn-site.xml; the RM's delegation tokens are short-lived for the renewal tests
    (RIG_TOKEN_RENEW_MS, RIG_TOKEN_MAX_MS)."""
    return {
        "yarn.resourcemanager.principal": f"rm/_HOST@{REALM}",
        "yarn.resourcemanager.keytab": f"{KEYTABS}/yarn.keytab",
        # A NodeManager logs in as nm/<the machine's name>, not its hostname's: named here.
        "yarn.nodemanager.principal": f"nm/{host}@{REALM}" if host not in (MASTER, MASTER2) else f"nm/_HOST@{REALM}",
        "yarn.nodemanager.keytab": f"{KEYTABS}/yarn.keytab",
        "yarn.resourcemanager.webapp.spnego-principal": f"HTTP/_HOST@{REALM}",
        "yarn.resourcemanager.webapp.spnego-keytab-file": f"{KEYTABS}/http.keytab",
        "yarn.nodemanager.webapp.spnego-principal": f"HTTP/{host}@{REALM}" if host not in (MASTER, MASTER2) else f"HTTP/_HOST@{REALM}",
        "yarn.nodemanager.webapp.spnego-keytab-file": f"{KEYTABS}/http.keytab",
        "yarn.acl.enable": "true",
        "yarn.admin.acl": ADMINS,
        "yarn.nodemanager.admin-env": f"MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,JDK_JAVA_OPTIONS={JAVA_OPENS}",
        "yarn.resourcemanager.delegation.token.renew-interval": os.environ.get("RIG_TOKEN_RENEW_MS") or "120000",
        "yarn.resourcemanager.delegation.token.max-lifetime": os.environ.get("RIG_TOKEN_MAX_MS") or "300000",
    }


def queue_acls(queues) -> Dict[str, str]:
    """A queue's administrators may kill any of its jobs: YARN's admins only, as `subm
    hadoop-conf` renders for secure mode (Hadoop's default is everyone)."""
    props = {"yarn.scheduler.capacity.root.acl_administer_queue": ADMINS}
    for name in queues:
        props[f"yarn.scheduler.capacity.root.{name}.acl_administer_queue"] = ADMINS
        props[f"yarn.scheduler.capacity.root.{name}.acl_submit_applications"] = "*"
    return props


def hadoop_env() -> str:
    return f'export HADOOP_OPTS="${{HADOOP_OPTS:-}} {JAVA_OPENS}"\n'
