"""The `gptlab` command. Each subcommand lives in `gptlab.cli.<name>` and exposes
`register(subparsers)`; the parser it adds carries `func(args) -> int` as its default.

`gptlab --help`, `gptlab COMMAND --help` and usage errors answer without importing torch:
registering a command imports only light modules (argparse, the configs, the presets), and
each command's `run(args)` imports the heavy library parts itself.

Exit codes (README, "Exit codes"): 0 success; 1 a failure that is not the input's fault
(the network, a full disk, a diverged run); 2 bad usage or bad input; 130 interrupted by
Ctrl-C (except `train`, which saves a checkpoint and exits 0), torch's own import included.
Errors a user can cause are `GptlabError`s, printed as one line on stderr; an OSError that
escapes a command is printed as one line too: exit 2 when it blames the path (too long, not
a directory, ...), else 1.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
from collections.abc import Callable, Sequence

from gptlab import __version__
from gptlab.errors import GptlabError
from gptlab.files.atomic import is_bad_path

# Order is the order `gptlab --help` lists them in.
COMMANDS = ["demo", "params", "prepare", "train", "eval", "sample", "convert", "heads", "lens",
            "attribute", "patch", "runs", "lab"]
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")

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
    try:  # a Ctrl-C anywhere, parsing included, is one line and exit 130
        for stream in (sys.stdout, sys.stderr):
            # A path from argv that is not UTF-8 reaches us as lone surrogates; printing it
            # back ("wrote ...", an error naming it) must not raise UnicodeEncodeError.
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version (0) or a usage error (2), printed
            return exc.code if isinstance(exc.code, int) else 2
        return run_command(args.func, args, f"gptlab {args.command}")
    except KeyboardInterrupt:
        return _interrupted()


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace,
                prog: str) -> int:
    """func(args)'s exit code, with every failure it may raise, the Ctrl-C during its own
    imports included, turned into one line on stderr (prog: error: ...) and its exit code."""
    try:
        return int(func(args) or 0)
    except GptlabError as exc:
        _error(prog, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:
        return 0
    except OSError as exc:  # one no command foresaw: a path it could not use, a full disk
        where = f"{exc.filename}: " if exc.filename is not None else ""
        _error(prog, f"{where}{exc.strerror or exc}")
        return 2 if is_bad_path(exc) else 1


def _interrupted() -> int:
    print("interrupted", file=sys.stderr)
    return INTERRUPTED


def _error(prog: str, exc: Exception | str) -> None:
    print(f"{prog}: error: {_one_line(str(exc))}", file=sys.stderr)


def _one_line(message: str) -> str:
    # A message may quote a path or a value that holds a line break; show it escaped.
    return message.replace("\r", "\\r").replace("\n", "\\n")


if __name__ == "__main__":
    raise SystemExit(main())
