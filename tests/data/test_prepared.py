"""Prepared data directories (gptlab.data.prepared): nanoGPT's shakespeare_char split byte
for byte, round trips, uint32 for large vocabularies, and every broken directory named."""

import json

import numpy as np
import pytest

from gptlab.data.prepared import (
    check_enough_tokens,
    ensure_prepared,
    fingerprint,
    load_data,
    prepare,
)
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer
from gptlab.errors import UsageError


def test_tiny_shakespeare_char_matches_nanogpt(tmp_path, tiny_shakespeare):
    text = tiny_shakespeare.read_text(encoding="utf-8")
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no temp files left; its mark
        ".gptlab.json", "meta.json", "tokenizer.json", "train.bin", "val.bin"]
    assert json.loads((tmp_path / ".gptlab.json").read_text()) == {
        "kind": "data", "version": 1, "by": "prepare"}


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


def test_load_data_errors(alphabet_data, tmp_path):
    with pytest.raises(UsageError, match="data directory not found"):
        load_data(tmp_path / "nowhere")
    meta = json.loads((alphabet_data / "meta.json").read_text())

    (alphabet_data / "val.bin").write_bytes(b"\0" * 10)
    with pytest.raises(UsageError, match=r"val.bin has 10 bytes but meta.json says 100 uint16"):
        load_data(alphabet_data)
    (alphabet_data / "val.bin").unlink()
    with pytest.raises(UsageError, match="missing .*val.bin"):
        load_data(alphabet_data)

    for broken, pattern in [
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({**meta, "version": 7}), "unsupported version 7"),
        (json.dumps({**meta, "train_tokens": "900"}), "train_tokens must be a positive integer"),
        (json.dumps({**meta, "dtype": "float32"}), "dtype must be uint16 or uint32"),
        (json.dumps({**meta, "dtype": "uint32"}), "does not match vocab_size 26"),
    ]:
        (alphabet_data / "meta.json").write_text(broken)
        with pytest.raises(UsageError, match=pattern):
            load_data(alphabet_data)
    (alphabet_data / "meta.json").unlink()
    with pytest.raises(UsageError, match="missing .*meta.json"):
        load_data(alphabet_data)


def test_check_enough_tokens(alphabet_data):
    data = load_data(alphabet_data)  # 900 train, 100 val tokens
    check_enough_tokens(data, 99)
    with pytest.raises(UsageError, match=r"the val split has 100 tokens, .* block of 100 "
                                         r"\(needs at least 101\)"):
        check_enough_tokens(data, 100)
    with pytest.raises(UsageError, match="the train split has 900 tokens"):
        check_enough_tokens(data, 950)


def test_meta_holds_the_tokens_fingerprint(tmp_path):
    tokenizer = CharTokenizer.from_text("abc \n")
    meta = prepare("abc abc cab\n" * 50, tmp_path / "d", tokenizer)
    data = load_data(tmp_path / "d")
    assert meta["fingerprint"] == fingerprint(np.asarray(data.train), np.asarray(data.val))
    assert data.fingerprint() == meta["fingerprint"]
    # one token different, or one moved from train to val, is another fingerprint
    other = prepare("abc abc cab\n" * 49 + "abc abc cba\n", tmp_path / "e", tokenizer)
    moved = prepare("abc abc cab\n" * 50, tmp_path / "f", tokenizer, val_fraction=0.2)
    assert len({meta["fingerprint"], other["fingerprint"], moved["fingerprint"]}) == 3


def test_data_is_replaced_only_with_force(tmp_path):
    tokenizer = CharTokenizer.from_text("abc \n")
    prepare("abc abc\n" * 50, tmp_path, tokenizer)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(UsageError, match=r"already holds a data directory \(train.bin, "
                                         r"val.bin\): --force replaces it"):
        prepare("cab cab\n" * 50, tmp_path, tokenizer)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert prepare("cab cab\n" * 50, tmp_path, tokenizer, force=True)["source"] == ""
    assert (tmp_path / "train.bin").read_bytes() != before["train.bin"]
    # the same tokens again (a notebook run twice) write nothing but meta.json's new source
    tokens = {name: (tmp_path / name).stat().st_mtime_ns for name in ("train.bin", "val.bin")}
    meta = prepare("cab cab\n" * 50, tmp_path, tokenizer, source="again")
    assert meta["source"] == "again" == load_data(tmp_path).meta["source"]
    assert {name: (tmp_path / name).stat().st_mtime_ns for name in tokens} == tokens
    with pytest.raises(UsageError, match="already holds a data directory"):  # not val's split
        prepare("cab cab\n" * 50, tmp_path, tokenizer, val_fraction=0.3)


def test_ensure_prepared_reuses_its_own_data_and_refuses_other_data(tmp_path):
    calls = []

    def make():
        calls.append(1)
        return "abc abc cab\n" * 50, CharTokenizer.from_text("abc \n")

    meta, reused = ensure_prepared(tmp_path, "mine", make)
    assert not reused and calls == [1]
    assert ensure_prepared(tmp_path, "mine", make) == (meta, True) and calls == [1]
    with pytest.raises(UsageError, match="holds other data \\('mine'\\)"):
        ensure_prepared(tmp_path, "theirs", make)
    assert ensure_prepared(tmp_path, "theirs", make, replace_other=True)[0]["source"] == "theirs"
