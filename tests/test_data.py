import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gptlab.data.batches import get_batch
from gptlab.data.prepared import check_enough_tokens, load_data, prepare
from gptlab.data.text import read_text, split_text
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer
from gptlab.errors import UsageError

TINY = Path(__file__).resolve().parent / "assets/tinyshakespeare/input.txt"


def test_tiny_shakespeare_char_matches_nanogpt(tmp_path):
    text = TINY.read_text(encoding="utf-8")
    meta = prepare(text, tmp_path, CharTokenizer.from_text(text), source="tiny")
    assert (meta["vocab_size"], meta["train_tokens"], meta["val_tokens"]) == (65, 1003854, 111540)
    assert meta == json.loads((tmp_path / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["tokenizer"] == "char" and meta["version"] == 1

    # The reference: nanoGPT data/shakespeare_char/prepare.py, line for line.
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    n = len(text)
    train_data, val_data = text[: int(n * 0.9)], text[int(n * 0.9):]
    train_ids = np.array([stoi[c] for c in train_data], dtype=np.uint16)
    val_ids = np.array([stoi[c] for c in val_data], dtype=np.uint16)
    assert (tmp_path / "train.bin").read_bytes() == train_ids.tobytes()
    assert (tmp_path / "val.bin").read_bytes() == val_ids.tobytes()


def test_load_data_round_trip(tmp_path):
    text = "To be, or not to be, that is the question.\n" * 50
    tok = HFTokenizer.train_bpe(text, 300)
    meta = prepare(text, tmp_path, tok, val_fraction=0.25, source="hamlet")
    data = load_data(tmp_path)
    assert isinstance(data.train, np.memmap) and isinstance(data.val, np.memmap)
    assert data.meta == meta and data.vocab_size == tok.vocab_size
    assert data.tokenizer_path == tmp_path / "tokenizer.json"
    cut = int(len(text) * 0.75)
    assert tok.decode(data.train.tolist()) == text[:cut]
    assert tok.decode(data.val.tolist()) == text[cut:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "meta.json", "tokenizer.json", "train.bin", "val.bin"]  # no temp files left


class _BigVocab:
    """A tokenizer with more ids than uint16 holds: each character's code point."""

    kind = "file"
    vocab_size = 70_000

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))

    def save(self, path):  # a real tokenizer.json of the same size, for load_data's check
        chars = [chr(i) for i in range(self.vocab_size + 2048) if not 0xD800 <= i < 0xE000]
        CharTokenizer(chars[:self.vocab_size]).save(path)


def test_uint32_when_vocabulary_exceeds_uint16(tmp_path):
    text = "abc \U0001f600 xyz " * 10  # U+1F600 = 128512 > vocab: rejected first
    with pytest.raises(UsageError, match="outside its vocabulary"):
        prepare(text, tmp_path / "x", _BigVocab())
    assert not (tmp_path / "x").exists()
    text = "abc \uffee xyz " * 10 + chr(69_999)
    meta = prepare(text, tmp_path / "d", _BigVocab())
    assert meta["dtype"] == "uint32"
    data = load_data(tmp_path / "d")
    assert data.val.dtype == np.uint32 and data.val[-1] == 69_999


def test_split_follows_the_text_not_the_tokens():
    assert split_text("abcdefghij", 0.1) == ("abcdefghi", "j")
    assert split_text("abcdefghij", 0.5) == ("abcde", "fghij")
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(UsageError, match="val_fraction must be between 0 and 1"):
            split_text("abcdefghij", bad)
    with pytest.raises(UsageError, match="too few to split"):
        split_text("a", 0.1)


@pytest.mark.parametrize("text", ["", "   \n\t\n  "])
def test_empty_corpus(tmp_path, text):
    with pytest.raises(UsageError, match="the corpus is empty"):
        prepare(text, tmp_path / "d", CharTokenizer.from_text("ab"))
    assert not (tmp_path / "d").exists()


def test_failed_prepare_leaves_old_directory_alone(tmp_path):
    prepare("hello world, hello again\n", tmp_path, CharTokenizer.from_text("helo wrdagin,\n"))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(UsageError, match="not in the vocabulary: 'X'"):
        prepare("hello X", tmp_path, CharTokenizer.from_text("helo "))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


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


@pytest.fixture
def data_dir(tmp_path):
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    prepare(text, tmp_path, CharTokenizer.from_text(text), val_fraction=0.1)
    return tmp_path


def test_load_data_errors(data_dir, tmp_path):
    with pytest.raises(UsageError, match="data directory not found"):
        load_data(tmp_path / "nowhere")
    meta = json.loads((data_dir / "meta.json").read_text())

    (data_dir / "val.bin").write_bytes(b"\0" * 10)
    with pytest.raises(UsageError, match=r"val.bin has 10 bytes but meta.json says 100 uint16"):
        load_data(data_dir)
    (data_dir / "val.bin").unlink()
    with pytest.raises(UsageError, match="missing .*val.bin"):
        load_data(data_dir)

    for broken, pattern in [
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({**meta, "version": 7}), "unsupported version 7"),
        (json.dumps({**meta, "train_tokens": "900"}), "train_tokens must be a positive integer"),
        (json.dumps({**meta, "dtype": "float32"}), "dtype must be uint16 or uint32"),
        (json.dumps({**meta, "dtype": "uint32"}), "does not match vocab_size 26"),
    ]:
        (data_dir / "meta.json").write_text(broken)
        with pytest.raises(UsageError, match=pattern):
            load_data(data_dir)
    (data_dir / "meta.json").unlink()
    with pytest.raises(UsageError, match="missing .*meta.json"):
        load_data(data_dir)


def test_get_batch_windows(data_dir):
    data = load_data(data_dir)
    g = torch.Generator().manual_seed(1)
    x, y = get_batch(data.train, 8, 16, g)
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    # Reference: nanoGPT's per-row gather with the same offsets.
    offsets = torch.randint(len(data.train) - 16, (8,), generator=torch.Generator().manual_seed(1))
    tokens = torch.from_numpy(data.train.astype(np.int64))
    assert torch.equal(x, torch.stack([tokens[i:i + 16] for i in offsets]))
    assert torch.equal(y, torch.stack([tokens[i + 1:i + 17] for i in offsets]))


def test_get_batch_is_reproducible_from_generator_state(data_dir):
    data = load_data(data_dir)
    g = torch.Generator().manual_seed(123)
    get_batch(data.train, 4, 8, g)
    state = g.get_state()  # what the trainer saves in its checkpoint
    expected = get_batch(data.train, 4, 8, g)
    following = get_batch(data.train, 4, 8, g)
    g2 = torch.Generator()
    g2.set_state(state)
    replay = get_batch(data.train, 4, 8, g2)
    assert torch.equal(replay[0], expected[0]) and torch.equal(replay[1], expected[1])
    assert not torch.equal(expected[0], following[0])


def test_get_batch_reaches_the_last_token():
    tokens = np.arange(5, dtype=np.uint16)
    x, y = get_batch(tokens, 64, 4, torch.Generator().manual_seed(0))
    # Only one window of 4 (+1 target) fits in 5 tokens.
    assert x.tolist() == [[0, 1, 2, 3]] * 64 and y.tolist() == [[1, 2, 3, 4]] * 64
    with pytest.raises(UsageError, match="too few for one block of 5"):
        get_batch(tokens, 1, 5, torch.Generator())


def test_check_enough_tokens(data_dir):
    data = load_data(data_dir)  # 900 train, 100 val tokens
    check_enough_tokens(data, 99)
    with pytest.raises(UsageError, match=r"the val split has 100 tokens, .* block of 100 "
                                         r"\(needs at least 101\)"):
        check_enough_tokens(data, 100)
    with pytest.raises(UsageError, match="the train split has 900 tokens"):
        check_enough_tokens(data, 950)
