"""The `gptlab` command. Each subcommand lives in `gptlab.commands.<name>` and exposes
`register(subparsers)`; the parser it adds carries `func(args) -> int` as its default.

Exit codes (README, "Exit codes"): 0 success; 1 a failure that is not the input's fault
(the network, a full disk, a diverged run); 2 bad usage or bad input; 130 interrupted by
Ctrl-C (except `train`, which saves a checkpoint and exits 0). Errors a user can cause are
`GptlabError`s, printed as one line on stderr; an OSError that escapes a command (a full
disk, a vanished file) is printed as one line too, with exit 1.
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
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")


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
        _error(args.command, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        _error(args.command, exc)
        return 1


def _error(command: str, exc: Exception) -> None:
    print(f"gptlab {command}: error: {_one_line(str(exc))}", file=sys.stderr)


def _one_line(message: str) -> str:
    # A message may quote a path or a value that holds a line break; show it escaped.
    return message.replace("\r", "\\r").replace("\n", "\\n")


if __name__ == "__main__":
    raise SystemExit(main())
