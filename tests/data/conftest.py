"""Shared by the data tests."""

import pytest

from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer


@pytest.fixture
def alphabet_data(tmp_path):
    """A fresh data directory of 1,000 tokens, the alphabet over and over: 900 train and
    100 val, vocabulary 26. Tests may break it."""
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    prepare(text, tmp_path, CharTokenizer.from_text(text), val_fraction=0.1)
    return tmp_path
