"""What the README and docs/ show still works: every `subm` command parses against the real
command line, every repository path a command names exists, every relative link leads to a
file (and, with `#anchor`, to a heading), and the cheap commands run for real."""
from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Set, Tuple

import click
import pytest

from submarine_py.cli import main

REPO = Path(__file__).resolve().parent.parent
#: The pages whose commands are checked: the README, docs/ and the cluster admin's README.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "hadoop-conf" / "README.md"]
#: ... and whose relative links are checked (bench/README.md only points to docs/).
LINKED = [*PAGES, REPO / "bench" / "README.md"]
#: Top-level folders of the repository: a command argument starting with one names a path in it.
REPO_DIRS = ("examples", "scripts", "bench", "hadoop-conf", "tests", "docs", "submarine_py")
#: Fenced blocks whose lines are shell commands.
SHELL_FENCES = {"sh", "bash", "console", "shell"}
#: Words that start a command line in an indented (4-space) block.
COMMAND_START = re.compile(r"^((subm|\.venv/bin/subm|python3?|source|\.)(\s|$)|bash scripts/)")
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


class Command(NamedTuple):
    page: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def _prose_and_fences(page: Path) -> Iterator[Tuple[int, str, str]]:
    """(line number, fence language or None for prose, line) for every line of a page."""
    lang = None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            lang = None if lang is not None else (fence.group(2) or "")
            continue
        yield number, lang, line


def _command_lines(page: Path) -> Iterator[Tuple[int, str]]:
    """The physical lines of a page that hold commands: every line of a fenced sh/bash/shell
    block, the `$ ` lines of a console block, and 4-space-indented prose lines that start like
    a command (after any VAR=value); each with the lines that continue it."""
    going_on = False
    for number, lang, line in _prose_and_fences(page):
        text = line.strip()
        if going_on:
            pass
        elif lang is None:
            if not (line.startswith("    ") and COMMAND_START.match(_without_assignments(text))):
                continue
        elif lang == "console":
            if not text.startswith("$ "):
                continue  # the output
            text = text[2:]
        elif lang not in SHELL_FENCES:
            continue
        going_on = text.endswith("\\")
        yield number, text


def _without_assignments(text: str) -> str:
    return re.sub(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+", "", text)


def _commands(page: Path) -> Iterator[Command]:
    """A page's command lines, joined where a backslash or an open quote continues them."""
    pending, start = "", 0
    for number, text in _command_lines(page):
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        pending += text
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote left open: the command goes on (python3 -c '...)
            pending += "\n"
            continue
        if pending.strip():
            yield Command(_rel(page), start, pending.strip())
        pending = ""
    if pending.strip():
        yield Command(_rel(page), start, pending.strip())


def _simple_commands(command: Command) -> List[List[str]]:
    """A command line as its simple commands (split at && || ; |), comments and leading
    VAR=value assignments dropped."""
    lexer = shlex.shlex(command.text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    out: List[List[str]] = [[]]
    for word in lexer:
        if word and set(word) <= set(";&|"):
            out.append([])
        else:
            out[-1].append(word)
    simple = []
    for argv in out:
        while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            argv = argv[1:]
        if argv:
            simple.append(argv)
    return simple


ALL_COMMANDS = [c for page in PAGES for c in _commands(page)]
SUBM_COMMANDS = [(c, argv[1:]) for c in ALL_COMMANDS for argv in _simple_commands(c)
                 if argv[0] == "subm" or argv[0].endswith("/subm")]


def _relaxed(group: click.Group) -> click.Group:
    """A copy of the CLI that takes any value for an option or argument: the docs write
    placeholders (`APP_ID`, `local|yarn`, `N`), and what is checked here is the shape of the
    command (subcommands, option names, arity, required arguments), not the values."""
    group = copy.deepcopy(group)
    for command in [group, *group.commands.values()]:
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            param.type = click.STRING
            param.envvar = None
    return group


RELAXED = _relaxed(main)


def _parse(argv: List[str]) -> None:
    """Parse `subm ARGV` as click would, raising click's UsageError where it does not."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            ctx = RELAXED.make_context("subm", list(argv))
        except click.exceptions.Exit:  # --help, --version
            return
        # click 8.2 keeps the subcommand in `_protected_args`, older ones in `protected_args`.
        protected = ctx.__dict__.get("_protected_args", ctx.__dict__.get("protected_args", []))
        name, command, args = RELAXED.resolve_command(ctx, [*protected, *ctx.args])
        assert command is not None, f"no subcommand {name!r}"
        try:
            command.make_context(name, args, parent=ctx)
        except click.exceptions.Exit:
            return


def _repo_paths(argv: List[str]) -> Iterator[str]:
    for word in argv:
        path = word[2:] if word.startswith("./") else word
        if path.split("/", 1)[0] in REPO_DIRS and "/" in path:
            yield path


# ------------------------------------------------------------------------ commands (unit)

@pytest.mark.unit
def test_the_docs_show_commands_to_check():
    pages = {c.page for c, _ in SUBM_COMMANDS}
    assert {"README.md", "docs/install.md", "docs/jobfile.md"} <= pages
    assert any(argv[:1] == ["run"] for _, argv in SUBM_COMMANDS)


@pytest.mark.unit
@pytest.mark.parametrize("command, argv", SUBM_COMMANDS, ids=[str(c) for c, _ in SUBM_COMMANDS])
def test_every_subm_command_shown_parses_against_the_cli(command: Command, argv: List[str]):
    try:
        _parse(argv)
    except click.UsageError as exc:
        pytest.fail(f"{command}: {exc.format_message()}")


@pytest.mark.unit
@pytest.mark.parametrize("argv", [["run", "job.yaml", "--frobnicate"], ["frobnicate"], ["status"],
                                  ["status", "a", "b"], ["logs", "A", "--index"]])
def test_the_parse_check_catches_what_click_refuses(argv: List[str]):
    with pytest.raises(click.UsageError):
        _parse(argv)


@pytest.mark.unit
@pytest.mark.parametrize("command", ALL_COMMANDS, ids=[str(c) for c in ALL_COMMANDS])
def test_every_repository_path_a_command_names_exists(command: Command):
    for argv in _simple_commands(command):
        for path in _repo_paths(argv):
            assert (REPO / path).exists(), f"{command}: {path} does not exist"


@pytest.mark.unit
@pytest.mark.parametrize("page", ["README.md", "docs/cli.md"])
def test_the_command_tables_name_every_command_and_only_real_options(page: str):
    text = (REPO / page).read_text()
    rows = re.findall(r"^\| `subm ([\w-]+)([^|]*(?:\\\|[^|]*)*)` \|", text, re.M)
    assert sorted(name for name, _ in rows) == sorted(main.commands)
    for name, rest in rows:
        known = {o for p in main.commands[name].params for o in [*p.opts, *p.secondary_opts]}
        named = set(re.findall(r"--[a-z][\w-]*", rest))
        assert named <= known, f"{page}: subm {name} has no {sorted(named - known)}"


@pytest.mark.unit
def test_the_readme_fits_a_screen_or_two():
    assert len((REPO / "README.md").read_bytes()) <= 10 * 1024


# ------------------------------------------------------------------------ Python examples (unit)

def _python_blocks(page: Path) -> Iterator[Tuple[int, str]]:
    """(first line, code) of every fenced python block of a page."""
    block: List[str] = []
    start, inside = 0, False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence and not inside and fence.group(2) in ("python", "py"):
            block, start, inside = [], number + 1, True
        elif fence and inside:
            yield start, "\n".join(block)
            inside = False
        elif inside:
            block.append(line)


PYTHON_EXAMPLES = [(_rel(page), number, code) for page in PAGES for number, code in _python_blocks(page)]


@pytest.mark.unit
def test_the_python_api_page_shows_python():
    assert any(page == "docs/python-api.md" for page, _, _ in PYTHON_EXAMPLES)


@pytest.mark.unit
@pytest.mark.parametrize("page, line, code", PYTHON_EXAMPLES, ids=[f"{p}:{n}" for p, n, _ in PYTHON_EXAMPLES])
def test_every_python_example_compiles_and_calls_the_package_as_it_is(page: str, line: int, code: str):
    """Each compiles; each name imported from submarine_py exists, and each call of one binds to
    its signature (how many positional arguments, which keywords): what the example runs, short
    of a cluster. (Other pages' examples are a user's program: compiled only.)"""
    import ast
    import importlib
    import inspect

    tree = ast.parse(code, f"{page}:{line}")
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "submarine_py":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{page}:{line}: {node.module} has no {alias.name}"
                imported[alias.asname or alias.name] = getattr(module, alias.name)
    if page == "docs/python-api.md":
        assert imported, f"{page}:{line}: the example imports nothing from submarine_py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and callable(imported.get(node.func.id)):
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            signature = inspect.signature(imported[node.func.id])
            try:
                signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
            except TypeError as exc:
                pytest.fail(f"{page}:{line + node.lineno - 1}: {node.func.id}(...): {exc}")


# ------------------------------------------------------------------------ links (unit)

def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: links reduced to their text, lower case, punctuation
    dropped (letters, digits, '_', '-' and spaces stay), spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> Set[str]:
    seen: Dict[str, int] = {}
    out = set()
    for _, lang, line in _prose_and_fences(page):
        heading = HEADING.match(line) if lang is None else None
        if heading:
            slug = github_slug(heading.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> Iterator[Tuple[int, str]]:
    for number, lang, line in _prose_and_fences(page):
        if lang is None:
            # code spans dropped first: `[x](y)` in code is no link; [`x`](y) still is
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                yield number, target


@pytest.mark.unit
def test_github_slugs():
    assert github_slug("Shared folder and checkpoints") == "shared-folder-and-checkpoints"
    assert github_slug("`gang_startup.py`: gang start-up and recovery on YARN") == \
        "gang_startuppy-gang-start-up-and-recovery-on-yarn"
    assert github_slug("2026-11-23: the archive on the cluster's filesystem") == \
        "2026-11-23-the-archive-on-the-clusters-filesystem"
    assert github_slug("`--output json`") == "--output-json"


@pytest.mark.unit
@pytest.mark.parametrize("page", LINKED, ids=[_rel(p) for p in LINKED])
def test_every_relative_link_leads_to_a_file_and_heading(page: Path):
    problems = []
    for number, target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{_rel(page)}:{number}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{_rel(page)}:{number}: {target}: no heading #{anchor} in {_rel(dest)}")
    assert not problems, "\n".join(problems)


@pytest.mark.unit
def test_the_docs_link_to_each_other():
    linked = {(page.parent / t.partition("#")[0]).resolve() for page in PAGES for _, t in _links(page)}
    for page in (REPO / "docs").glob("*.md"):
        assert page.resolve() in linked, f"nothing links to {_rel(page)}"


# ------------------------------------------------------------------------ commands that run (local)

def _subm(*argv: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HADOOP_CONF_DIR", "SUBM_BACKEND", "SUBM_OUTPUT", "SUBM_YARN_RM_URL")}
    env.update(SUBM_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "submarine_py.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.local
def test_help_lists_every_command(tmp_path):
    out = _ok(_subm("--help", cwd=tmp_path, home=tmp_path / "home"))
    for name in main.commands:
        assert name in out


@pytest.mark.local
@pytest.mark.parametrize("example", sorted(p.parent.name for p in (REPO / "examples").glob("*/job.yaml")))
def test_every_example_validates(tmp_path, example):
    _ok(_subm("validate", str(REPO / "examples" / example / "job.yaml"), "--backend", "local",
              cwd=tmp_path, home=tmp_path / "home"))


@pytest.mark.local
def test_the_readmes_job_file_validates(tmp_path):
    job = re.search(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    (tmp_path / "job.yaml").write_text(job)
    (tmp_path / "train.py").write_text("print('hello')\n")
    out = _ok(_subm("validate", "job.yaml", "--backend", "local", "--output", "json",
                    cwd=tmp_path, home=tmp_path / "home"))
    assert '"MASTER_ADDR"' in out


@pytest.mark.local
def test_init_writes_a_job_that_validates(tmp_path):
    home = tmp_path / "home"
    _ok(_subm("init", cwd=tmp_path, home=home))
    assert (tmp_path / "job.yaml").is_file() and (tmp_path / "train.py").is_file()
    _ok(_subm("validate", "job.yaml", "--backend", "local", cwd=tmp_path, home=home))


@pytest.mark.local
def test_the_hadoop_conf_command_shown_writes_the_files(tmp_path):
    shown = [argv for c, argv in SUBM_COMMANDS if argv[:1] == ["hadoop-conf"]]
    assert shown, "the docs show no `subm hadoop-conf` command"
    _ok(_subm(*shown[0], cwd=tmp_path, home=tmp_path / "home"))
    out = tmp_path / shown[0][1]
    assert {p.name for p in out.iterdir()} >= {"yarn-site.xml", "resource-types.xml",
                                               "capacity-scheduler.xml", "container-executor.cfg"}
