"""Text generation (gptlab.inference.sampling): the streaming decoder with stop strings and
split UTF-8 characters, and generate_text against GPT.generate."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.inference.sampling import TextStream, generate_text
from gptlab.model.config import GPTConfig
from gptlab.model.decoding import SamplingSettings
from gptlab.model.gpt import GPT


def chars_decode(ids):
    return "".join(chr(i) for i in ids)


def feed(stream: TextStream, text: str) -> list[str]:
    return [stream.push([ord(c)]) for c in text] + [stream.finish()]


def test_stream_without_stop_strings_emits_each_token_at_once():
    pieces = feed(TextStream(chars_decode), "hello")
    assert pieces == ["h", "e", "l", "l", "o", ""]


def test_stream_stops_before_the_stop_string_and_holds_back_its_prefix():
    stream = TextStream(chars_decode, stop=["\n\n", "END"])
    pieces = feed(stream, "ab\nc\n\nnever")
    assert "".join(pieces) == "ab\nc" and stream.stopped
    assert pieces[2] == ""  # "\n" might start "\n\n": held back until "c" arrives
    stream = TextStream(chars_decode, stop=["END"])
    assert "".join(feed(stream, "the ENDING")) == "the " and stream.stopped
    stream = TextStream(chars_decode, stop=["END"])
    assert "".join(feed(stream, "EN and E")) == "EN and E" and not stream.stopped


def test_stream_holds_back_a_split_utf8_character():
    raw = "é!".encode()  # 3 bytes; a byte-level tokenizer may emit them one by one
    stream = TextStream(lambda ids: bytes(ids).decode("utf-8", errors="replace"))
    pieces = [stream.push([b]) for b in raw] + [stream.finish()]
    assert pieces == ["", "é", "!", ""]


def test_empty_stop_string_is_refused():
    with pytest.raises(UsageError, match="stop string"):
        TextStream(chars_decode, stop=[""])


def test_generate_text_matches_generate_and_streams():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=128, block_size=8, n_layer=1, n_head=2, n_embd=16)).eval()
    prompt = "ab"
    encode = lambda s: [ord(c) for c in s]  # noqa: E731
    pieces = []
    greedy = SamplingSettings(temperature=0.0)
    text = generate_text(model, encode, chars_decode, prompt, 20, greedy,
                         on_text=pieces.append)
    ids = model.generate(torch.tensor([encode(prompt)]), 20, temperature=0.0)[0, 2:].tolist()
    assert text == chars_decode(ids) == "".join(pieces)
    assert len(pieces) > 1  # it came out piece by piece (past the context too: 22 > 8)
    stop = text[5:7]
    cut = generate_text(model, encode, chars_decode, prompt, 20, greedy, stop=[stop])
    assert cut == text[: text.find(stop)]
    assert math.isfinite(len(cut))
