"""Corpus text (gptlab.data.text): reading a file or a folder of them, UTF-8 only, and the
train/val split by characters."""

import pytest

from gptlab.data.text import read_text, split_text
from gptlab.errors import UsageError


def test_split_follows_the_text_not_the_tokens():
    assert split_text("abcdefghij", 0.1) == ("abcdefghi", "j")
    assert split_text("abcdefghij", 0.5) == ("abcde", "fghij")
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(UsageError, match="val_fraction must be between 0 and 1"):
            split_text("abcdefghij", bad)
    with pytest.raises(UsageError, match="too few to split"):
        split_text("a", 0.1)


def test_read_text_file_and_folder(tmp_path):
    (tmp_path / "b.txt").write_text("second")
    (tmp_path / "a.txt").write_text("first\n")
    (tmp_path / "c.txt").write_text("third")
    (tmp_path / "skip.md").write_text("not text")
    assert read_text(tmp_path) == "first\nsecond\nthird"
    assert read_text(tmp_path / "b.txt") == "second"
    (tmp_path / "bom.txt").write_bytes("\ufeffhi".encode())
    assert read_text(tmp_path / "bom.txt") == "hi"


def test_read_text_errors(tmp_path):
    with pytest.raises(UsageError, match="input not found: .*missing.txt"):
        read_text(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no .txt files in folder"):
        read_text(tmp_path / "empty")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café olé".encode("latin-1"))
    with pytest.raises(UsageError, match=r"latin1.txt is not UTF-8 text: byte 0xe9 at offset 3$"):
        read_text(bad)
