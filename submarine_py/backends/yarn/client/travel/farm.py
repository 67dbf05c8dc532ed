"""In the container, a venv's layers become one site-packages: a folder of links.

A layer travels as a plain file (YARN's FILE resource, kept in the NodeManager's per-user cache
like an archive): YARN's own unpacking of an archive streams it through ``tar`` at ~25 MB/s on
the rig, its copy of a file runs at ~160 MB/s, and ``tar -x`` of a local file at disk speed
(bench/environment_travel.py). So each layer is unpacked here, once per node, into the node's
layer cache (``SUBM_LAYER_CACHE``, default ``<tmp>/subm-layers-<uid>``): ``<cache>/<layer's
archive name>/``, named by what it holds, made by one container while the others wait (a lock
per layer) and renamed into place whole. Every later container and job on the node links it.

The launch lines run :func:`link` with the base interpreter (``python -S -E``: nothing of
site-packages is read yet), which fills ``.subm-venv/lib/python<X.Y>/site-packages`` with a link
per entry of each layer, the first layer's winning; a folder two layers share (a namespace such
as ``nvidia/``) becomes a folder of links into both. A layer's *hidden* entries (the rest
layer's copies of distributions changed or removed since: ``layers.py``) are not linked.
Python, ``$ORIGIN`` paths of extension modules and ``.pth`` files see one site-packages, as in
the submitting venv. A layer of the cache unused by any container for :data:`UNUSED_DAYS` is
removed (looked at once a day, by the first container of the day).

:func:`link` runs as source text in the container: standard library only, and nothing of this
module but itself.
"""
from __future__ import annotations

import inspect
import json
import shlex
from typing import Sequence, Tuple

#: A layer no container on the node used for this long leaves its cache.
UNUSED_DAYS = 14
#: Where a node keeps unpacked layers (else ``<tmp>/subm-layers-<uid>``).
LAYER_CACHE = "SUBM_LAYER_CACHE"


def link(site, layers, unused_days=UNUSED_DAYS, cache_var=LAYER_CACHE):
    """Fill the folder ``site`` with links to the entries of ``layers`` ([path, name, [hidden
    entry, ...]], ...: a layer's file to unpack into the node's cache under ``name``, or a folder
    YARN unpacked), the first one's entries winning; folders two layers share are merged."""
    import fcntl
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    from concurrent.futures import ThreadPoolExecutor

    cache = os.environ.get(cache_var) or os.path.join(tempfile.gettempdir(), "subm-layers-%d" % os.getuid())

    def fail(what):
        sys.stderr.write("subm: on %s: %s\n" % (socket.getfqdn(), what))
        sys.exit(3)

    def unpacked(path, name):
        target = os.path.join(cache, name)
        if not os.path.isdir(target):
            with open(target + ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another container unpacking it: wait, then use it
                if not os.path.isdir(target):
                    tmp = tempfile.mkdtemp(prefix=".tmp-%s-" % name, dir=cache)
                    tar = shutil.which("tar")
                    try:
                        if tar:
                            done = subprocess.run([tar, "-xf", os.path.realpath(path), "-C", tmp],
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                            if done.returncode:
                                raise OSError(done.stderr.decode(errors="replace").strip()[-300:])
                        else:
                            import tarfile
                            with tarfile.open(path) as t:
                                t.extractall(tmp, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
                        os.rename(tmp, target)
                    except OSError as exc:
                        shutil.rmtree(tmp, ignore_errors=True)
                        fail("cannot unpack the environment's layer %s into %s: %s; set %s to a folder with "
                             "room for it (in the role's env)" % (name, cache, exc, cache_var))
        os.utime(target)  # in use: the age cleaning leaves it
        return target

    def clean():
        stamp = os.path.join(cache, ".cleaned")
        now = time.time()
        try:
            if now - os.stat(stamp).st_mtime < 86400:
                return
        except OSError:
            pass
        open(stamp, "a").close()
        os.utime(stamp)
        for entry in os.listdir(cache):
            path = os.path.join(cache, entry)
            if entry.startswith(".tmp-") and now - os.stat(path).st_mtime > 86400:
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.isdir(path) and not entry.startswith(".") and now - os.stat(path).st_mtime > unused_days * 86400:
                with open(path + ".lock", "a") as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # being unpacked again right now
                    shutil.rmtree(path, ignore_errors=True)

    def merge(dst, src, hidden, rel, origin):
        for name in sorted(os.listdir(src)):
            path = rel + name
            if path in hidden:
                continue
            s, d = os.path.join(src, name), os.path.join(dst, name)
            if not os.path.lexists(d):
                os.symlink(s, d)
                origin[d] = (hidden, path)
            elif os.path.isdir(s) and not os.path.islink(s) and os.path.isdir(d):
                if os.path.islink(d):  # an earlier layer's folder: a folder of links to its entries
                    other, (other_hidden, _) = os.readlink(d), origin.get(d, (set(), path))
                    os.unlink(d)
                    os.mkdir(d)
                    for n in os.listdir(other):
                        if path + "/" + n not in other_hidden:
                            os.symlink(os.path.join(other, n), os.path.join(d, n))
                            origin[os.path.join(d, n)] = (other_hidden, path + "/" + n)
                merge(d, s, hidden, path + "/", origin)

    files = [(p, n) for p, n, _ in layers if os.path.isfile(p)]
    if files:
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
        except OSError as exc:
            fail("cannot create the layer cache %s: %s; set %s to a folder this user may write" % (cache, exc, cache_var))
        with ThreadPoolExecutor(4) as pool:
            folders = dict(zip([p for p, _ in files], pool.map(lambda f: unpacked(*f), files)))
        clean()
    else:
        folders = {}
    site = os.path.abspath(site)
    os.makedirs(site, exist_ok=True)
    origin = {}
    for path, _, hidden in layers:
        folder = folders.get(path) or os.path.abspath(path)
        if os.path.isdir(folder):
            merge(site, folder, set(hidden), "", origin)


def command(python: str, site: str, layers: Sequence[Tuple[str, str, Sequence[str]]]) -> str:
    """The shell line that runs :func:`link` with ``python`` (already shell-quoted) in the
    container's working directory; ``site`` and the layers' paths relative to it."""
    code = (f"UNUSED_DAYS, LAYER_CACHE = {UNUSED_DAYS!r}, {LAYER_CACHE!r}\n" + inspect.getsource(link)
            + "\nimport json, sys\nlink(sys.argv[1], json.loads(sys.argv[2]))\n")
    spec = json.dumps([[path, name, list(hidden)] for path, name, hidden in layers], separators=(",", ":"))
    return f"{python} -S -E -c {shlex.quote(code)} {shlex.quote(site)} {shlex.quote(spec)}"
