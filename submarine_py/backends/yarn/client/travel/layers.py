"""How a venv's packages are cut into layers that travel apart (pure: no files read here).

A PyTorch venv is gigabytes, most of it in a few distributions (torch, the ``nvidia-*`` CUDA
wheels, triton, tensorflow). Shipped as one archive, any change (one small package upgraded)
re-packs, re-uploads and re-localizes all of it on every node. As layers, as a container image
travels, a change re-ships the layer it touches:

* each distribution of :data:`BIG_BYTES` or more installed: a layer of its own, named by that
  distribution alone (its name, version and the hash of its ``RECORD``);
* the other distributions together: the *rest* layer;
* after a change to those, while what changed is under :data:`DELTA_SHARE` of the rest, the rest
  layer of the last submission stays, and what is new or changed travels in a *delta* layer
  above it; the rest's files of the distributions changed or removed since are *hidden*: the
  container does not link them (``farm.py``).

Each layer holds, of its distributions, the paths of ``site-packages`` that they own alone (the
*entries*: ``torch``, ``torch-2.13.0.dist-info``; under a folder several share, such as
``nvidia/``, the sub-paths: ``nvidia/cudnn``). What no distribution owns (a venv's own
``.pth`` files, the scripts in ``bin/``) travels with the environment's small archive.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

#: A distribution this big installed travels in a layer of its own.
BIG_BYTES = 64 * 1024 * 1024
#: The changed distributions ride in a delta layer above the last rest layer while their size is
#: under this share of it; beyond it the rest is packed anew.
DELTA_SHARE = 0.25


@dataclass(frozen=True)
class Dist:
    """An installed distribution as it travels."""

    name: str
    #: ``<name> <version> <sha256 of RECORD>``: what names it (another build changes it).
    line: str
    #: Bytes installed (from RECORD's sizes).
    size: int
    #: The paths under site-packages it alone owns (see the module's docstring).
    entries: Tuple[str, ...]


@dataclass(frozen=True)
class Layer:
    """One archive of distributions."""

    #: ``site-<name>`` for a big distribution, ``site-rest``, ``site-delta``.
    kind: str
    fingerprint: str
    dists: Tuple[Dist, ...]

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.fingerprint}.tar.gz"

    @property
    def size(self) -> int:
        return sum(d.size for d in self.dists)

    @property
    def entries(self) -> Tuple[str, ...]:
        return tuple(sorted({e for d in self.dists for e in d.entries}))


@dataclass(frozen=True)
class Layering:
    """The layers of one submission, the first one's entries winning in the container, and per
    layer (by name) the entries the container leaves unlinked."""

    layers: Tuple[Layer, ...]
    hidden: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()

    def hidden_in(self, layer: Layer) -> Tuple[str, ...]:
        return dict(self.hidden).get(layer.name, ())


def owned_entries(files: Dict[str, Sequence[str]]) -> Dict[str, Tuple[str, ...]]:
    """Per distribution (name -> its files, relative to site-packages, as RECORD lists them), the
    shortest paths under which every file is its own: a top-level name where no other
    distribution has a file under it, else one level deeper, and so on."""
    owners: Dict[Tuple[str, ...], Set[str]] = {}
    for name, paths in files.items():
        for path in paths:
            parts = tuple(p for p in path.split("/") if p not in ("", "."))
            if not parts or parts[0] == "..":
                continue  # outside site-packages (bin/ scripts): the environment's archive has them
            for depth in range(1, len(parts) + 1):
                owners.setdefault(parts[:depth], set()).add(name)
    out: Dict[str, Tuple[str, ...]] = {}
    for name, paths in files.items():
        mine: Set[str] = set()
        for path in paths:
            parts = tuple(p for p in path.split("/") if p not in ("", "."))
            if not parts or parts[0] == "..":
                continue
            for depth in range(1, len(parts) + 1):
                if owners[parts[:depth]] == {name} or depth == len(parts):
                    mine.add("/".join(parts[:depth]))
                    break
        out[name] = tuple(sorted(mine))
    return out


def fingerprint(tag: str, lines: Iterable[str]) -> str:
    return hashlib.sha256("\n".join([tag, *sorted(lines)]).encode()).hexdigest()[:20]


def layering(dists: Sequence[Dist], tag: str, previous_rest: Optional[Layer] = None) -> Layering:
    """The layers for ``dists`` (``tag``: the interpreter and machine they were built for);
    ``previous_rest``: the rest layer the last submission from this environment packed, where it
    is still at hand (kept on this machine)."""
    big = [d for d in sorted(dists, key=lambda d: d.name) if d.size >= BIG_BYTES]
    small = [d for d in sorted(dists, key=lambda d: d.name) if d.size < BIG_BYTES]
    own = [Layer(f"site-{_safe(d.name)}", fingerprint(tag, [d.line]), (d,)) for d in big]
    rest = Layer("site-rest", fingerprint(tag, [d.line for d in small]), tuple(small))
    if previous_rest is not None and previous_rest.fingerprint != rest.fingerprint:
        before = {d.line for d in previous_rest.dists}
        changed = [d for d in small if d.line not in before]
        if sum(d.size for d in changed) <= DELTA_SHARE * max(previous_rest.size, 1):
            now = {d.line for d in small}
            gone = tuple(sorted({e for d in previous_rest.dists if d.line not in now for e in d.entries}))
            layers: List[Layer] = []
            if changed:
                layers.append(Layer("site-delta", fingerprint(tag, [d.line for d in changed]), tuple(changed)))
            return Layering(tuple(layers + [previous_rest] + own), ((previous_rest.name, gone),) if gone else ())
    return Layering(tuple([rest] + own) if small else tuple(own))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower())


def to_record(layer: Layer) -> dict:
    """A layer as JSON (what is kept of the last rest layer)."""
    return {"kind": layer.kind, "fingerprint": layer.fingerprint,
            "dists": [[d.name, d.line, d.size, list(d.entries)] for d in layer.dists]}


def from_record(data: dict) -> Layer:
    return Layer(kind=str(data["kind"]), fingerprint=str(data["fingerprint"]),
                 dists=tuple(Dist(str(n), str(line), int(size), tuple(entries))
                             for n, line, size, entries in data["dists"]))
