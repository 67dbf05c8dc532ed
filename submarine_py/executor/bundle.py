"""The executor as YARN ships it: one file, its modules embedded, compiled once per node and job.

Every task container starts an executor, and all of a job's executors start together, so
what each one spends before it registers is CPU the whole node pays while the gang
assembles. Two costs are the file's own:

* every localized file costs each container its share of the NodeManager's work before
  the process can start (about 0.3 s at 15 containers for 5 files, measured with plain
  skein on the rig), hence one file instead of one per module;
* Python compiles a script it runs on every start, and never caches that (the 55 kB of the
  executor and its modules: about 20 ms of CPU per container, a third of its start), hence
  the bundle's loader: it keeps the compiled code in the application's folder on the node
  (YARN's ``LOCAL_DIRS``, shared by the job's containers there and removed with the
  application), so the first container on a node compiles and the others load it.

The bundle holds :data:`SUBM_BUNDLE_ID` (a digest of the sources: the compiled code's key with
the interpreter's version), ``SUBM_EMBEDDED`` (the sources: the executor's and its
modules'), then the loader, which runs the executor's code as ``__main__``; the executor's
``_sibling`` takes its modules from ``SUBM_CODE``.
"""
from __future__ import annotations

import hashlib
from typing import Dict, Iterable

from . import main as executor

#: Runs in the container (standard library only, nothing but marshal beyond what Python has
#: loaded at start): the compiled code of every embedded source, from the node's copy when a
#: container of this job compiled it there already, else compiled here and kept (written to a
#: temporary name, then renamed: a container never reads a half-written copy).
LOADER = '''
def _subm_code():
    import marshal
    key = "subm-code-%s-%s-%x" % (SUBM_BUNDLE_ID, sys.implementation.cache_tag, sys.hexversion)
    local = os.environ.get("LOCAL_DIRS", "").split(",")[0]
    kept = os.path.join(local, key) if local else None
    if kept:
        try:
            with open(kept, "rb") as f:
                code = marshal.load(f)
            if isinstance(code, dict) and set(code) == set(SUBM_EMBEDDED):
                return code
        except (OSError, EOFError, ValueError, TypeError):
            pass
    code = {name: compile(source, "<subm bundle>/%s.py" % name, "exec")
            for name, source in SUBM_EMBEDDED.items()}
    if kept:
        tmp = "%s.%d" % (kept, os.getpid())
        try:
            with open(tmp, "wb") as f:
                marshal.dump(code, f)
            os.replace(tmp, kept)
        except OSError:
            pass  # only a cache
    return code


SUBM_CODE = _subm_code()
exec(SUBM_CODE["executor"], globals())
'''


def bundle_source(modules: Iterable[str] = executor.SIBLINGS + (executor.ENVCACHE,)) -> str:
    """The executor and ``modules`` (its siblings) as one Python file (see the module's doc)."""
    sources: Dict[str, str] = {}
    for name, path in executor.shipped_files(tuple(modules)).items():
        with open(path) as f:
            sources[name[len("subm_"):-len(".py")]] = f.read()
    digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()[:16]
    return ("#!/usr/bin/env python3\n"
            '"""submarine-py executor, with its modules (submarine_py/executor/bundle.py)."""\n'
            "import os\nimport sys\n\n"
            "SUBM_BUNDLE_ID = %r\nSUBM_EMBEDDED = %r\n%s" % (digest, sources, LOADER))
