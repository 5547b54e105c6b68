"""The `gptlab` command. Each subcommand lives in `gptlab.cli.<name>` and exposes
`register(subparsers)`; the parser it adds carries `func(args) -> int` as its default.

`gptlab --help`, `gptlab COMMAND --help` and usage errors answer without importing torch:
registering a command imports only light modules (argparse, the configs, the presets), and
each command's `run(args)` imports the heavy library parts itself.

Exit codes (README, "Exit codes"): 0 success; 1 a failure that is not the input's fault
(the network, a full disk, a diverged run); 2 bad usage or bad input; 130 interrupted by
Ctrl-C, 143 by SIGTERM (gptlab.stopping: every phase stops at once, torch's own import
included; `train` stopped while training saves a checkpoint and exits 0).
Errors a user can cause are `GptlabError`s, printed as one line on stderr; an OSError that
escapes a command is printed as one line too: exit 2 when it blames the path (too long, not
a directory, ...), else 1.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from gptlab import stopping
from gptlab.errors import GptlabError, SettingError
from gptlab.files.atomic import is_bad_path
from gptlab.version import __version__

# Order is the order `gptlab --help` lists them in.
COMMANDS = ["demo", "params", "prepare", "train", "eval", "sample", "convert", "heads", "lens",
            "attribute", "patch", "experiment", "runs", "lab", "serve", "probe", "harness"]
INTERRUPTED = stopping.exit_code(None)  # 128 + SIGINT, as a shell reports a Ctrl-C
# The commands that write a folder of figures (gptlab.files.kinds.FIGURES): rewritten by any
# of them without --force, which they do not take.
FIGURE_COMMANDS = ("heads", "lens", "patch", "attribute")


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors and, at the end of --help, `examples`:
    commands shown as they are typed (tests/cli/test_main.py parses each one)."""

    def __init__(self, *args, examples: Sequence[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.examples = list(examples)

    def format_help(self) -> str:
        text = super().format_help()
        if self.examples:  # as typed: not re-wrapped as the description is
            text += "\nexamples:\n" + "".join(f"  {line}\n" for line in self.examples)
        return text

    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, but arguments no parser took are named with the command they were
        given to (argparse says `gptlab: error:`, whichever command it was)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            note = ""
            if "--force" in extras:
                note = f" ({prog} has no --force" + (
                    ": it writes a folder of its own figures again without one)"
                    if command in FIGURE_COMMANDS else ")")
            self.exit(2, f"{prog}: error: unrecognized arguments: "
                         f"{_one_line(' '.join(extras))}{note}\n")
        return parsed

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):
        # `--prompt=--`: Python before 3.12 drops the "--" and hands the flag an empty list
        # (a TypeError or AttributeError later); the value is the string "--".
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gptlab",
        description="Build, count, train, sample, convert and look inside GPT-style transformers.",
    )
    parser.add_argument("--version", action="version", version=f"gptlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"gptlab.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with stopping.raise_on_signals():  # SIGTERM too: one line, exit 143
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:  # a Ctrl-C anywhere, parsing included, is one line and exit 130
        for stream in (sys.stdout, sys.stderr):
            # A path from argv that is not UTF-8 reaches us as lone surrogates; printing it
            # back ("wrote ...", an error naming it) must not raise UnicodeEncodeError.
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version (0) or a usage error (2), printed
            return exc.code if isinstance(exc.code, int) else 2
        return run_command(args.func, args, f"gptlab {args.command}",
                           flags=setting_flags(subcommand(parser, args.command)))
    except KeyboardInterrupt as exc:
        return _interrupted(exc)


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace,
                prog: str, flags: dict[str, str] | None = None) -> int:
    """func(args)'s exit code, with every failure it may raise, the Ctrl-C during its own
    imports included, turned into one line on stderr (prog: error: ...) and its exit code.
    A SettingError names the library's settings (learning_rate); `flags` maps those the
    command has flags for to the flags (--learning-rate), which its message then says.

    A command whose stop leaves something to say (what it kept, how to go on) sets
    `on_interrupt` among its parser's defaults: on_interrupt(args, exc) -> the lines said
    after "interrupted" (None: nothing)."""
    try:
        return int(func(args) or 0)
    except GptlabError as exc:
        _error(prog, exc.said_with(flags or {}) if isinstance(exc, SettingError) else str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        code = _interrupted(exc)
        after = getattr(args, "on_interrupt", None)
        lines = after(args, exc) if after is not None else None
        if lines:
            print(lines, file=sys.stderr)
        return code
    except BrokenPipeError:
        return 0
    except OSError as exc:  # one no command foresaw: a path it could not use, a full disk
        where = f"{exc.filename}: " if exc.filename is not None else ""
        _error(prog, f"{where}{exc.strerror or exc}")
        return 2 if is_bad_path(exc) else 1


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def setting_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """{parameter name: flag} for each of parser's --options, the name in the library's
    spelling (learning_rate: --learning-rate; --no-X options left out)."""
    flags = {}
    for action in parser._actions:
        for option in action.option_strings:
            name = option.lstrip("-").replace("-", "_")
            if option.startswith("--") and not name.startswith("no_"):
                flags.setdefault(name, option)
    return flags


@contextmanager
def warned(prog: str) -> Iterator[None]:
    """Warnings the library gives inside (a context past block_size, a prompt cropped) as
    one line each on stderr, `prog: warning: ...`, each message once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"{prog}: warning: {_one_line(message)}", file=sys.stderr)


def _interrupted(exc: KeyboardInterrupt) -> int:
    """One line and 130 (a Ctrl-C), or 143 for a SIGTERM (gptlab.stopping.Interrupted)."""
    code = getattr(exc, "exit_code", INTERRUPTED)
    print("interrupted" if code == INTERRUPTED else f"interrupted ({exc})", file=sys.stderr)
    return code


def _error(prog: str, exc: Exception | str) -> None:
    print(f"{prog}: error: {_one_line(str(exc))}", file=sys.stderr)


def _one_line(message: str) -> str:
    # A message may quote a path or a value that holds a line break; show it escaped.
    return message.replace("\r", "\\r").replace("\n", "\\n")


if __name__ == "__main__":
    raise SystemExit(main())
