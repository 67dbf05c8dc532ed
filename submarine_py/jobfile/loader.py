"""Reading a job file: Jinja2 rendering, then safe, bounded YAML loading."""
from __future__ import annotations

import os
import re
import stat
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import jinja2
import jinja2.meta
import jinja2.sandbox
import yaml

from ..errors import SpecError
from ..templating import split_set_options
from .model import JobSpec
from .validate import Rules, spec_from_dict


#: A job file larger than this is refused before rendering.
MAX_FILE_BYTES = 1 << 20
#: A YAML document that expands (through aliases) to more nodes than this is refused.
MAX_YAML_NODES = 100_000


def parse_set_options(pairs: Iterable[str]) -> Dict[str, Any]:
    """Turn ``--set key=value`` options into template variables.

    Values are read as YAML scalars, so ``--set epochs=3`` gives the integer 3
    and ``--set lr=0.1`` a float (numbers still render as written: ``0123``
    stays ``0123``); ``true``/``false`` give booleans; anything else stays a string,
    and lands in the job file as (part of) one YAML scalar whatever it contains
    (newlines, ``:``, ``#``, brackets): a value never adds keys (see :func:`load_job`).
    """
    out: Dict[str, Any] = {}
    for key, raw in split_set_options(pairs, identifiers=True):
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, (dict, list, str)) or value is None:
            value = _SetStr(raw if not isinstance(value, str) or "\n" in raw else value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = _typed(value, raw.strip())
        out[key] = value
    return out


class _SetStr(str):
    """A string given with ``--set``: rendered through a placeholder, so it stays one scalar."""


#: Placeholders for ``--set`` strings while the rendered job is parsed (private-use characters,
#: which YAML treats as ordinary text and no one types).
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_MARK = re.compile(f"{_MARK_OPEN}([0-9]+){_MARK_CLOSE}")
_LINE_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")


class _AsTyped:
    """A number from ``--set`` that renders as typed and computes as a number:
    ``--set run=0123`` renders ``0123`` (not YAML 1.1's octal 83), ``1.10`` renders ``1.10``."""

    text = ""

    def __str__(self) -> str:
        return self.text


class _Int(_AsTyped, int):
    pass


class _Float(_AsTyped, float):
    pass


def _typed(number: Any, text: str) -> Any:
    obj = (_Int if isinstance(number, int) else _Float)(number)
    obj.text = text
    return obj


def render_template(text: str, variables: Mapping[str, Any], name: str = "job.yaml",
                    placeholders: Optional[List[str]] = None) -> str:
    """Render a job file as a sandboxed Jinja2 template.

    Undefined variables are errors unless the template gives a ``default``.
    With ``placeholders`` (a list to fill), every ``--set`` string printed by
    ``{{ ... }}`` is rendered as a placeholder instead, its value appended to
    the list: :func:`load_yaml` puts values back inside the scalars they landed in.
    """

    def finalize(value: Any) -> Any:
        if placeholders is not None and isinstance(value, _SetStr):
            placeholders.append(str(value))
            return f"{_MARK_OPEN}{len(placeholders) - 1}{_MARK_CLOSE}"
        return value

    env = _BoundedSandbox(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
                          finalize=finalize)
    env.globals["env"] = _EnvLookup()
    try:
        rendered = env.from_string(text).render(**dict(variables))
    except jinja2.UndefinedError as exc:
        raise SpecError([("template", f"{exc.message} in {name}; {_undefined_hint(exc.message or '')}")]) from None
    except jinja2.TemplateSyntaxError as exc:
        raise SpecError([("template", f"{name} line {exc.lineno}: {exc.message}")]) from None
    except jinja2.TemplateError as exc:
        raise SpecError([("template", f"{name}: {exc}")]) from None
    except (ArithmeticError, TypeError, ValueError, RecursionError, MemoryError) as exc:
        # e.g. range() over the sandbox's limit, {{ 1 / 0 }}, {{ 'a' - 1 }}
        raise SpecError([("template", f"{name}: {exc}")]) from None
    _check_used(env, text, variables, name)
    return rendered


def _check_used(env: jinja2.Environment, text: str, variables: Mapping[str, Any], name: str) -> None:
    """A ``--set`` variable the job file never reads is a typo (``--set epoch=3`` for
    ``epochs``) that would otherwise pass silently; name it and the ones the file does read."""
    if not variables:
        return
    used = jinja2.meta.find_undeclared_variables(env.parse(text)) - {"env"}
    unused = sorted(set(variables) - used)
    if unused:
        reads = f"it reads {', '.join(sorted(used))}" if used else "it has no template variables"
        raise SpecError([("--set", f"{name} does not use the variable {k!r}; {reads}") for k in unused])


def _undefined_hint(message: str) -> str:
    """How to give the undefined variable named in Jinja2's message a value."""
    m = re.match(r"^'([A-Za-z_][A-Za-z0-9_.]*)' is undefined", message)
    var = m.group(1) if m else "NAME"
    if var.startswith("env."):
        env_var = var[4:]
        return (f"set the environment variable {env_var} or give it a default: "
                f"{{{{ env('{env_var}', 'VALUE') }}}}")
    if "." in var:
        return "check the attribute's name"
    return f"pass it with --set {var}=VALUE or give it a default: {{{{ {var} | default(VALUE) }}}}"


class _BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """The sandbox, plus bounds on ``*`` and ``**`` so a template cannot build huge values."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        if (operator == "**" and isinstance(left, int) and isinstance(right, int)
                and abs(left) > 1 and right > 0 and abs(left).bit_length() * right > 65536):
            raise ValueError("a power (**) too large for a job file")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and _is_number(n) and len(seq) * n > MAX_FILE_BYTES:
                    raise ValueError("a repetition (*) larger than a job file may be")
        return super().call_binop(context, operator, left, right)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _EnvLookup:
    """``{{ env.HOME }}`` or ``{{ env('NAME', 'fallback') }}`` in templates."""

    # Looked up by the sandbox before calling ``env(...)``; class attributes so that
    # ``__getattr__`` (environment variables) does not answer for them.
    unsafe_callable = False
    alters_data = False

    def __getattr__(self, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in os.environ:
            return jinja2.StrictUndefined(name=f"env.{name}")  # type: ignore[return-value]
        return os.environ[name]

    def __call__(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return os.environ.get(name, default)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader (no object tags) that refuses alias bombs before constructing,
    and puts ``--set`` values back in place of their placeholders."""

    placeholders: Sequence[str] = ()

    def construct_document(self, node):  # type: ignore[override]
        _check_expanded_size(node)
        if self.placeholders:
            self._fill(node, set())
        return super().construct_document(node)

    def _fill(self, node: yaml.Node, seen: set) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if _MARK_OPEN not in node.value:
                return
            whole = _MARK.fullmatch(node.value)
            value = _MARK.sub(lambda m: self._value(int(m.group(1))), node.value)
            if whole and node.style is None and not any(b in value for b in _LINE_BREAKS):
                # `epochs: {{ n }}` with a one-line value: typed as YAML would type it there.
                node.tag = self.resolve(yaml.ScalarNode, value, (True, False))
            else:
                node.tag = "tag:yaml.org,2002:str"
            node.value = value
        elif isinstance(node, yaml.SequenceNode):
            for child in node.value:
                self._fill(child, seen)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                self._fill(k, seen)
                self._fill(v, seen)

    def _value(self, i: int) -> str:
        return self.placeholders[i] if i < len(self.placeholders) else ""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        # PyYAML keeps the last of duplicate keys silently; a spec with two `worker:` is a mistake.
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found duplicate key {key_node.value!r}", key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: yaml.Node) -> None:
    memo: Dict[int, int] = {}
    active: set = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:  # recursive structure
            raise SpecError([("", "the YAML refers to itself through an alias; recursive documents are not allowed")])
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child)
                if total > MAX_YAML_NODES:
                    break
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > MAX_YAML_NODES:
                    break
        active.discard(key)
        memo[key] = total
        if total > MAX_YAML_NODES:
            raise SpecError([("", f"the YAML expands to more than {MAX_YAML_NODES} nodes "
                                  "(an alias bomb?); refusing to load it")])
        return total

    size(root)


def load_yaml(text: str, name: str = "job.yaml", placeholders: Sequence[str] = ()) -> Any:
    """Load one YAML document safely: no object tags, bounded alias expansion;
    ``placeholders`` are the values :func:`render_template` left placeholders for."""

    class Loader(_BoundedLoader):
        pass

    Loader.placeholders = tuple(placeholders)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        hint = " (YAML indents with spaces, not tabs)" if "'\\t'" in str(exc.problem) else ""
        if "another document" in str(exc.problem):
            hint = " (a job file is one YAML document: no second '---')"
        raise SpecError([("", f"{name} is not valid YAML{where}: {exc.problem}{hint}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([("", f"{name} is not valid YAML: {exc}")]) from None
    except RecursionError:
        raise SpecError([("", f"{name} nests too deeply")]) from None


def load_job(path: str, variables: Optional[Mapping[str, Any]] = None, rules: Optional[Rules] = None) -> JobSpec:
    """Read, render and validate a job file; returns a :class:`JobSpec`. ``rules``: a backend's
    own (``Backend.check``), reported with the job file's problems (see ``spec_from_dict``)."""
    text = read_job_file(path)
    name = os.path.basename(path)
    placeholders: List[str] = []
    rendered = render_template(text, variables or {}, name=name, placeholders=placeholders)
    data = load_yaml(rendered, name=name, placeholders=placeholders)
    if data is None:
        raise SpecError([("", f"the job file must be a YAML mapping, got None: {path} is empty")])
    return spec_from_dict(data, base_dir=os.path.dirname(os.path.abspath(path)), rules=rules)


def read_job_file(path: str) -> str:
    """The text of a job file: a regular, readable UTF-8 file (a leading BOM is dropped) of
    at most :data:`MAX_FILE_BYTES`. A directory, FIFO or device is refused before opening,
    so ``subm validate /dev/stdin``-like paths never block."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise SpecError([("", f"{path} is a directory, not a job file")])
        if not stat.S_ISREG(st.st_mode):
            raise SpecError([("", f"{path} is not a regular file")])
        if st.st_size > MAX_FILE_BYTES:
            raise SpecError([("", f"{path} is {st.st_size} bytes; job files are limited to {MAX_FILE_BYTES}")])
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError([("", f"cannot read {path}: {exc.strerror or exc}")]) from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError([("", f"{path} is larger than {MAX_FILE_BYTES} bytes, the limit for job files")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise SpecError([("", f"{path} is not UTF-8 text (byte {data[exc.start]:#04x} on line {line})")]) from None
