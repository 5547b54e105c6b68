"""Text and token arguments of the commands that look inside a model on a given input
(lens, attribute, patch): encoded and checked against the model before any work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gptlab.cli.argtypes import TOKEN_ID_PREFIX
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
