"""Corpora -> token files -> batches.

A data directory holds `train.bin` and `val.bin` (token ids, flat, native-endian uint16,
or uint32 when the vocabulary exceeds 65535), the `tokenizer.json` that produced them and
a `meta.json` describing both. `meta.json` is written last, so a directory with one is
complete. It holds the tokens' fingerprint (`fingerprint`, a sha256 of both splits): a run
records its data's at its start, and a resume on data that changed since is refused
(gptlab.training.plan); a directory from before the fingerprint has its tokens hashed when
one is needed. The split follows nanoGPT's data/shakespeare_char/prepare.py: the TEXT is cut at
int(n * (1 - val_fraction)) characters, then each part is encoded on its own.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gptlab.data.text import split_text
from gptlab.data.tokenizer import CharTokenizer, Tokenizer, load_tokenizer
from gptlab.errors import Setting, SettingError, UsageError
from gptlab.files import kinds
from gptlab.files.atomic import atomic_path, atomic_write_text, read_json_object
from gptlab.files.kinds import META_FILE, TOKENIZER_FILE

META_VERSION = 1
FILES = ("train.bin", "val.bin", TOKENIZER_FILE, META_FILE)


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65535 else np.dtype(np.uint32)


def encode_tokens(tokenizer: Tokenizer, text: str) -> np.ndarray:
    if isinstance(tokenizer, CharTokenizer):
        return tokenizer.encode_array(text)  # same ids as encode(), without a Python list
    return np.asarray(tokenizer.encode(text), dtype=np.int64)


def prepare(
    text: str,
    out_dir: str | Path,
    tokenizer: Tokenizer,
    val_fraction: float = 0.1,
    source: str = "",
    force: bool = False,
    by: str = "prepare",
) -> dict:
    """Split, encode and write a data directory (marked as written by command `by`); return
    its meta dict.

    out_dir is claimed as gptlab.files.kinds says: never another kind of folder (a run, a
    model) or one gptlab did not make; and over a data directory that holds tokens only
    with force (the runs trained on it would continue on other data, or decode garbage),
    unless it holds these very tokens and tokenizer already: then nothing is written but
    an updated meta.json."""
    train_text, val_text = split_text(text, val_fraction)
    dtype = token_dtype(tokenizer.vocab_size)
    splits = {
        "train": encode_tokens(tokenizer, train_text),
        "val": encode_tokens(tokenizer, val_text),
    }
    for name, ids in splits.items():
        if ids.size == 0:
            raise UsageError(f"the {name} split encodes to no tokens")
        if ids.min() < 0 or ids.max() >= tokenizer.vocab_size:
            raise UsageError(
                f"the tokenizer produced ids outside its vocabulary of {tokenizer.vocab_size:,}"
            )
    out_dir = Path(out_dir)
    found = kinds.claim(out_dir, kinds.DATA, force=True)  # never another kind of folder
    splits = {name: ids.astype(dtype) for name, ids in splits.items()}
    meta = {
        "version": META_VERSION,
        "vocab_size": int(tokenizer.vocab_size),
        "dtype": dtype.name,
        "tokenizer": tokenizer.kind,
        "train_tokens": int(splits["train"].size),
        "val_tokens": int(splits["val"].size),
        "val_fraction": float(val_fraction),
        "source": source,
        "fingerprint": fingerprint(splits["train"], splits["val"]),
    }
    if not force and found.work():
        # The same tokens and tokenizer again (a notebook run twice, the demo's data) change
        # nothing, and need no force: only meta.json's description is brought up to date.
        if _holds(out_dir, meta["fingerprint"], tokenizer):
            if _read_json_or_none(out_dir / META_FILE) != meta:
                atomic_write_text(out_dir / META_FILE, json.dumps(meta, indent=2) + "\n")
            return meta
        kinds.claim(out_dir, kinds.DATA)  # its tokens are replaced only with force: refused
    if not force:
        check_replaceable(out_dir, tokenizer)
    kinds.mark(out_dir, kinds.DATA, by)
    # Without meta.json the directory reads as incomplete until the new one lands.
    (out_dir / META_FILE).unlink(missing_ok=True)
    for name, ids in splits.items():
        with atomic_path(out_dir / f"{name}.bin") as tmp:
            ids.tofile(tmp)
    tokenizer.save(out_dir / TOKENIZER_FILE)
    atomic_write_text(out_dir / META_FILE, json.dumps(meta, indent=2) + "\n")
    return meta


def _holds(out_dir: Path, tokens_fingerprint: str, tokenizer: Tokenizer) -> bool:
    """Whether out_dir is a complete data directory of exactly these tokens and tokenizer."""
    try:
        there = load_data(out_dir).fingerprint()
    except UsageError:
        return False
    return there == tokens_fingerprint and _same_tokenizer_file(out_dir, tokenizer)


def _read_json_or_none(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fingerprint(train: np.ndarray, val: np.ndarray) -> str:
    """The tokens' content as one string: "sha256:" and the hash of both splits, each with
    its length (a token moved from val to train changes it too) and its dtype."""
    digest = hashlib.sha256()
    for ids in (train, val):
        digest.update(f"{ids.dtype.name}:{ids.size}:".encode())
        digest.update(memoryview(np.ascontiguousarray(ids)).cast("B"))
    return "sha256:" + digest.hexdigest()


def check_replaceable(out_dir: Path, tokenizer: Tokenizer) -> None:
    """A data directory already in out_dir (kinds.claim has said what else may be there)
    was made with `tokenizer`, so preparing it again leaves the runs trained on it
    readable."""
    if not (out_dir / TOKENIZER_FILE).is_file():
        return
    if not _same_tokenizer_file(out_dir, tokenizer):
        raise UsageError(f"{out_dir} holds data made with another tokenizer; replacing it "
                         f"would leave the runs trained on it unreadable")


def _same_tokenizer_file(out_dir: Path, tokenizer: Tokenizer) -> bool:
    """Whether out_dir's tokenizer.json is the one `tokenizer` saves, byte for byte."""
    old = out_dir / TOKENIZER_FILE
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(Path(tmp) / TOKENIZER_FILE)
        try:
            return (Path(tmp) / TOKENIZER_FILE).read_bytes() == old.read_bytes()
        except OSError:
            return False


@dataclass
class TokenData:
    """An opened data directory: its splits, its meta.json, and where it is (so that nothing
    downstream has to work it out again from a file inside it)."""

    train: np.ndarray  # read-only memmap of token ids
    val: np.ndarray
    meta: dict
    vocab_size: int
    directory: Path

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / TOKENIZER_FILE

    def split(self, name: str) -> np.ndarray:
        return {"train": self.train, "val": self.val}[name]

    def fingerprint(self) -> str:
        """The tokens' fingerprint: meta.json's, or (a directory from before it) computed
        now, one pass over the files."""
        recorded = self.meta.get("fingerprint")
        if isinstance(recorded, str) and recorded:
            return recorded
        return fingerprint(self.train, self.val)


def load_data(data_dir: str | Path) -> TokenData:
    """Open a data directory written by `prepare`, checking it against its meta.json."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise UsageError(f"data directory not found: {data_dir} (make one with `gptlab prepare`)")
    meta = _read_meta(data_dir / META_FILE)
    dtype = np.dtype(meta["dtype"])
    arrays = {}
    for name in ("train", "val"):
        path = data_dir / f"{name}.bin"
        if not path.is_file():
            raise UsageError(f"missing {path}")
        expected = meta[f"{name}_tokens"] * dtype.itemsize
        if path.stat().st_size != expected:
            raise UsageError(
                f"{path} has {path.stat().st_size:,} bytes but meta.json says "
                f"{meta[f'{name}_tokens']:,} {dtype.name} tokens ({expected:,} bytes)"
            )
        arrays[name] = np.memmap(path, dtype=dtype, mode="r")
    data = TokenData(arrays["train"], arrays["val"], meta, meta["vocab_size"], data_dir)
    if not data.tokenizer_path.is_file():
        raise UsageError(f"missing {data.tokenizer_path}")
    _check_vocabulary(data_dir, meta, arrays, data.tokenizer_path)
    return data


def _check_vocabulary(data_dir: Path, meta: dict, arrays: dict[str, np.ndarray],
                      tokenizer_path: Path) -> None:
    """Every token id below meta.json's vocab_size, which is the tokenizer's: checked now,
    since an id past the embedding table would fail only mid-training (or, on a GPU, as
    an unreadable device-side assert). One pass over the files, ~1 ms per million tokens."""
    vocab = meta["vocab_size"]
    for name, ids in arrays.items():
        top = int(ids.max())
        if top >= vocab:
            raise UsageError(f"{data_dir / (name + '.bin')} holds token id {top}, but meta.json "
                             f"says the vocabulary has {vocab:,} ids: rerun `gptlab prepare`")
    tokenizer_vocab = load_tokenizer(tokenizer_path).vocab_size
    if tokenizer_vocab != vocab:
        raise UsageError(f"{tokenizer_path} has {tokenizer_vocab:,} tokens but meta.json says "
                         f"{vocab:,}: rerun `gptlab prepare`")


def _read_meta(path: Path) -> dict:
    if not path.is_file():
        raise UsageError(f"missing {path} (an incomplete data directory? rerun `gptlab prepare`)")
    meta = read_json_object(path, "data description")
    if meta.get("version") != META_VERSION:
        raise UsageError(f"{path}: unsupported version {meta.get('version')!r}")
    for key in ("vocab_size", "train_tokens", "val_tokens"):
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"{path}: {key} must be a positive integer, got {value!r}")
    if meta.get("dtype") not in ("uint16", "uint32"):
        raise UsageError(f"{path}: dtype must be uint16 or uint32, got {meta.get('dtype')!r}")
    expected_dtype = token_dtype(meta["vocab_size"]).name
    if meta["dtype"] != expected_dtype:
        raise UsageError(
            f"{path}: dtype {meta['dtype']} does not match vocab_size {meta['vocab_size']} "
            f"(expected {expected_dtype})"
        )
    return meta


def check_enough_tokens(data: TokenData, block_size: int) -> None:
    """One (x, y) window needs block_size + 1 tokens in each split."""
    for name in ("train", "val"):
        n = len(data.split(name))
        if n <= block_size:
            raise SettingError(
                f"the {name} split has {n:,} tokens, too few for one block of {block_size:,} "
                f"(needs at least {block_size + 1:,}): use more text, a different "
                "--val-fraction or a smaller ", Setting("block_size"))


# --- the trainer's batches ------------------------------------------------------------------


def ensure_prepared(data_dir: Path, source: str, make: Callable[[], tuple[str, Tokenizer]],
                    *, kind: str | None = None, replace_other: bool = False,
                    by: str = "prepare") -> tuple[dict, bool]:
    """(meta, reused): data_dir's meta when it already holds a complete, readable copy
    prepared from `source` (and with a tokenizer of `kind`, if given); else data_dir
    prepared from make() -> (text, tokenizer), with a tenth of it for validation. A damaged
    copy is prepared again; data from another source is refused, or replaced where the
    caller owns the folder (replace_other). Never anything but a data directory
    (gptlab.files.kinds)."""
    # Another kind of folder is refused; data from this source is reused, other data
    # replaced only where the caller owns the folder (below).
    kinds.claim(data_dir, kinds.DATA, force=True)
    if (data_dir / META_FILE).is_file():
        try:
            meta = load_data(data_dir).meta
        except UsageError:
            meta = None  # damaged: prepared again below
        same = meta is not None and meta.get("source") == source
        if same and kind in (None, meta.get("tokenizer")):
            return meta, True
        if meta is not None and not replace_other:
            raise UsageError(f"{data_dir} holds other data ({meta.get('source')!r})")
    text, tokenizer = make()
    # force: other data only where replace_other said so above; a damaged copy is no loss
    return prepare(text, data_dir, tokenizer, val_fraction=0.1, source=source,
                   force=True, by=by), False
