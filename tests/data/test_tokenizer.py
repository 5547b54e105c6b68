import json

import pytest
from tokenizers import Tokenizer as RawTokenizer
from tokenizers import models, pre_tokenizers

from gptlab.data.tokenizer import (
    MIN_BPE_VOCAB,
    CharTokenizer,
    HFTokenizer,
    Tokenizer,
    load_tokenizer,
)
from gptlab.errors import UsageError

UNICODE = "Grüße, 世界! — naïve café 🙂\n\ttabs  and   spaces\r\nend"


def test_char_vocabulary_is_sorted_characters_of_the_text():
    tok = CharTokenizer.from_text("hello world")
    assert tok.chars == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert tok.vocab_size == 8 and tok.kind == "char"
    assert tok.encode("hello") == [3, 2, 4, 4, 5]
    assert tok.decode([3, 2, 4, 4, 5]) == "hello"
    assert isinstance(tok, Tokenizer)


def test_char_tiny_shakespeare_matches_nanogpt_vocabulary(tiny_shakespeare):
    text = tiny_shakespeare.read_text(encoding="utf-8")
    tok = CharTokenizer.from_text(text)
    # nanoGPT data/shakespeare_char/prepare.py: chars = sorted(list(set(data)))
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    assert tok.vocab_size == 65
    head = text[:5000]
    assert tok.encode(head) == [stoi[c] for c in head]
    assert tok.decode(tok.encode(text)) == text


def test_char_unicode_round_trip():
    tok = CharTokenizer.from_text(UNICODE)
    assert tok.decode(tok.encode(UNICODE)) == UNICODE
    assert len(tok.encode(UNICODE)) == len(UNICODE)


def test_char_encode_names_unknown_characters():
    tok = CharTokenizer.from_text("abc")
    with pytest.raises(UsageError, match=r"characters not in the vocabulary: 'é', 'ß'$"):
        tok.encode("abcéßé")


def test_char_decode_rejects_ids_outside_vocabulary():
    tok = CharTokenizer.from_text("abc")
    with pytest.raises(UsageError, match="token id 3 is outside the vocabulary"):
        tok.decode([0, 3])
    with pytest.raises(UsageError, match="token id -1"):
        tok.decode([-1])


def test_char_save_and_load(tmp_path):
    tok = CharTokenizer.from_text(UNICODE)
    tok.save(tmp_path / "tokenizer.json")
    spec = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec == {"type": "gptlab-char", "chars": sorted(set(UNICODE))}
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    assert isinstance(loaded, CharTokenizer)
    assert loaded.encode(UNICODE) == tok.encode(UNICODE)


@pytest.fixture(scope="module")
def bpe(tiny_shakespeare):
    return HFTokenizer.train_bpe(tiny_shakespeare.read_text(encoding="utf-8")[:200_000], 400)


def test_bpe_vocabulary_size_and_compression(bpe, tiny_shakespeare):
    assert bpe.kind == "bpe" and bpe.vocab_size == 400
    text = tiny_shakespeare.read_text(encoding="utf-8")[:20_000]
    ids = bpe.encode(text)
    assert max(ids) < 400
    assert len(ids) < 0.6 * len(text.encode("utf-8"))  # merges learned something
    assert bpe.decode(ids) == text


def test_bpe_round_trips_unicode_it_never_saw(bpe):
    # Byte-level: characters absent from training fall back to bytes, never to <unk>.
    ids = bpe.encode(UNICODE)
    assert bpe.decode(ids) == UNICODE
    assert len(ids) >= len(UNICODE.encode("utf-8")) // 4


def test_bpe_training_is_deterministic(bpe, tiny_shakespeare):
    again = HFTokenizer.train_bpe(tiny_shakespeare.read_text(encoding="utf-8")[:200_000], 400)
    assert again.tokenizer.to_str() == bpe.tokenizer.to_str()


def test_bpe_vocab_too_small():
    with pytest.raises(UsageError, match=f"too small.*at least {MIN_BPE_VOCAB}"):
        HFTokenizer.train_bpe("some text", 100)


def test_bpe_save_and_load_as_file(tmp_path, bpe):
    bpe.save(tmp_path / "tokenizer.json")
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    assert isinstance(loaded, HFTokenizer) and loaded.kind == "file"
    assert loaded.vocab_size == bpe.vocab_size
    assert loaded.encode(UNICODE) == bpe.encode(UNICODE)
    assert loaded.decode(loaded.encode(UNICODE)) == UNICODE


def test_load_any_hf_tokenizer_json(tmp_path):
    # A tokenizer.json made by the tokenizers library itself, of a kind we never train.
    raw = RawTokenizer(models.WordLevel({"[UNK]": 0, "to": 1, "be": 2, "or": 3, "not": 4},
                                        unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.save(str(tmp_path / "tokenizer.json"))
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    assert tok.kind == "file" and tok.vocab_size == 5
    assert tok.encode("to be or not to be") == [1, 2, 3, 4, 1, 2]


@pytest.mark.parametrize("content, message", [
    (None, "tokenizer file not found"),
    ("{not json", r"not valid JSON \(tokenizer file\)"),
    ('{"hello": 1}', "neither a gptlab-char nor"),
    ('{"type": "gptlab-char", "chars": ["b", "a"]}', "sorted"),
    ('{"type": "gptlab-char", "chars": ["ab"]}', "single characters"),
    ('{"model": {"type": "NoSuchModel"}}', "not a valid tokenizer.json"),
])
def test_load_tokenizer_errors(tmp_path, content, message):
    path = tmp_path / "tokenizer.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_tokenizer(path)


def test_the_char_tokenizer_written_for_hugging_face_reads_back_as_itself(tmp_path):
    """A model exported to Hugging Face and converted back carries the char tokenizer as a
    word-level tokenizer.json; load_tokenizer knows it (GGUF export then takes it)."""
    tok = CharTokenizer.from_text(UNICODE)
    (tmp_path / "hf.json").write_text(tok.hf_json())
    back = load_tokenizer(tmp_path / "hf.json")
    assert isinstance(back, CharTokenizer) and back.chars == tok.chars
    assert back.encode(UNICODE) == tok.encode(UNICODE)


@pytest.mark.parametrize("change", [
    lambda spec: spec["model"].update(unk_token="a"),  # a stand-in for unknown characters
    lambda spec: spec.update(normalizer={"type": "Lowercase"}),
    lambda spec: spec["model"]["vocab"].update({"ab": 99}),  # not one character
    lambda spec: spec["model"]["vocab"].update({"a": 1, "b": 0}),  # not in code-point order
])
def test_another_word_level_tokenizer_stays_what_it_is(tmp_path, change):
    spec = json.loads(CharTokenizer.from_text("abc").hf_json())
    change(spec)
    (tmp_path / "t.json").write_text(json.dumps(spec))
    assert isinstance(load_tokenizer(tmp_path / "t.json"), HFTokenizer)


def test_unknown_counts_the_characters_outside_the_vocabulary_in_order():
    tok = CharTokenizer.from_text("abc ")
    assert tok.unknown("a cab") == {}
    assert tok.unknown("zebra zoo ÿ") == {"z": 2, "e": 1, "r": 1, "o": 2, "ÿ": 1}
