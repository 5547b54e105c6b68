"""Synthetic data: the repeated-random-segments task, on which a two-layer model grows an
induction head (the interpretability tests train one on the same kind of rows).

The text is a run of episodes. Each episode is a segment of distinct symbols drawn at random
(8 to 24 of them by default) written out several times in a row. Within a segment no symbol
repeats and each episode draws afresh, so the next symbol cannot be guessed from the one
before it (bigram statistics are uniform); after the segment's first copy it can be read off
the earlier copy: find the current symbol there and copy what followed it, which is what an
induction head does.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

from gptlab.errors import UsageError

# 64 single characters, so that a character tokenizer reads the text one symbol a token.
SYMBOLS = string.ascii_letters + string.digits + "+/"
SEGMENT = (8, 24)  # a segment's length, inclusive
REPEATS = (2, 6)  # copies of it in an episode, inclusive


def repeated_segments_text(n_chars: int, seed: int = 0, symbols: str = SYMBOLS,
                           segment: tuple[int, int] = SEGMENT,
                           repeats: tuple[int, int] = REPEATS) -> str:
    """n_chars of episodes: a segment of distinct random symbols, repeated."""
    low, high = segment
    if not 2 <= low <= high <= len(symbols):
        raise UsageError(f"segment lengths must be within 2..{len(symbols)} (the symbols), "
                         f"got {segment}")
    if not 1 <= repeats[0] <= repeats[1]:
        raise UsageError(f"repeats must be 1 or more, got {repeats}")
    rng = random.Random(seed)
    parts, length = [], 0
    while length < n_chars:
        piece = "".join(rng.sample(symbols, rng.randint(low, high)))
        episode = piece * rng.randint(*repeats)
        parts.append(episode)
        length += len(episode)
    return "".join(parts)[:n_chars]


def ensure_repeated_segments(data_dir: Path, n_chars: int, seed: int = 0,
                             by: str = "prepare") -> tuple[dict, bool]:
    """(meta, reused): repeated_segments_text(n_chars, seed), char-level, prepared into
    data_dir (a tenth for validation) unless that very text is already there."""
    # start-up time: numpy and tokenizers load when data is prepared, not at parsing
    from gptlab.data.prepared import ensure_prepared
    from gptlab.data.tokenizer import CharTokenizer

    def make():
        text = repeated_segments_text(n_chars, seed)
        return text, CharTokenizer.from_text(SYMBOLS)

    source = f"repeated-segments:{n_chars}:{seed}"
    return ensure_prepared(Path(data_dir), source, make, kind="char", by=by)
