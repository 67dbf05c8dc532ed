"""In the container, a venv's layers become one site-packages: a folder of links.

A layer travels as a plain file (YARN's FILE resource, kept in the NodeManager's per-user cache):
YARN's own unpacking of an archive runs at 17-25 MB/s on the rig (1.18 GB of torch: 71 s as a
``.tar.gz``, 57 s as a ``.tar``), its copy of a file at ~160 MB/s, and ``tar -x`` of a local file
at disk speed. So the first container on a node unpacks each layer itself, beside YARN's copy
(``<YARN's cache entry>/unpacked/``, made by one container while the others wait, renamed into
place whole), and then empties YARN's copy: a layer takes its unpacked size once on the node,
and YARN's own cache eviction removes both. Every later container and job on the node links it.
Where YARN's cache entry cannot be written, the layer is unpacked into ``SUBM_LAYER_CACHE``
(default ``<tmp>/subm-layers-<uid>``) instead.

The launch lines run :func:`link` with the base interpreter (``python -S -E``: nothing of
site-packages is read yet), which fills ``.subm-venv/lib/python<X.Y>/site-packages`` with a link
per entry of each layer, the first layer's winning; a folder two layers share (a namespace such
as ``nvidia/``) becomes a folder of links into both. A layer's *hidden* entries (the rest
layer's copies of distributions changed or removed since: ``layers.py``) are not linked.
Python, ``$ORIGIN`` paths of extension modules and ``.pth`` files see one site-packages, as in
the submitting venv. While it unpacks, a file in the container's log folder (``UNPACKING_LOG``
of ``backends/yarn/protocol.py``) says what: the NodeManager lists it, so the AM's gang clock
waits as it does for YARN's localizing, and its decision says which nodes unpack what.

:func:`link` runs as source text in the container: standard library only, and nothing of this
module but itself.
"""
from __future__ import annotations

import inspect
import json
import shlex
from typing import Sequence, Tuple

from ...protocol import UNPACKING_LOG

#: Where a layer is unpacked when YARN's cache entry cannot be written.
LAYER_CACHE = "SUBM_LAYER_CACHE"


def link(site, layers, cache_var=LAYER_CACHE, unpacking_log=UNPACKING_LOG):
    """Fill the folder ``site`` with links to the entries of ``layers`` ([path, name, [hidden
    entry, ...]], ...: a layer's file (YARN's copy) to unpack once on the node, or a folder
    YARN unpacked), the first one's entries winning; folders two layers share are merged."""
    import fcntl
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    def fail(what):
        sys.stderr.write("subm: on %s: %s\n" % (socket.getfqdn(), what))
        sys.exit(3)

    def unpacked_in(where):
        return os.path.join(where, "unpacked")

    def unpack(real, where, name):
        """Unpack ``real`` into ``where/unpacked`` unless there; the folder, or None where
        ``where`` cannot be written."""
        target = unpacked_in(where)
        if os.path.isdir(target):
            return target
        try:
            lock = open(os.path.join(where, ".unpack.lock"), "a")
        except OSError:
            return None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another container unpacking it: wait, then use it
            if os.path.isdir(target):
                return target
            for left in os.listdir(where):  # a container killed while unpacking
                if left.startswith(".tmp-"):
                    shutil.rmtree(os.path.join(where, left), ignore_errors=True)
            if os.path.getsize(real) == 0:
                fail("the layer %s in YARN's cache (%s) is empty and its unpacked copy gone: remove %s so "
                     "that YARN fetches it again" % (name, real, where))
            tmp = tempfile.mkdtemp(prefix=".tmp-", dir=where)
            tar = shutil.which("tar")
            try:
                if tar:
                    done = subprocess.run([tar, "-xzf", real, "-C", tmp],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    if done.returncode:
                        raise OSError(done.stderr.decode(errors="replace").strip()[-300:])
                else:
                    import tarfile
                    with tarfile.open(real) as t:
                        t.extractall(tmp, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
                os.rename(tmp, target)
            except OSError as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                fail("cannot unpack the environment's layer %s into %s: %s; free room there, or set %s "
                     "(in the role's env) to a folder with room" % (name, where, exc, cache_var))
            try:  # the unpacked copy serves from now on: YARN's stays, empty, for its bookkeeping
                os.chmod(real, 0o600)
                open(real, "w").close()
            except OSError:
                pass
        return target

    def unpacked(path, name):
        real = os.path.realpath(path)
        target = unpack(real, os.path.dirname(real), name)
        if target is None:  # YARN's cache entry is not ours to write: a cache of our own
            cache = os.environ.get(cache_var) or os.path.join(tempfile.gettempdir(), "subm-layers-%d" % os.getuid())
            where = os.path.join(cache, name)
            try:
                os.makedirs(where, mode=0o700, exist_ok=True)
            except OSError as exc:
                fail("cannot create %s: %s; set %s (in the role's env) to a folder this user may write"
                     % (where, exc, cache_var))
            target = unpack(real, where, name) or fail("cannot write %s; set %s" % (where, cache_var))
        return target

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
    to_unpack = [(p, n) for p, n in files if not os.path.isdir(unpacked_in(os.path.dirname(os.path.realpath(p))))]
    marker = None
    if to_unpack and os.environ.get("LOG_DIRS"):  # YARN's log folder: the AM sees the file listed
        marker = os.path.join(os.environ["LOG_DIRS"].split(",")[0], unpacking_log)
        try:
            with open(marker, "w") as f:
                f.write("unpacking %d layer(s), %.2f GB: %s\n" % (
                    len(to_unpack), sum(os.path.getsize(p) for p, _ in to_unpack) / 1e9,
                    ", ".join(n for _, n in to_unpack)))
        except OSError:
            marker = None
    with ThreadPoolExecutor(4) as pool:
        folders = dict(zip([p for p, _ in files], pool.map(lambda f: unpacked(*f), files)))
    if marker:
        os.remove(marker)
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
    code = (f"LAYER_CACHE, UNPACKING_LOG = {LAYER_CACHE!r}, {UNPACKING_LOG!r}\n" + inspect.getsource(link)
            + "\nimport json, sys\nlink(sys.argv[1], json.loads(sys.argv[2]))\n")
    spec = json.dumps([[path, name, list(hidden)] for path, name, hidden in layers], separators=(",", ":"))
    return f"{python} -S -E -c {shlex.quote(code)} {shlex.quote(site)} {shlex.quote(spec)}"
