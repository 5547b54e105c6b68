"""Synthetic data: Dyck-2, balanced sequences of two kinds of brackets with their depth
bounded, on which a small model is asked to predict the next symbol (the chapter's claim
that some heads "track bracket matching" is tried on it).

The text is a run of words, each a balanced string over "()[]" followed by a newline, the
same text for the same seed. A word is drawn one symbol at a time: an opening bracket (of
either kind, at even odds) or the closing bracket that the innermost open one needs, at even
odds where both are allowed; an opening only while the depth stays within max_depth and the
word can still close in the length left, a closing only while a bracket is open. So the next
symbol's kind is never a guess once a closing bracket comes: it is the one that matches the
most recent unmatched opening bracket, which a model must find to predict it.

What each closing bracket is measured against (gptlab.interp.brackets scores heads on it):

- its match (`matching_openings`): the opening bracket it closes. Just before a closing
  bracket the most recent *unmatched* opening bracket (`innermost_open`, the top of the
  stack) is, by definition, its match, so that rule is the target itself, not a baseline;
  the baselines are the rules that need no stack:
- `nearest_openings`: the most recent opening bracket of any kind (right whenever the
  closing bracket directly follows its own opening);
- `nearest_same_kind`: the most recent opening bracket of the closing bracket's own kind
  (right also when everything between them is of the other kind);
- chance: attention spread evenly over the positions the query may see, or over the
  opening brackets among them (gptlab.interp.brackets computes both).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from gptlab.errors import UsageError

OPENING = "(["
CLOSING = ")]"
CLOSING_OF = dict(zip(OPENING, CLOSING, strict=True))  # "(" -> ")"
OPENING_OF = dict(zip(CLOSING, OPENING, strict=True))  # ")" -> "("
SEPARATOR = "\n"  # ends each word; the stack starts afresh after it
SYMBOLS = SEPARATOR + OPENING + CLOSING  # the character vocabulary
LENGTH = (2, 32)  # a word's length, inclusive (odd lengths are drawn one shorter)
MAX_DEPTH = 4
NONE = -1  # in the index lists: no such position


def check_dyck_bounds(length: tuple[int, int], max_depth: int) -> None:
    """A UsageError naming the parameter unless words of these lengths and depth exist."""
    low, high = length
    if not 2 <= low <= high:
        raise UsageError(f"length must be a range (low, high) with 2 <= low <= high, "
                         f"got {tuple(length)}")
    if max_depth < 1:
        raise UsageError(f"max_depth must be at least 1, got {max_depth}")


def dyck_word(rng: random.Random, length: int, max_depth: int = MAX_DEPTH) -> str:
    """One balanced word of exactly `length` symbols (even, >= 2), depth <= max_depth."""
    if length < 2 or length % 2:
        raise UsageError(f"a balanced word has an even length of 2 or more, got {length}")
    check_dyck_bounds((length, length), max_depth)
    stack: list[str] = []
    out = []
    for position in range(length):
        left = length - position - 1  # symbols after this one
        # open only if the word can still close in what is left (depth + 1 <= left)
        can_open = len(stack) < max_depth and len(stack) + 1 <= left
        if stack and (not can_open or rng.random() < 0.5):
            out.append(CLOSING_OF[stack.pop()])
        else:
            bracket = rng.choice(OPENING)
            stack.append(bracket)
            out.append(bracket)
    return "".join(out)


def dyck_text(n_chars: int, seed: int = 0, length: tuple[int, int] = LENGTH,
              max_depth: int = MAX_DEPTH) -> str:
    """n_chars of words, each a balanced word (length drawn in `length`, made even) and a
    newline; the last word is cut where n_chars ends."""
    check_dyck_bounds(length, max_depth)
    if n_chars < 0:
        raise UsageError(f"n_chars must be 0 or more, got {n_chars}")
    rng = random.Random(seed)
    parts, size = [], 0
    while size < n_chars:
        n = rng.randint(*length)
        part = dyck_word(rng, max(2, n - n % 2), max_depth) + SEPARATOR
        parts.append(part)
        size += len(part)
    return "".join(parts)[:n_chars]


def dyck_rows(n_rows: int, row_length: int, seed: int = 0, length: tuple[int, int] = LENGTH,
              max_depth: int = MAX_DEPTH) -> list[str]:
    """n_rows strings of row_length symbols, each a newline then words (dyck_text), as a
    model sees a window of the training text that starts at a word: every closing bracket's
    match lies inside the row."""
    if n_rows < 1 or row_length < 2:
        raise UsageError(f"n_rows must be at least 1 and row_length at least 2, got "
                         f"{n_rows} and {row_length}")
    rng = random.Random(seed)
    return [SEPARATOR + dyck_text(row_length - 1, rng.randrange(2**32), length, max_depth)
            for _ in range(n_rows)]


def matching_openings(text: str) -> list[int]:
    """Per position, the index of the opening bracket a closing bracket closes; NONE for
    anything else and for a closing bracket whose opening is not in text (a window cut
    mid-word) or of the other kind. A newline empties the stack."""
    stack: list[int] = []
    out = [NONE] * len(text)
    for i, symbol in enumerate(text):
        if symbol in OPENING:
            stack.append(i)
        elif symbol in CLOSING:
            if stack and text[stack[-1]] == OPENING_OF[symbol]:
                out[i] = stack.pop()
            else:
                stack.clear()  # unbalanced: nothing before this point is matched again
        else:
            stack.clear()
    return out


def innermost_open(text: str) -> list[int]:
    """Per position i, the most recent unmatched opening bracket once text[..i] is read (the
    top of the stack; NONE where nothing is open): what the symbol after i must close if it
    is a closing bracket, so innermost_open[c - 1] == matching_openings[c] at each closing
    bracket c with its match in text."""
    stack: list[int] = []
    out = []
    for symbol in text:
        if symbol in OPENING:
            stack.append(len(out))
        elif symbol in CLOSING and stack and text[stack[-1]] == OPENING_OF[symbol]:
            stack.pop()
        else:
            stack.clear()  # a newline, or a closing bracket with nothing to match
        out.append(stack[-1] if stack else NONE)
    return out


def nearest_openings(text: str, kinds: Sequence[str] = OPENING) -> list[int]:
    """Per position i, the most recent opening bracket among `kinds` at or before i, within
    i's word (after the last newline); NONE where there is none."""
    out, last = [NONE] * len(text), NONE
    for i, symbol in enumerate(text):
        if symbol == SEPARATOR:
            last = NONE
        elif symbol in kinds:
            last = i
        out[i] = last
    return out


def nearest_same_kind(text: str) -> list[int]:
    """Per closing bracket, the most recent opening bracket of its own kind before it
    (within its word); NONE for anything else."""
    last = {bracket: nearest_openings(text, bracket) for bracket in OPENING}
    return [last[OPENING_OF[s]][i] if s in CLOSING else NONE for i, s in enumerate(text)]


def depths(text: str) -> list[int]:
    """Per position, how many brackets are open after it (0 after a newline)."""
    out, depth = [], 0
    for symbol in text:
        depth = 0 if symbol == SEPARATOR else depth + (symbol in OPENING) - (symbol in CLOSING)
        out.append(depth)
    return out


def ensure_dyck(data_dir: Path, n_chars: int, seed: int = 0, by: str = "prepare",
                max_depth: int = MAX_DEPTH) -> tuple[dict, bool]:
    """(meta, reused): dyck_text(n_chars, seed, max_depth=max_depth), char-level over
    SYMBOLS, prepared into data_dir (a tenth for validation) unless that very text is
    already there; another kind of folder, or other data, is refused
    (gptlab.files.kinds)."""
    # start-up time: numpy and tokenizers load when data is prepared, not at parsing
    from gptlab.data.prepared import ensure_prepared
    from gptlab.data.tokenizer import CharTokenizer

    check_dyck_bounds(LENGTH, max_depth)

    def make():
        return dyck_text(n_chars, seed, max_depth=max_depth), CharTokenizer.from_text(SYMBOLS)

    source = f"dyck-2:{n_chars}:{seed}:depth-{max_depth}"
    return ensure_prepared(Path(data_dir), source, make, kind="char", by=by)
