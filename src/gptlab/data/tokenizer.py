"""Tokenizers: character-level, byte-level BPE, and any Hugging Face `tokenizer.json`.

All three save to and load from one `tokenizer.json`, so a data directory and a run
directory carry the exact tokenizer their token ids mean. Our character format is
`{"type": "gptlab-char", "chars": [...]}`; everything else is the `tokenizers` library's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import tokenizers as hf
from tokenizers import decoders, models, pre_tokenizers, trainers

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.files.atomic import atomic_write_text, read_json

CHAR_FORMAT = "gptlab-char"
# Byte-level BPE starts from all 256 bytes; it needs room for at least one merge on top.
MIN_BPE_VOCAB = 257
# Far above any real vocabulary (GPT-4's has 100k, Gemma's 256k); the tokenizers library
# aborts the process (a Rust panic) for sizes near 2**31.
MAX_BPE_VOCAB = 1 << 24


@runtime_checkable
class Tokenizer(Protocol):
    vocab_size: int
    kind: str  # "char" | "bpe" | "file" (a loaded Hugging Face tokenizer.json)

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def save(self, path: str | Path) -> None: ...

    def hf_json(self) -> str: ...


class CharTokenizer:
    """One id per character; the vocabulary is the corpus's characters sorted by code point
    (as nanoGPT's shakespeare_char), so the same text always gives the same ids."""

    kind = "char"

    def __init__(self, chars: Sequence[str]):
        chars = list(chars)
        if not chars or any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise UsageError("a character vocabulary must be a non-empty list of single characters")
        if sorted(set(chars)) != chars:
            raise UsageError("a character vocabulary must be sorted and without repeats")
        self.chars = chars
        self.vocab_size = len(chars)
        # Code points in id order: encoding is one searchsorted over the whole text.
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        if not text:
            raise UsageError("cannot build a character vocabulary from empty text")
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def unknown(self, text: str) -> dict[str, int]:
        """{character: count} of text's characters outside the vocabulary, in order of
        first appearance (empty: text encodes)."""
        known = set(self.chars)
        counts = {c: n for c, n in Counter(text).items() if c not in known}
        return dict(sorted(counts.items(), key=lambda kv: text.index(kv[0])))

    def encode_array(self, text: str) -> np.ndarray:
        """Like `encode`, as an int64 array; fast for whole corpora (no per-char Python)."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        ids = np.searchsorted(self._codes, codes)
        ids_in_range = np.minimum(ids, self.vocab_size - 1)
        unknown = self._codes[ids_in_range] != codes
        if unknown.any():
            # Listed in order of first appearance, so the first one shown is the first to fix.
            unknown_codes, first = np.unique(codes[unknown], return_index=True)
            missing = [chr(c) for c in unknown_codes[np.argsort(first)].tolist()]
            shown = ", ".join(repr(c) for c in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise UsageError(f"characters not in the vocabulary: {shown}{more}")
        return ids.astype(np.int64)

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        _check_ids(ids, self.vocab_size)
        return "".join([self.chars[i] for i in ids])

    def to_dict(self) -> dict:
        return {"type": CHAR_FORMAT, "chars": self.chars}

    def to_hf_tokenizer(self) -> hf.Tokenizer:
        """The same tokenizer in the `tokenizers` library's terms, which transformers'
        AutoTokenizer loads: every character (newlines too) its own piece, each piece looked
        up in a word-level vocabulary of our ids, the pieces joined back with nothing between.
        No normalizer and no special tokens, so ids and text are exactly ours; a character
        outside the vocabulary is an error there too."""
        tok = hf.Tokenizer(models.WordLevel({c: i for i, c in enumerate(self.chars)},
                                            unk_token=None))
        # [\s\S], not ".": Oniguruma's "." does not match a newline.
        tok.pre_tokenizer = pre_tokenizers.Split(hf.Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        return tok

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), ensure_ascii=False) + "\n")

    def hf_json(self) -> str:
        """tokenizer.json in the `tokenizers` library's format (see to_hf_tokenizer)."""
        return self.to_hf_tokenizer().to_str(pretty=True)


class HFTokenizer:
    """A `tokenizers.Tokenizer`: byte-level BPE trained here (kind "bpe") or any
    tokenizer.json loaded from a file (kind "file"), e.g. GPT-2's."""

    def __init__(self, tokenizer: hf.Tokenizer, kind: str = "file", text: str | None = None):
        self.tokenizer = tokenizer
        self.kind = kind
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._text = text  # the file it was read from, kept so copies stay byte for byte

    @classmethod
    def train_bpe(cls, text: str, vocab_size: int) -> HFTokenizer:
        """Byte-level BPE as GPT-2's: any text encodes (no unknown token) and decodes back."""
        if vocab_size < MIN_BPE_VOCAB:
            raise SettingError(
                Setting("vocab_size"), f" {vocab_size:,} is too small for byte-level BPE: it "
                f"needs at least {MIN_BPE_VOCAB} (the 256 bytes plus one merge)")
        if vocab_size > MAX_BPE_VOCAB:
            raise SettingError(Setting("vocab_size"), f" {vocab_size:,} is too large for "
                               f"byte-level BPE: at most {MAX_BPE_VOCAB:,}")
        if not text.strip():
            raise UsageError("cannot train BPE on empty text")
        tok = hf.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,  # a pair seen once is noise, not a merge worth a vocabulary slot
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        # One sequence, not an iterator of chunks: the result must not depend on batching.
        tok.train_from_iterator([text], trainer=trainer)
        return cls(tok, kind="bpe")

    @classmethod
    def from_file(cls, path: str | Path) -> HFTokenizer:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            return cls(hf.Tokenizer.from_str(text), kind="file", text=text)
        except Exception as exc:  # the library raises plain Exception on bad JSON
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"{path} is not a valid tokenizer.json: {reason}") from None

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        _check_ids(ids, self.vocab_size)
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, self.hf_json())

    def hf_json(self) -> str:
        """tokenizer.json: the text of the file this was read from, unchanged, or else the
        library's own serialisation."""
        return self._text if self._text is not None else self.tokenizer.to_str()


def encode_checked(tokenizer: Tokenizer, text: str, what: str, max_tokens: int,
                   min_tokens: int = 1, limit: str = "the model's context") -> list[int]:
    """text's token ids, or a UsageError naming `what` (a flag or a field) when the text is
    empty, gives fewer than min_tokens, or more than max_tokens (`limit` says whose limit
    that is)."""
    if not text:
        raise UsageError(f"{what} is empty: give at least one token")
    ids = tokenizer.encode(text)
    if len(ids) < min_tokens:
        raise UsageError(f"{what} gives {len(ids):,} token(s); this needs at least {min_tokens:,}")
    if len(ids) > max_tokens:
        raise UsageError(f"{what} is {len(ids):,} tokens, longer than {limit} of "
                         f"{max_tokens:,}; shorten it")
    return ids


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load one tokenizer.json: our character format or the `tokenizers` library's."""
    path = Path(path)
    spec = read_json(path, "tokenizer file")
    if isinstance(spec, dict) and spec.get("type") == CHAR_FORMAT:
        chars = spec.get("chars")
        if not isinstance(chars, list):
            raise UsageError(f"{path}: a gptlab-char tokenizer needs a list of characters")
        try:
            return CharTokenizer(chars)
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
    if not isinstance(spec, dict) or "model" not in spec:
        raise UsageError(
            f"{path} is neither a gptlab-char nor a Hugging Face tokenizers tokenizer.json"
        )
    return char_in_word_level(spec) or HFTokenizer.from_file(path)


def char_in_word_level(spec: dict) -> CharTokenizer | None:
    """The character tokenizer a `tokenizers` tokenizer.json is, when it is exactly what
    CharTokenizer.hf_json writes (a word-level vocabulary of single characters, split
    character by character): a model exported to Hugging Face and read back keeps its
    char tokenizer (and GGUF export takes it as one). None for any other tokenizer."""
    model = spec.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if model.get("type") != "WordLevel" or not isinstance(vocab, dict) or not vocab:
        return None
    by_id = sorted(vocab.items(), key=lambda kv: kv[1] if isinstance(kv[1], int) else -1)
    chars = [c for c, _ in by_id]
    if [i for _, i in by_id] != list(range(len(chars))):
        return None
    try:
        candidate = CharTokenizer(chars)
    except UsageError:  # not single characters, or not in code-point order
        return None
    written = json.loads(candidate.hf_json())
    same = all(written.get(k) == spec.get(k) for k in {*written, *spec} - {"version"})
    return candidate if same else None


def _check_ids(ids: list[int], vocab_size: int) -> None:
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise UsageError(f"token id {bad[0]} is outside the vocabulary (0..{vocab_size - 1})")


def same_tokenizer(a: Tokenizer, b: Tokenizer) -> bool:
    """Whether a and b turn the same ids into the same text: the same vocabulary, token by
    token (their files may still differ, e.g. one re-saved by another library version)."""
    if a.vocab_size != b.vocab_size:
        return False
    return all(a.decode([i]) == b.decode([i]) for i in range(a.vocab_size))
