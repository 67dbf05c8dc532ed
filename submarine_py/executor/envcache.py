"""A per-node cache of unpacked environments (``environment.archive``): standard library only.

YARN would unpack an ``archive`` resource in every container, which for a
packed virtualenv of 20 000 files takes minutes per container. Instead the
archive travels as a plain file and the executor calls :func:`ensure`, which
unpacks it once per node into ``<cache>/<sha256>/`` and reuses that folder for
every later container and job with the same content.

Layout of the cache folder (one per user, ``/tmp/subm-envs-<uid>`` by default)::

    <sha256>/          an unpacked environment, complete (it appears by an atomic rename)
    .sum-<key>         the sha256 of an archive file YARN localized on this node, by its real
                       path, size and mtime (an archive on the cluster's filesystem is localized
                       once per node for all of a user's jobs: later containers skip hashing it)
    <sha256>.lock      flock: shared while in use, exclusive while removing; its mtime is
                       the entry's last use
    <sha256>.unpack    flock: exclusive while unpacking (unpackers take turns)
    .tmp-<sha256>-...  an unpack in progress (or left by a crash: removed by age)

Concurrency: every container takes the shared lock first; the first to miss the
entry takes the unpack lock and unpacks into a temporary folder, then renames it
into place; the others wait for the unpack lock and find the folder. Every user
keeps its shared lock until it exits, so the age
cleaning (:func:`clean`, run opportunistically) never removes an environment
that a running task uses.

This module is shipped next to the executor (``subm_executor.py``), so it
imports nothing outside the standard library.
"""
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import zipfile

if __package__:  # shipped, main.py's _sibling gives every module ``protocol`` before it runs
    from . import protocol

DEFAULT_MAX_AGE_DAYS = 7.0
CHUNK = 1 << 20
#: Leftovers of an unpack or a removal that did not finish are removed after this long.
LEFTOVER_SECONDS = 24 * 3600


class EnvCacheError(Exception):
    """The archive could not be unpacked (corrupt, wrong checksum, disk full...)."""


def default_cache_dir():
    return os.path.join(tempfile.gettempdir(), "subm-envs-%d" % os.getuid())


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _locked(path, mode):
    """Open and flock ``path`` (created if missing); returns the open fd.

    Loops until the locked file is still the one at ``path`` (a cleaner may
    have removed it between our open and our lock).
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def ensure(archive, sha256=None, cache_dir=None, log=None):
    """The unpacked environment of ``archive`` in the node's cache: ``(folder, lock_fd, unpacked)``.

    ``sha256`` is the archive's checksum computed where the job was submitted
    (computed here when not given); the unpack checks it. Keep ``lock_fd`` open
    while the environment is in use: it is the shared lock that keeps the
    cleaner away. ``unpacked`` says whether this call unpacked it (a cache miss).
    """
    log = log or (lambda msg: None)
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, mode=0o755, exist_ok=True)
    if not sha256:
        sha256 = _remembered_sha256(archive, cache_dir)
    target = os.path.join(cache_dir, sha256)
    lock_path = target + ".lock"
    fd = _locked(lock_path, fcntl.LOCK_SH)  # in use from now on: removal needs it exclusively
    try:
        os.utime(lock_path)  # the cleaner leaves recently used entries alone
        unpacked = not os.path.isdir(target) and _unpack_once(archive, sha256, cache_dir, target, log)
    except BaseException:
        os.close(fd)
        raise
    if not unpacked:
        log("reusing the environment cached in %s" % target)
    os.utime(lock_path)  # last use, for the age cleaning
    return target, fd, unpacked


def _unpack_once(archive, sha256, cache_dir, target, log):
    """Unpack ``archive`` into ``target`` unless another container does it first; True if we did.

    Unpackers take turns on ``<sha256>.unpack``, a lock of its own: the entry's ``.lock`` is
    held shared by every container using it, so waiting for that one exclusively would wait
    for them all to exit (two containers missing the cache together would deadlock). Our
    shared ``.lock`` keeps the cleaner, and so the removal of ``.unpack``, away meanwhile.
    """
    fd = os.open(target + ".unpack", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.path.isdir(target):  # unpacked by the container we waited for
            return False
        started = time.monotonic()
        _unpack_atomically(archive, sha256, cache_dir, target)
        log("unpacked %s into %s in %.1f s" % (os.path.basename(archive), target, time.monotonic() - started))
        return True
    finally:
        os.close(fd)  # releases the turn


def _remembered_sha256(archive, cache_dir):
    """sha256 of ``archive``, remembered in the cache by the file's real path, size and mtime."""
    real = os.path.realpath(archive)
    st = os.stat(real)
    key = hashlib.sha256(("%s:%d:%d" % (real, st.st_size, st.st_mtime_ns)).encode()).hexdigest()[:32]
    memo = os.path.join(cache_dir, ".sum-" + key)
    try:
        with open(memo) as f:
            found = f.read().strip()
        if len(found) == 64:
            os.utime(memo)
            return found
    except OSError:
        pass
    sha256 = sha256_of(real)
    tmp = "%s.%d" % (memo, os.getpid())
    try:
        with open(tmp, "w") as f:
            f.write(sha256)
        os.replace(tmp, memo)
    except OSError:
        pass  # only a memo
    return sha256


def _unpack_atomically(archive, sha256, cache_dir, target):
    tmp = tempfile.mkdtemp(prefix=".tmp-%s-" % sha256, dir=cache_dir)
    try:
        if archive.endswith(".zip"):
            _unzip(archive, sha256, tmp)
        else:
            _untar(archive, sha256, tmp)
        os.chmod(tmp, 0o755)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _untar(archive, sha256, dest):
    """``tar -xz`` fed by this process, which checks the checksum of what it feeds."""
    tar = shutil.which("tar")
    if tar is None:
        _check_sha(archive, sha256)
        import tarfile

        with tarfile.open(archive, "r:*") as t:
            kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            t.extractall(dest, **kwargs)
        return
    digest = hashlib.sha256()
    proc = subprocess.Popen([tar, "-xzf", "-", "-C", dest], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        with open(archive, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                digest.update(chunk)
                proc.stdin.write(chunk)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # tar gave up: its message says why
    err = proc.stderr.read().decode(errors="replace").strip()
    if proc.wait() != 0:
        raise EnvCacheError("tar could not unpack %s: %s" % (archive, err[-500:] or "exit code %d" % proc.returncode))
    if digest.hexdigest() != sha256:
        raise EnvCacheError("%s has checksum %s, not the %s computed at submission"
                            % (archive, digest.hexdigest(), sha256))


def _check_sha(archive, sha256):
    found = sha256_of(archive)
    if found != sha256:
        raise EnvCacheError("%s has checksum %s, not the %s computed at submission" % (archive, found, sha256))


def _unzip(archive, sha256, dest):
    """Unpack a zip keeping Unix modes (executables) and symbolic links, as ``unzip`` does."""
    _check_sha(archive, sha256)
    real_dest = os.path.realpath(dest)
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                path = os.path.realpath(os.path.join(dest, info.filename))
                if path != real_dest and not path.startswith(real_dest + os.sep):
                    raise EnvCacheError("%s: %s is outside the archive's folder" % (archive, info.filename))
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    os.symlink(z.read(info).decode(), path)
                    continue
                z.extract(info, dest)
                if mode & 0o777 and not info.is_dir():
                    os.chmod(path, mode & 0o777)
    except (zipfile.BadZipFile, OSError) as exc:
        raise EnvCacheError("could not unpack %s: %s" % (archive, exc)) from None


def clean(cache_dir=None, max_age_days=DEFAULT_MAX_AGE_DAYS, log=None):
    """Remove environments unused for ``max_age_days`` (and old leftovers); never one in use.

    Returns the checksums removed. Safe to run from many containers at once.
    """
    log = log or (lambda msg: None)
    cache_dir = cache_dir or default_cache_dir()
    max_age = max_age_days * 86400
    now = time.time()
    removed = []
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(cache_dir, name)
        try:
            age = now - os.lstat(path).st_mtime
        except OSError:
            continue
        if name.startswith((".tmp-", ".trash-")):
            if age > LEFTOVER_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(".sum-"):
            if age > max_age:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        elif name.endswith(".lock") and age >= max_age:
            sha = name[:-len(".lock")]
            if _remove_unused(cache_dir, sha, max_age, now):
                removed.append(sha)
                log("removed the environment %s, unused for %.0f days" % (sha, age / 86400))
    return removed


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove_unused(cache_dir, sha, max_age, now):
    """Remove the environment ``sha`` if nobody holds its lock and it is still unused for
    ``max_age`` seconds once the lock is ours; True if it was removed."""
    path = os.path.join(cache_dir, sha + ".lock")
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False  # in use (an unpack happens in use too)
        raise
    try:
        if os.fstat(fd).st_ino != os.stat(path).st_ino or now - os.stat(path).st_mtime < max_age:
            return False  # replaced, or used since we looked
        env_dir = os.path.join(cache_dir, sha)
        if os.path.isdir(env_dir):
            trash = tempfile.mkdtemp(prefix=".trash-%s-" % sha, dir=cache_dir)
            os.rename(env_dir, os.path.join(trash, "env"))
            shutil.rmtree(trash, ignore_errors=True)
        for leftover in (os.path.join(cache_dir, sha + ".unpack"), path):
            _unlink(leftover)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class ShippedEnvironment:
    """The job's packed environment (``environment.archive``), made ready in the background.

    The archive arrives as a plain file (SUBM_ENV_ARCHIVE); :func:`ensure` unpacks it once
    per node while the executor registers, and the task starts with its ``bin`` first on
    PATH (:meth:`apply`). ``./environment`` links to it, as YARN's unpacked archive would be.
    """

    def __init__(self, env, workdir, log=None):
        self.log = log or (lambda msg: None)
        self.archive = os.path.abspath(env[protocol.ENV_ARCHIVE])
        self.sha256 = env.get(protocol.ENV_SHA256) or None
        self.cache_dir = env.get(protocol.ENV_CACHE) or None
        self.max_age_days = float(env.get(protocol.ENV_CACHE_DAYS) or 7)
        self.workdir = workdir
        self.path = None
        self.error = None
        self.lock_fd = None  # held open while we live: the cache's cleaner skips environments in use
        self.ready = threading.Event()
        threading.Thread(target=self._prepare, daemon=True).start()

    def _prepare(self):
        try:
            self.path, self.lock_fd, _ = ensure(self.archive, self.sha256, self.cache_dir, log=self.log)
            link = os.path.join(self.workdir, "environment")
            if not os.path.lexists(link):
                os.symlink(self.path, link)
        except Exception as exc:
            self.error = "cannot prepare the environment %s: %s" % (os.path.basename(self.archive), exc)
        finally:
            self.ready.set()
        if self.path is not None:
            try:
                clean(self.cache_dir, self.max_age_days, log=self.log)
            except Exception as exc:
                self.log("cleaning the environment cache: %s" % exc)

    def apply(self, env):
        """Wait until ready; put the environment first on the task's PATH (raises if it failed)."""
        self.ready.wait()
        if self.error:
            raise OSError(self.error)
        env["PATH"] = os.path.join(self.path, "bin") + os.pathsep + env.get("PATH", "")
        env[protocol.ENVIRONMENT] = self.path
