"""skein's driver, one per cluster.

skein submits through a driver: a JVM that reads the Hadoop configuration once, when it
starts, and serves clients afterwards. skein's own "global driver" (``~/.skein/driver``)
is one per user, bound to whatever cluster ``HADOOP_CONF_DIR`` named when it started: a
client that reuses it submits there, whatever ``HADOOP_CONF_DIR`` says now. So subm keeps
a driver per cluster configuration: skein's config folder (``SKEIN_CONFIG``: the driver's
address, its TLS credentials) is ``$SUBM_SKEIN_HOME/<rm>-<hash of the conf dir>/``
(``SUBM_SKEIN_HOME`` defaults to ``$SUBM_HOME/skein``, i.e. ``~/.submarine/skein``), with
the driver's log beside it (per user: ``SUBM_HOME`` is). A driver whose configuration
files changed since it started is replaced.

The driver starts with the cluster's configuration as it is, but for how its HDFS client waits
to close a file (:func:`driver_conf`): each application it submits writes a few small files.

On a secure cluster a driver is also one per login (``kerberos.Login``): the principal of
the ticket cache, or a principal and keytab, which the driver logs in with itself. Its folder
name ends with a digest of the login, and its ``cluster.json`` names it: a driver started for
another principal, or without security, is never reused for this one.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import warnings
import xml.etree.ElementTree as ET
from typing import Dict, Iterator, List, Optional

from ....errors import BackendError
from ....home import subm_home
from ..hadoop.kerberos import Login
from ..hadoop.conf import hadoop_conf

#: Files of the Hadoop configuration whose content the driver depends on.
CONF_FILES = ("core-site.xml", "yarn-site.xml", "hdfs-site.xml", "resource-types.xml")
#: How the driver's HDFS client waits for the NameNode to call a file it wrote complete, where
#: the cluster's hdfs-site.xml does not say: first after 50 ms, not Hadoop's 400 ms, and twice
#: as long each time, for 8 tries (about 12.8 s in all, as Hadoop's 400 ms and 5 tries wait).
#: Each application's staging files (skein's spec, credentials and jar, subm's job file) are
#: closed as soon as written, often before the DataNode has reported the block, and each such
#: close waited 400 ms: submissions took 0.7 s plus steps of 0.4 s (docs/benchmarks.md).
CLOSE_WAIT = {
    "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "50",
    "dfs.client.block.write.locateFollowingBlock.retries": "8",
}


def skein_home() -> str:
    """Where the per-cluster skein config folders live."""
    home = os.environ.get("SUBM_SKEIN_HOME")
    return os.path.abspath(os.path.expanduser(home)) if home else os.path.join(subm_home(), "skein")


def fingerprint(conf_dir: str) -> str:
    """A digest of the configuration files a driver reads at start."""
    digest = hashlib.sha256()
    for name in CONF_FILES:
        path = os.path.join(conf_dir, name)
        digest.update(name.encode() + b"\0")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def config_dir_for(conf_dir: str, login: Optional[Login] = None) -> str:
    """The skein config folder of the cluster whose (resolved) Hadoop configuration is
    ``conf_dir``, for ``login`` on a secure cluster (None: a plain cluster's one driver)."""
    conf = hadoop_conf("yarn-site.xml", conf_dir)
    rm = conf.get("yarn.resourcemanager.address") or conf.get("yarn.resourcemanager.hostname") or "rm"
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", rm).strip("_")[:60] or "rm"
    base = os.path.join(skein_home(), f"{name}-{hashlib.sha256(conf_dir.encode()).hexdigest()[:10]}")
    return base if login is None else f"{base}-krb-{hashlib.sha256(login.key.encode()).hexdigest()[:10]}"


@contextlib.contextmanager
def _skein_config(directory: str) -> Iterator[None]:
    """Point skein at ``directory`` for its driver file and credentials.

    skein reads ``SKEIN_CONFIG`` once, at import, into ``skein.core.properties``, which its
    driver and security helpers look up at each call; a fresh one is swapped in meanwhile.
    """
    import skein.core

    saved_env, saved = os.environ.get("SKEIN_CONFIG"), skein.core.properties
    os.environ["SKEIN_CONFIG"] = directory
    skein.core.properties = skein.core.Properties()
    try:
        with warnings.catch_warnings():  # "credentials not found, writing now": expected, the first time
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        skein.core.properties = saved
        if saved_env is None:
            os.environ.pop("SKEIN_CONFIG", None)
        else:
            os.environ["SKEIN_CONFIG"] = saved_env


def client_for(conf_dir: str, login: Optional[Login] = None):
    """A ``skein.Client`` whose driver was started for the cluster configured in ``conf_dir``
    (resolved, existing) and, on a secure cluster, for ``login``: reused when running with the
    same configuration and login, else started (with the login's keytab, if it has one)."""
    import skein

    directory = config_dir_for(conf_dir, login)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    meta_path = os.path.join(directory, "cluster.json")
    # A driver started otherwise (another configuration or login; by a subm without CLOSE_WAIT)
    # is replaced.
    meta = {"hadoop_conf_dir": conf_dir, "fingerprint": fingerprint(conf_dir),
            "login": login.key if login is not None else "simple", "close_wait": CLOSE_WAIT}
    log = os.path.join(directory, "driver.log")
    # One process at a time starts (or replaces) this cluster's driver: two starting at once
    # would each stop the other's.
    with open(os.path.join(directory, "lock"), "w") as lock, _skein_config(directory):
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _read_json(meta_path) == meta:
            try:
                return skein.Client.from_global_driver()
            except (skein.exceptions.SkeinError, OSError):
                pass  # gone: start another
        _stop(directory)  # a driver for another configuration, or a dead one
        # The driver reads it once, now (`yarn classpath` puts it first on the driver's
        # classpath; Hadoop 3's scripts take YARN_CONF_DIR instead where it is set).
        saved = {k: os.environ.get(k) for k in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")}
        try:
            conf = driver_conf(conf_dir, directory)
            for key in ("HADOOP_CONF_DIR", "YARN_CONF_DIR") if saved["YARN_CONF_DIR"] else ("HADOOP_CONF_DIR",):
                os.environ[key] = conf
            # Java options (a secure cluster on Java 17 needs --add-exports): skein reads them
            # from SKEIN_DRIVER_JAVA_OPTIONS.
            keytab = dict(keytab=login.keytab, principal=login.principal) if login and login.keytab else {}
            skein.Client.start_global_driver(log=log, **keytab)
            client = skein.Client.from_global_driver()
        except Exception as exc:
            raise BackendError(f"could not start skein's driver for the cluster of {conf_dir}: {exc}; "
                               f"its log: {log} (Java 8 or 11 needed: JAVA_HOME; on a secure cluster "
                               "see docs/security.md)") from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        return client


def driver_conf(conf_dir: str, directory: str) -> str:
    """The configuration folder the driver starts with, in ``directory``: a link to each file of
    ``conf_dir``, but hdfs-site.xml, copied with :data:`CLOSE_WAIT` added where it does not set
    those itself. Made again at each start, so it follows the cluster's files."""
    out = os.path.join(directory, "conf")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out, mode=0o700)
    for name in os.listdir(conf_dir):
        if name != "hdfs-site.xml":
            os.symlink(os.path.join(conf_dir, name), os.path.join(out, name))
    source = os.path.join(conf_dir, "hdfs-site.xml")
    try:
        tree = ET.parse(source) if os.path.isfile(source) else ET.ElementTree(ET.Element("configuration"))
    except ET.ParseError as exc:
        raise BackendError(f"{source} is not valid XML: {exc}") from None
    root = tree.getroot()
    present = {(p.findtext("name") or "").strip() for p in root.iter("property")}
    for key, value in CLOSE_WAIT.items():
        if key not in present:
            prop = ET.SubElement(root, "property")
            ET.SubElement(prop, "name").text = key
            ET.SubElement(prop, "value").text = value
    tree.write(os.path.join(out, "hdfs-site.xml"), encoding="utf-8", xml_declaration=True)
    return out


def _read_json(path: str) -> Dict[str, str]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _stop(directory: str) -> bool:
    """Stop the driver recorded in ``directory`` (if its process still runs); True if one was."""
    driver = _read_json(os.path.join(directory, "driver"))
    for name in ("driver", "cluster.json"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, name))
    pid = driver.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"skein" not in f.read():
                return False  # the pid was reused: not ours to stop
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    return True


def stop_driver(conf_dir: str) -> bool:
    """Stop the drivers of the cluster configured in ``conf_dir`` (every login's); True if one ran."""
    base = config_dir_for(os.path.realpath(conf_dir))
    stopped = _stop(base)
    with contextlib.suppress(OSError):
        for name in os.listdir(os.path.dirname(base)):
            if name.startswith(os.path.basename(base) + "-krb-"):
                stopped = _stop(os.path.join(os.path.dirname(base), name)) or stopped
    return stopped


def stop_drivers(home: str = "") -> List[str]:
    """Stop every per-cluster driver under ``home`` (default :func:`skein_home`); their folders."""
    home = home or skein_home()
    stopped = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(home)):
            if _stop(os.path.join(home, name)):
                stopped.append(os.path.join(home, name))
    return stopped
