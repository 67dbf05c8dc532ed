"""Wait until a rig of scripts/rig.sh is up, then give HDFS its shared folders.

    python3 wait.py RIG_DIR SECONDS

Up: the ResourceManager lists RIG_NODES nodes RUNNING, the NameNode counts RIG_NODES live
DataNodes and is out of safe mode. Then /tmp and /user are made (1777: every user makes their
own home there, where skein stages applications), over WebHDFS. Standard library only.
"""
from __future__ import annotations

import getpass
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, List

from conf import env  # noqa: E402  (the same settings as conf.py)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.load(resp)


def up(rm: str, nn: str, nodes: int) -> bool:
    try:
        listed = (get(f"{rm}/ws/v1/cluster/nodes?user.name=rig").get("nodes") or {}).get("node", [])
        state = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")["beans"][0]
        safe = get(f"{nn}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")["beans"][0]["Safemode"]
    except (OSError, ValueError, KeyError, IndexError):
        return False
    running = [n for n in listed if n["state"] == "RUNNING"]
    return len(running) >= nodes and state["NumLiveDataNodes"] >= nodes and not safe


def mkdirs(nn: str, *paths: str) -> None:
    for path in paths:
        req = urllib.request.Request(f"{nn}/webhdfs/v1{path}?op=MKDIRS&permission=1777&user.name={getpass.getuser()}",
                                     method="PUT")
        urllib.request.urlopen(req, timeout=10).read()


def died(rig: Path) -> List[str]:
    """Daemons of the rig whose process is gone, each with the first ERROR line of its log."""
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
    host, nodes = env("RIG_HOST", "127.0.0.3"), int(env("RIG_NODES", "3"))
    rm, nn = f"http://{host}:8088", f"http://{host}:9870"
    deadline = time.monotonic() + seconds
    while not up(rm, nn, nodes):
        gone = died(rig)
        if gone or time.monotonic() > deadline:
            print("\n".join(gone) or f"not up after {seconds:.0f} s", file=sys.stderr)
            return 1
        time.sleep(1)
    mkdirs(nn, "/tmp", "/user")
    return 0


if __name__ == "__main__":
    sys.exit(main())
