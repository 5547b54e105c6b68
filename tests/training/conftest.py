"""Fixtures shared by the training tests."""

import random

import pytest

from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer

WORDS = "the king and queen of a far land who will not go to sea said lord my good".split()


@pytest.fixture(scope="package")
def words_data_dir(tmp_path_factory):
    """A small char-level data directory: 300 lines of random words (~18k characters)."""
    rng = random.Random(0)
    text = "".join(" ".join(rng.choice(WORDS) for _ in range(12)) + ".\n" for _ in range(300))
    path = tmp_path_factory.mktemp("words") / "data"
    prepare(text, path, CharTokenizer.from_text(text), source="test")
    return path
