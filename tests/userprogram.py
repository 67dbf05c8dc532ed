"""A program shaped like users' own, and a virtualenv to run ``subm`` from.

The project has an entry script that imports a sibling module, a package shipped
as a folder and a package installed only in the venv; it reads a nested
destination (``data/input.txt``) and a shipped folder (``conf/``), and meets its
peers through ``SUBM_SHARED_DIR``. It prints one ``RESULT {json}`` line.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

#: What the venv-only package holds.
VENV_MARK = "installed only in the user's venv"

MAIN = '''\
"""Entry point, written as users write them: no knowledge of subm beyond the environment."""
import json
import os
import pathlib
import subprocess
import sys
import time

import helpers                 # a module shipped beside this script
from mypkg import loader       # a package shipped as a folder
import venvonly                # installed only in the venv that runs subm

shared = os.environ.get("SUBM_SHARED_DIR")
seen = None
if shared:
    me = f"{os.environ['SUBM_ROLE']}-{os.environ['SUBM_INDEX']}"
    pathlib.Path(shared, "hello-" + me).write_text(os.environ["SUBM_HOST"])
    deadline = time.time() + 120
    while time.time() < deadline:
        seen = sorted(p.name for p in pathlib.Path(shared).glob("hello-*"))
        if len(seen) >= int(os.environ["SUBM_NUM_TASKS"]):
            break
        time.sleep(0.1)
python3 = subprocess.run(["python3", "-c", "import sys, venvonly; print(sys.prefix)"],
                         capture_output=True, text=True)
print("RESULT " + json.dumps({
    "role": os.environ["SUBM_ROLE"], "index": int(os.environ["SUBM_INDEX"]), "host": os.environ["SUBM_HOST"],
    "prefix": sys.prefix, "python3_prefix": python3.stdout.strip() or python3.stderr[-300:],
    "venvonly": venvonly.MARK, "helper": helpers.twice(21), "data": loader.read_input(),
    "conf": json.loads(pathlib.Path("conf/settings.json").read_text()),
    "script_is_link": os.path.islink(__file__), "shared": shared, "seen": seen,
    "local_rank": os.environ.get("LOCAL_RANK"), "local_world_size": os.environ.get("LOCAL_WORLD_SIZE"),
}), flush=True)
'''

FILES = {
    "main.py": MAIN,
    "helpers.py": "def twice(x):\n    return 2 * x\n",
    "mypkg/__init__.py": "",
    "mypkg/loader.py": textwrap.dedent('''\
        import pathlib


        def read_input():
            # Relative to the working directory, as most training scripts read their data.
            return pathlib.Path("data/input.txt").read_text().strip()
        '''),
    "data/input.txt": "hello from the data folder\n",
    "conf/settings.json": json.dumps({"lr": 0.1, "epochs": 3}),
}


def write_project(root: Path, *, instances: int = 2, extra: str = "") -> Path:
    """The project's files and its ``job.yaml``; returns the job file."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    job = root / "job.yaml"
    job.write_text(textwrap.dedent(f"""\
        name: user-program
        framework: pytorch
        timeouts: {{gang_seconds: 240}}
        roles:
          worker:
            instances: {instances}
            resources: {{memory: 512 MiB, vcores: 1}}
            command: python main.py
        files:
          main.py: main.py
          helpers.py: helpers.py
          mypkg: mypkg
          data/input.txt: data/input.txt
          conf: conf/
        """) + textwrap.dedent(extra))
    return job


def results(log_text: str) -> List[Dict]:
    return [json.loads(line.split("RESULT ", 1)[1]) for line in log_text.splitlines() if "RESULT " in line]


def _wheel(path: Path) -> Path:
    """A one-module wheel, ``venvonly``, built by hand (no network, no build backend)."""
    files = {"venvonly/__init__.py": f"MARK = {VENV_MARK!r}\n",
             "venvonly-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: venvonly\nVersion: 1.0\n",
             "venvonly-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                              "Tag: py3-none-any\n"}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("venvonly-1.0.dist-info/RECORD,,")
    wheel = path / "venvonly-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("venvonly-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def make_venv(root: Path, system_site_packages: bool, base: Optional[str] = None,
              deps: Optional[str] = None) -> Path:
    """``python3 -m venv`` from ``base`` (by default this one's base interpreter), with
    ``venvonly`` pip-installed into it (offline) and subm's own dependencies reachable through a
    ``.pth`` file naming ``deps`` (by default the site-packages of the venv running the tests);
    returns its ``bin/python``. The base interpreter has neither ``venvonly`` nor subm's
    dependencies."""
    base = base or getattr(sys, "_base_executable", None) or sys.executable
    argv = [base, "-m", "venv", "--without-pip", str(root)]
    if system_site_packages:
        argv.insert(4, "--system-site-packages")
    subprocess.run(argv, check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    if deps is None:
        import click  # subm's dependencies live beside click in the venv running the tests

        deps = os.path.dirname(os.path.dirname(os.path.abspath(click.__file__)))
    Path(site, "subm-deps.pth").write_text(deps + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                    "--no-deps", str(_wheel(root.parent))], check=True)
    return python
