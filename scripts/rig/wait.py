"""Wait until a rig of scripts/rig.sh is up, then give HDFS its shared folders.

    python3 wait.py RIG_DIR SECONDS

Up: the ResourceManager lists RIG_NODES nodes RUNNING, the NameNode counts RIG_NODES live
DataNodes and is out of safe mode. Then /tmp and /user are made (1777: every user makes their
own home there, where skein stages applications), over WebHDFS, and a home /user/NAME owned by
each user of RIG_HDFS_HOMES. With RIG_KERBEROS=1 it asks by SPNEGO (curl --negotiate), with the
ticket of KRB5CCNAME (kerberos.sh gives it HDFS's superuser's). Standard library only.
"""
from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, List

from conf import env, master_host  # the same settings as conf.py

KERBEROS = env("RIG_KERBEROS") == "1"


def ask(url: str, method: str = "GET", timeout: float = 3) -> bytes:
    if KERBEROS:
        done = subprocess.run(["curl", "-sSf", "--negotiate", "-u", ":", "-X", method, "--max-time", str(timeout), url],
                              capture_output=True)
        if done.returncode:
            raise OSError(f"curl {method} {url}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=timeout) as resp:
        return resp.read()


def get(url: str) -> Any:
    return json.loads(ask(url))


def up(rm: str, nn: str, nodes: int) -> bool:
    try:
        listed = (get(f"{rm}/ws/v1/cluster/nodes?user.name=rig").get("nodes") or {}).get("node", [])
        state = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")["beans"][0]
        safe = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")["beans"][0]["Safemode"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
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
    for pidf in sorted(rig.glob("pids/*.pid")) + sorted(rig.glob("node*/pids/*.pid")):
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
    rig = Path(sys.argv[1])
    seconds = float(sys.argv[2])
    host, nodes = master_host(), int(env("RIG_NODES", "3"))
    rm, nn = f"http://{host}:8088", f"http://{host}:9870"
    deadline = time.monotonic() + seconds
    while not up(rm, nn, nodes):
        gone = died(rig)
        if gone or time.monotonic() > deadline:
            print("\n".join(gone) or f"not up after {seconds:.0f} s", file=sys.stderr)
            return 1
        time.sleep(1)
    mkdirs(nn, "/tmp", "/user")
    for user in env("RIG_HDFS_HOMES").split():
        mkdirs(nn, f"/user/{user}", mode="755", owner=user)
    return 0


if __name__ == "__main__":
    sys.exit(main())
