"""The task container's working directory, made ready by the executor (standard library only,
like it: see main.py).

Two things go there that YARN cannot put there itself: the job's ``files`` (laid out before
the executor registers) and the ``python`` wrappers (written before the first command).
"""
import os
import sys

if __package__:  # shipped, main.py's _sibling gives every module ``protocol`` before it runs
    from . import protocol


def lay_out_files(env, workdir):
    """On YARN: unpack the job's files archive into the working directory as real files
    (YARN localizes it as a symlink into its cache; scripts must import their siblings),
    and link each ``scheme://`` source, localized under a flat name, at its destination."""
    archive = env.get(protocol.FILES_ARCHIVE)
    if archive:
        path = os.path.join(workdir, archive)
        if os.path.exists(path):
            import tarfile

            try:
                with tarfile.open(path) as tar:
                    if hasattr(tarfile, "tar_filter"):  # Python 3.12+ (and security backports)
                        tar.extractall(workdir, filter="tar")
                    else:
                        tar.extractall(workdir)
            except tarfile.TarError as exc:
                raise ValueError("%s: %s" % (archive, exc)) from None
            os.remove(path)  # only the link to YARN's cache
    links = protocol.decode_links(env.get(protocol.FILES_LINKS))
    for dest, name in links.items():
        src, target = os.path.join(workdir, name), os.path.join(workdir, dest)
        if os.path.lexists(src) and not os.path.lexists(target):
            parent = os.path.dirname(target)
            if parent:
                os.makedirs(parent, exist_ok=True)
            os.rename(src, target)


def write_python_wrappers(env, workdir):
    """``python`` and ``python3`` for the task's command on YARN, when SUBM_PYTHON_WRAPPER says
    so: wrappers that start this executor's interpreter by the path it was started from
    (the package's interpreters.py says why wrappers, and why here rather than in the launch
    script, which put ``.subm-bin`` first on PATH)."""
    if not env.get(protocol.PYTHON_WRAPPER) or not sys.executable:
        return  # the interpreter's own folder is next on PATH
    import shlex  # once the gang is up: its imports (re) no longer delay anyone

    python = shlex.quote(sys.executable)
    folder = os.path.join(workdir, ".subm-bin")
    os.makedirs(folder, exist_ok=True)
    for name in ("python", "python3"):
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        with os.fdopen(fd, "w") as f:
            f.write('#!/bin/sh\nexec %s "$@"\n' % python)
