"""Wait until a rig of scripts/rig.sh is up, then give HDFS its shared folders.

    python3 wait.py RIG_DIR SECONDS
    python3 wait.py RIG_DIR --active nn|rm     # with RIG_HA=1: 1 or 2, the active master's number

Up: the ResourceManager lists RIG_NODES nodes RUNNING, the NameNode counts RIG_NODES live
DataNodes and is out of safe mode. With RIG_HA=1: both NameNodes and both ResourceManagers
answer, one of each is active, and that one counts the nodes so. With RIG_TLS=1 it asks over
HTTPS, trusting the rig's CA (RIG_DIR/tls/ca.pem). Then /tmp and /user are made (1777: every user makes their
own home there, where skein stages applications), over WebHDFS, and a home /user/NAME owned by
each user of RIG_HDFS_HOMES. With RIG_KERBEROS=1 it asks by SPNEGO (curl --negotiate), with the
ticket of KRB5CCNAME (kerberos.sh gives it HDFS's superuser's). Standard library only.
"""
from __future__ import annotations

import getpass
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, List, Optional

from conf import NN_HTTP, NN_HTTPS, RM_PORTS, env, ha, master_host, masters, tls  # the same settings as conf.py

KERBEROS = env("RIG_KERBEROS") == "1"
CA: Optional[str] = None  # the rig's CA where RIG_TLS=1 (main sets it)


def ask(url: str, method: str = "GET", timeout: float = 3) -> bytes:
    if KERBEROS:
        done = subprocess.run(["curl", "-sSf", "--negotiate", "-u", ":", "-X", method, "--max-time", str(timeout)]
                              + (["--cacert", CA] if CA else []) + [url], capture_output=True)
        if done.returncode:
            raise OSError(f"curl {method} {url}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout
    context = ssl.create_default_context(cafile=CA) if CA else None
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=timeout, context=context) as resp:
        return resp.read()


def get(url: str) -> Any:
    return json.loads(ask(url))


FAILED = (OSError, ValueError, KeyError, IndexError, TypeError)


def rm_urls() -> List[str]:
    scheme, port = ("https", RM_PORTS["webapp.https.address"]) if tls() else ("http", RM_PORTS["webapp.address"])
    return [f"{scheme}://{master_host(m)}:{port}" for m in masters()]


def nn_urls() -> List[str]:
    scheme, port = ("https", NN_HTTPS) if tls() else ("http", NN_HTTP)
    return [f"{scheme}://{master_host(m)}:{port}" for m in masters()]


def rm_state(rm: str) -> str:
    """ACTIVE, STANDBY, ... (what /ws/v1/cluster/info says; a ResourceManager without HA: ACTIVE)."""
    return get(f"{rm}/ws/v1/cluster/info?user.name=rig")["clusterInfo"].get("haState") or "ACTIVE"


def nn_state(nn: str) -> str:
    """active, standby, ... (the NameNode's NameNodeStatus bean)."""
    return get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=NameNodeStatus")["beans"][0]["State"]


def states(kind: str) -> List[str]:
    """Each master's state ("" where it does not answer)."""
    out = []
    for url in rm_urls() if kind == "rm" else nn_urls():
        try:
            out.append((rm_state(url) if kind == "rm" else nn_state(url)).lower())
        except FAILED:
            out.append("")
    return out


def active(kind: str) -> Optional[str]:
    """The URL of the active NameNode (kind nn) or ResourceManager (rm), where one is."""
    urls = rm_urls() if kind == "rm" else nn_urls()
    if not ha():
        return urls[0]
    found = states(kind)
    return urls[found.index("active")] if "active" in found else None


def up(nodes: int) -> bool:
    try:
        if ha() and not (all(states("rm")) and all(states("nn"))):
            return False  # both masters answer
        rm, nn = active("rm"), active("nn")
        if not rm or not nn:
            return False
        listed = (get(f"{rm}/ws/v1/cluster/nodes?user.name=rig").get("nodes") or {}).get("node", [])
        state = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")["beans"][0]
        safe = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")["beans"][0]["Safemode"]
    except FAILED:
        return False
    running = [n for n in listed if n["state"] == "RUNNING"]
    return len(running) >= nodes and state["NumLiveDataNodes"] >= nodes and not safe


def mkdirs(nn: str, *paths: str, mode: str = "1777", owner: str = "") -> None:
    me = "" if KERBEROS else f"&user.name={getpass.getuser()}"
    for path in paths:
        ask(f"{nn}/webhdfs/v1{path}?op=MKDIRS&permission={mode}{me}", "PUT", 10)
        if owner:
            ask(f"{nn}/webhdfs/v1{path}?op=SETOWNER&owner={owner}{me}", "PUT", 10)


def died(rig: Path) -> List[str]:
    """Daemons of the rig whose process is gone, each with the last ERROR (or FATAL, or Caused by) line of its log."""
    out = []
    for pidf in sorted(rig.glob("pids/*.pid")) + sorted(rig.glob("master*/pids/*.pid")) + sorted(rig.glob("node*/pids/*.pid")):
        try:
            os.kill(int(pidf.read_text().strip()), 0)
            continue
        except (OSError, ValueError):
            pass
        daemon = pidf.stem.rsplit("-", 1)[-1]
        log = pidf.parent.parent / "logs" / f"{daemon}.log"
        errors = [line for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
                  if " ERROR " in line or " FATAL " in line or "Caused by" in line]
        out.append(f"{daemon} of {pidf.parent.parent.name} died: {errors[-1] if errors else 'see ' + str(log)}")
    return out


def main() -> int:
    global CA
    rig = Path(sys.argv[1])
    if tls():
        CA = str(rig / "tls" / "ca.pem")
    if sys.argv[2] == "--active":  # master.sh: which master's NameNode or ResourceManager is active
        found = states(sys.argv[3])
        if "active" not in found:
            print(f"no active {sys.argv[3]}: {found}", file=sys.stderr)
            return 1
        print(found.index("active") + 1)
        return 0
    seconds = float(sys.argv[2])
    nodes = int(env("RIG_NODES", "3"))
    deadline = time.monotonic() + seconds
    while not up(nodes):
        gone = died(rig)
        if gone or time.monotonic() > deadline:
            print("\n".join(gone) or f"not up after {seconds:.0f} s", file=sys.stderr)
            return 1
        time.sleep(1)
    nn = active("nn")
    mkdirs(nn, "/tmp", "/user")
    for user in env("RIG_HDFS_HOMES").split():
        mkdirs(nn, f"/user/{user}", mode="755", owner=user)
    return 0


if __name__ == "__main__":
    sys.exit(main())
