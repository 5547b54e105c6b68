"""Text in, text out: `generate_text` encodes a prompt, draws tokens with
gptlab.model.decoding (temperature, top-k, top-p, the KV-cached loop) and streams the text
back through a `TextStream`, which holds back half-decoded UTF-8 and stops at stop strings.
`gptlab sample` and the demo print what it yields.
"""

from __future__ import annotations

import torch

from gptlab.errors import UsageError
from gptlab.model.decoding import SamplingSettings, generate_tokens


class TextStream:
    """Turns tokens into text as they arrive, for streaming, and stops at stop strings.

    `push(ids)` returns the text that is now safe to show: text is held back while it ends
    in an incomplete UTF-8 sequence (a byte-level BPE token can split a character) or in
    the beginning of a stop string. When a stop string appears, the text before it is the
    last to come out (the stop string itself is not shown) and `stopped` becomes True.
    """

    def __init__(self, decode, stop: list[str] | tuple[str, ...] = ()) -> None:
        if any(not s for s in stop):
            raise UsageError("a stop string must not be empty")
        self._decode, self.stop = decode, list(stop)
        self.ids: list[int] = []
        self.text = ""  # everything decoded so far (cut at a stop string once found)
        self._shown = 0
        self.stopped = False

    def push(self, ids: list[int]) -> str:
        if self.stopped:
            return ""
        self.ids.extend(ids)
        text = self._decode(self.ids)
        cut = min((i for i in (text.find(s, max(self._shown - len(s), 0)) for s in self.stop)
                   if i >= 0), default=-1)
        if cut >= 0:
            self.text, self.stopped = text[:cut], True
            return self._emit(len(self.text))
        self.text = text
        safe = len(text)
        if text.endswith("\ufffd"):  # an unfinished multi-byte character
            safe = len(text.rstrip("\ufffd"))
        safe -= _longest_stop_prefix(text[:safe], self.stop)
        return self._emit(max(safe, self._shown))

    def finish(self) -> str:
        """Whatever is still held back (the end of the text, no stop string found)."""
        return self._emit(len(self.text))

    def _emit(self, upto: int) -> str:
        out = self.text[self._shown:upto]
        self._shown = max(self._shown, upto)
        return out


def _longest_stop_prefix(text: str, stops: list[str]) -> int:
    """Length of the longest tail of text that begins some stop string."""
    best = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:n]):
                best = n
                break
    return best


def default_prompt(encode, decode) -> str:
    """What to continue when no prompt is given: a newline, as text usually starts after
    one, or where the vocabulary has no newline, its first token (id 0)."""
    try:
        if encode("\n"):
            return "\n"
    except UsageError:  # a character vocabulary without "\n"
        pass
    return decode([0])


def generate_text(
    model: torch.nn.Module,
    encode,
    decode,
    prompt: str,
    max_new_tokens: int,
    settings: SamplingSettings = SamplingSettings(),
    stop: list[str] | tuple[str, ...] = (),
    generator: torch.Generator | None = None,
    on_text=None,
) -> str:
    """The text sampled after `prompt` (one sample), cut before the first stop string.

    encode/decode: a tokenizer's; on_text(str) is called with each new piece of text as
    soon as it is safe to show (streaming). Uses the KV cache (see generate_tokens).
    """
    ids = encode(prompt)
    device = next(model.parameters()).device
    idx = torch.tensor([ids], dtype=torch.long, device=device)
    stream = TextStream(decode, stop)
    pieces = []

    def emit(piece: str) -> None:
        if piece:
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)

    for token in generate_tokens(model, idx, max_new_tokens, settings, generator):
        emit(stream.push([int(token[0, 0])]))
        if stream.stopped:
            break
    emit(stream.finish())
    return "".join(pieces)
