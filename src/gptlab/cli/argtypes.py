"""Argument types that several subcommands share. A bad value is an argparse error: one
line naming the flag, exit 2."""

from __future__ import annotations

import argparse
import math
import re

from gptlab.errors import UsageError
from gptlab.model.config import rope_scaling_from_spec

SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes an unsigned 64-bit seed

TOKEN_ID_PREFIX = "id:"  # --target id:42 names a token by its id (see cli.tokeninput)

# The help of every command's MODEL argument: what gptlab.load takes.
MODEL_HELP = ("anything gptlab.load takes: a run or model directory, RUN/best, the shipped "
              "model's name (shakespeare), a Hugging Face directory or hub name")

# The escapes --prompt and --stop understand; any other backslash stays as typed.
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def int_in(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high] (no upper bound when high is None)."""
    what = f"between {low} and {high}" if high is not None else f">= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


def finite_float(text: str) -> float:
    """An argparse type: a float that is a finite number (1e400 is an overflow, not a
    value; nan and inf are refused too)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**64 - 1, got {text}")
    return value


def unescape(text: str) -> str:
    r"""\n, \t, \r and \\ in text become a newline, a tab, a carriage return and one
    backslash; every other character, backslashes before anything else included, stays."""
    return re.sub(r"\\([ntr\\])", lambda m: ESCAPES[m.group(1)], text)


def nonempty_escaped_text(text: str) -> str:
    """escaped_text, refusing the empty string (a --stop '' would match everywhere)."""
    if text == "":
        raise argparse.ArgumentTypeError("must not be empty")
    return escaped_text(text)


def escaped_text(text: str) -> str:
    """An argparse type: `text` with its escapes decoded (see unescape). Bytes that are not
    UTF-8 (Python hands them over as lone surrogates) are refused: no tokenizer has them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise argparse.ArgumentTypeError(
            f"not UTF-8 text: byte 0x{ord(text[exc.start]) - 0xDC00:02x} at offset {exc.start}"
        ) from None
    return unescape(text)


def rope_scaling(text: str) -> str:
    """An argparse type: a RoPE scaling rule KIND:FACTOR (linear:4, ntk:4, yarn:4,
    dynamic:4), checked as gptlab.model.config.rope_scaling_from_spec reads it; the text
    itself is passed on (the training length comes from the model, once it is loaded)."""
    try:
        rope_scaling_from_spec(text, 1)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def checked(check):
    """An argparse type from a check that raises ValueError with one line (gptlab.web.guard's
    check_token, check_host_name)."""
    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse
