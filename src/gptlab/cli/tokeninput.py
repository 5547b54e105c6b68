"""Text and token arguments of the commands that read a model on a given input (eval,
heads, lens, attribute, patch): encoded and checked against the model before any work.

`--text` is the text itself (escapes as in argtypes.unescape) and `--text-file` a file
holding it, in every command. `eval` and `heads` once took a file with `--text`; a --text
that names an existing file is still read as one there, with a warning (LEGACY_TEXT_FILE)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.argtypes import TOKEN_ID_PREFIX
from gptlab.data.text import read_text
from gptlab.errors import UsageError

if TYPE_CHECKING:
    import torch


def encode_text(tokenizer, text: str, block_size: int, flag: str, min_len: int = 1
                ) -> torch.Tensor:
    """(1, T) token ids of text, or a UsageError naming the flag."""
    # start-up time: the commands' parsers import this module; torch loads when a text does
    import torch

    from gptlab.data.tokenizer import encode_checked

    return torch.tensor([encode_checked(tokenizer, text, flag, block_size, min_len)])


def token_id(tokenizer, spec: str, vocab_size: int, flag: str) -> int:
    """The id a --target-like argument names: id:N, or text that encodes to one token."""
    if spec.startswith(TOKEN_ID_PREFIX):
        try:
            value = int(spec[len(TOKEN_ID_PREFIX):])
        except ValueError:
            raise UsageError(f"{flag} {spec!r}: expected id:N with N an integer") from None
        if not 0 <= value < vocab_size:
            raise UsageError(f"{flag} {spec} is outside the vocabulary (0..{vocab_size - 1})")
        return value
    ids = tokenizer.encode(spec)
    if len(ids) != 1:
        raise UsageError(f"{flag} {spec!r} is {len(ids)} tokens, not one; give one token's "
                         f"text or {TOKEN_ID_PREFIX}N")
    return ids[0]


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """Each id's text, escaped so it prints on one line, spaces shown as ␣; ids without a
    tokenizer, <id> for one it cannot decode."""
    if tokenizer is None:
        return [str(i) for i in ids]
    labels = []
    for i in ids:
        try:
            piece = tokenizer.decode([i])
        except UsageError:
            piece = f"<{i}>"
        labels.append(repr(piece)[1:-1].replace(" ", "\u2423"))  # ␣ shows a space
    return labels


LEGACY_TEXT_FILE = ("--text FILE is deprecated: --text takes the text itself now; give "
                    "--text-file {path} (it was read as a file this time)")


def add_text_options(group: argparse._ActionsContainer, *, many: bool = False,
                     what: str = "the input") -> None:
    """--text TEXT and --text-file PATH on a group (mutually exclusive); many: each takes
    one or more, each its own document."""
    nargs = "+" if many else None
    group.add_argument("--text", type=argtypes.escaped_text, nargs=nargs, metavar="TEXT",
                       help=f"{what}, as text{' (one or more, each a document)' if many else ''}"
                            "; \\n, \\t, \\r and \\\\ stand for a newline, a tab, a "
                            "carriage return and a backslash")
    group.add_argument("--text-file", nargs=nargs, metavar="PATH",
                       help=f"{what}, read from UTF-8 text file{'s' if many else ''}"
                            f"{' (each a document)' if many else ''}")


def input_texts(args: argparse.Namespace, legacy_files: bool = False
                ) -> list[tuple[str, str]]:
    """(label, text) of each input --text or --text-file gives ([] for neither): a file's
    label is its path, a text's 'the --text'. legacy_files: a --text naming existing files
    is read as --text-file (legacy_notice then says so)."""
    texts = [t for t in _listed(args.text) if t is not None]
    files = [f for f in _listed(args.text_file) if f is not None]
    if legacy_files and legacy_text_files(args):
        texts, files = [], texts
    for path in files:
        if Path(path).is_dir():
            raise UsageError(f"--text-file {path} is a directory; give text files")
    return ([(path, read_text(path)) for path in files]
            + [("the --text", text) for text in texts])


def legacy_text_files(args: argparse.Namespace) -> list[str]:
    """The files an old-style `--text FILE` names (none unless every --text is a file)."""
    texts = [t for t in _listed(args.text) if t is not None]
    return texts if texts and all(_is_file(t) for t in texts) else []


def _is_file(text: str) -> bool:
    """Whether text names a file; a text no path can be (too long for the file system, a
    NUL) is a text, not an error."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def legacy_notice(args: argparse.Namespace, prog: str) -> None:
    """After a command that read `--text FILE` as a file has succeeded (an error stays one
    line), the deprecation warning, on stderr."""
    for path in legacy_text_files(args):
        print(f"{prog}: warning: {LEGACY_TEXT_FILE.format(path=path)}", file=sys.stderr)


def _listed(value: str | list[str] | None) -> list[str | None]:
    return value if isinstance(value, list) else [value]
