"""The `gptlab` command. Each subcommand lives in `gptlab.commands.<name>` and exposes
`register(subparsers)`; the parser it adds carries `func(args) -> int` as its default.

Errors a user can cause are `GptlabError`s: one line on stderr, exit 2 for bad usage or
input, 1 for other failures. Ctrl-C exits 130 without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gptlab.errors import GptlabError

# Order is the order `gptlab --help` lists them in.
COMMANDS = ["demo", "params", "prepare", "train", "sample", "convert", "heads", "lab", "bench"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gptlab",
        description="Build, count, train, sample, convert and look inside GPT-style transformers.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"gptlab.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GptlabError as exc:
        print(f"gptlab {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
