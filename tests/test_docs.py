"""The documentation cannot drift from the program.

README.md, the site's pages (docs/, built by `make docs`) and BENCHMARKS.md show commands in
``` blocks. Every `gptlab ...` line there (typed at a `$ ` prompt, or in a block of commands
without prompts, `python -m gptlab` and `torchrun ... -m gptlab` included) parses with the
real CLI parser; one shown failing at parse time fails with the error line shown. The
cheap, deterministic ones run, and their output must hold the lines shown: `gptlab params`
(from a config alone) in the fast tier, and in the slow one `prepare` and `sample` on what
gptlab ships (the embedded plays, the `shakespeare` model). README's relative links and
images point to files that exist, every subpackage has a page in the API reference, and the
site builds with `mkdocs build --strict` (a broken link, anchor or API reference fails)
without a warning and reads offline.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gptlab.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]

# A program's own line in a shown output ("gptlab train: error: ...", "gptlab lab: http://...").
OUTPUT = re.compile(r"^gptlab [\w-]+: ")
ERROR = re.compile(r"^gptlab [\w-]+: error: ")
COMMAND = re.compile(r"^(\$ )?(gptlab |python -m gptlab |torchrun )")


@dataclass(frozen=True)
class Shown:
    """One `gptlab` command line the docs show, and the lines shown after it."""

    where: str
    argv: tuple[str, ...]  # what follows `gptlab`
    pipe: tuple[str, ...]  # `| tail -2` as ("tail", "-2"); empty without a pipe
    output: tuple[str, ...]  # up to the next command or the end of the block

    def __str__(self) -> str:
        return f"{self.where}: gptlab {shlex.join(self.argv)}"


def code_blocks(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number of the first line, lines) of every ``` block."""
    block: list[str] | None = None
    start = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            if block is None:
                block, start = [], number + 1
            else:
                yield start, block
                block = None
        elif block is not None:
            block.append(line)


def _joined(block: list[str]) -> Iterator[tuple[int, int, str]]:
    """(first index, last index, line): shell continuations (a trailing backslash) joined."""
    index = 0
    while index < len(block):
        first, line = index, block[index].rstrip()
        while line.endswith("\\") and index + 1 < len(block):
            index += 1
            line = line[:-1] + " " + block[index].strip()
        yield first, index, line
        index += 1


def _gptlab_argv(line: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(argv after `gptlab`, pipe) of a command line, None for any other line."""
    if not COMMAND.match(line):
        return None
    tokens = shlex.split(line, comments=True)
    if tokens[:1] == ["$"]:
        tokens = tokens[1:]
    if tokens[:1] == ["gptlab"]:
        rest = tokens[1:]
    elif tokens[:3] == ["python", "-m", "gptlab"]:
        rest = tokens[3:]
    elif tokens[:1] == ["torchrun"] and "gptlab" in tokens:
        at = tokens.index("gptlab")
        if tokens[at - 1] != "-m":
            return None
        rest = tokens[at + 1:]
    else:
        return None
    if "|" in rest:
        at = rest.index("|")
        return tuple(rest[:at]), tuple(rest[at + 1:])
    return tuple(rest), ()


def shown_commands() -> list[Shown]:
    shown = []
    for path in PAGES:
        for start, block in code_blocks(path):
            prompted = any(line.startswith("$ ") for line in block)
            # (first index, last index, argv and pipe or None) of each command typed
            commands = []
            for first, last, line in _joined(block):
                if prompted and not line.startswith("$ "):
                    continue  # output
                if not prompted and OUTPUT.match(line):
                    continue  # output in a block of commands without prompts
                parsed = _gptlab_argv(line)
                if parsed is not None or prompted:
                    commands.append((first, last, parsed))
            for n, (first, last, parsed) in enumerate(commands):
                if parsed is None:
                    continue  # another program's command
                end = commands[n + 1][0] if n + 1 < len(commands) else len(block)
                shown.append(Shown(f"{path.relative_to(ROOT)}:{start + first}", *parsed,
                                   tuple(block[last + 1:end])))
    return shown


SHOWN = shown_commands()


def test_the_docs_show_commands_everywhere():
    """The scan finds what it checks: commands in README, the pages and BENCHMARKS.md."""
    places = {shown.where.split(":")[0] for shown in SHOWN}
    assert {"README.md", "docs/model.md", "docs/training.md", "docs/scaling-out.md"} <= places
    assert len(SHOWN) > 60
    argvs = {shown.argv for shown in SHOWN}
    assert ("params", "gpt2") in argvs  # `$ gptlab params gpt2 | head -2`, README's tour
    assert any(shown.argv[:1] == ("train",) and "--parallel" in shown.argv for shown in SHOWN)


def _parse(argv: tuple[str, ...]) -> str | None:
    """None when argv parses, else the one error line the parser prints."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(list(argv))
    except SystemExit:
        return stderr.getvalue().strip()
    return None


def test_every_command_shown_parses():
    wrong = []
    for shown in SHOWN:
        error = _parse(shown.argv)
        if error is None:
            continue
        expected = next((line for line in shown.output if ERROR.match(line)), None)
        if error != expected:  # a usage error shown as it happens is documentation too
            wrong.append(f"{shown}\n    {error}")
    assert not wrong, "commands the docs show that gptlab does not parse:\n" + "\n".join(wrong)


def test_a_stale_command_is_caught():
    assert _parse(("train", "--preset", "shakespeare-char-cpu", "--data", "d", "--out", "r"))\
        is None
    assert "--no-such-flag" in _parse(("train", "--data", "d", "--out", "r", "--no-such-flag"))


def _piped(lines: list[str], pipe: tuple[str, ...]) -> list[str]:
    if not pipe:
        return lines
    command, count = pipe[0], int(pipe[1].lstrip("-n").lstrip("-"))
    assert command in ("head", "tail") and len(pipe) == 2, pipe
    return lines[:count] if command == "head" else lines[-count:]


def holds(actual: list[str], shown: tuple[str, ...]) -> bool:
    """Whether `actual` holds the shown lines: each run of them between `...` lines
    contiguously, the runs in order."""
    runs: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == "...":
            runs.append([])
        else:
            runs[-1].append(line.rstrip())
    at = 0
    for run in filter(None, runs):
        while at + len(run) <= len(actual) and actual[at:at + len(run)] != run:
            at += 1
        if at + len(run) > len(actual):
            return False
        at += len(run)
    return True


def test_holds_reads_elisions():
    assert holds(["a", "b", "c", "d"], ("a", "...", "c", "d"))
    assert not holds(["a", "b", "c", "d"], ("a", "c"))
    assert not holds(["a", "b"], ("b", "...", "a"))


CHEAP = [shown for shown in SHOWN if shown.argv[:1] == ("params",)]


@pytest.mark.parametrize("shown", CHEAP, ids=str)
def test_what_params_prints_is_what_the_docs_show(shown, capsys):
    main(list(shown.argv))
    captured = capsys.readouterr()
    actual = _piped(captured.out.splitlines(), shown.pipe) + captured.err.splitlines()
    actual = [line.rstrip() for line in actual]
    assert holds(actual, shown.output), (
        f"{shown} prints\n" + "\n".join(actual) + "\nand the docs show\n" + "\n".join(shown.output))


# Commands that need nothing but what gptlab ships (the embedded plays, the shipped model),
# deterministic on a CPU, and seconds long: run in an empty folder, as a reader would.
SELF_CONTAINED = {("prepare", "shakespeare"), ("sample", "shakespeare")}
RUNNABLE = [shown for shown in SHOWN if shown.argv[:2] in SELF_CONTAINED]


def test_the_self_contained_commands_are_found():
    assert {shown.argv[:2] for shown in RUNNABLE} == SELF_CONTAINED


@pytest.mark.slow
@pytest.mark.parametrize("shown", RUNNABLE, ids=str)
def test_what_self_contained_commands_print_is_what_the_docs_show(shown, tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    assert main(list(shown.argv)) == 0
    captured = capsys.readouterr()
    actual = [line.rstrip() for line in captured.out.splitlines() + captured.err.splitlines()]
    assert holds(actual, shown.output), (
        f"{shown} prints\n" + "\n".join(actual) + "\nand the docs show\n" + "\n".join(shown.output))


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_links_and_images_point_to_files():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [target.split("#")[0] for target in LINK.findall(text)
               if not re.match(r"[a-z]+:", target)]
    assert len(targets) > 10
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, missing


def test_every_subpackage_and_module_has_an_api_page():
    named = {line.split()[1] for page in (ROOT / "docs/api").glob("*.md")
             for line in page.read_text(encoding="utf-8").splitlines()
             if line.startswith("::: ")}
    package = ROOT / "src/gptlab"
    parts = {f"gptlab.{path.stem}" for path in package.glob("*.py")
             if path.stem not in ("__init__", "__main__")}
    parts |= {f"gptlab.{path.parent.name}" for path in package.glob("*/__init__.py")}
    assert not parts - named, sorted(parts - named)


@pytest.mark.slow
def test_the_site_builds_strict_without_a_warning(tmp_path):
    """`make docs`'s build: mkdocs --strict fails on a broken link, anchor or reference;
    any other warning fails here."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    assert "WARNING" not in log, log
    assert (tmp_path / "site/api/training/index.html").is_file()
    assert "gptlab.training.run.train" in (tmp_path / "site/api/training/index.html").read_text()
    assert (tmp_path / "site/bench/results/scaling.png").is_file()  # BENCHMARKS.md's figure
    training = (tmp_path / "site/training/index.html").read_text()
    assert 'href="../api/training/#gptlab.training.footprint"' in training  # the hook's link
    # Offline, as the lab: nothing fetched from elsewhere (no web fonts, scripts or styles).
    for page in (tmp_path / "site").rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'src="https?:|<link[^>]+href="https?:', html), page
