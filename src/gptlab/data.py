"""Corpora -> token files -> batches.

A data directory holds `train.bin` and `val.bin` (token ids, flat, native-endian uint16,
or uint32 when the vocabulary exceeds 65535), the `tokenizer.json` that produced them and
a `meta.json` describing both. `meta.json` is written last, so a directory with one is
complete. The split follows nanoGPT's data/shakespeare_char/prepare.py: the TEXT is cut at
int(n * (1 - val_fraction)) characters, then each part is encoded on its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gptlab.atomic import atomic_path, atomic_write_text, ensure_dir, read_json_object
from gptlab.distributed import Dist
from gptlab.errors import UsageError
from gptlab.tokenizers import CharTokenizer, Tokenizer

META_VERSION = 1
FILES = ("train.bin", "val.bin", "tokenizer.json", "meta.json")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65535 else np.dtype(np.uint32)


def read_text(path: str | Path) -> str:
    """A UTF-8 text file, or a folder's .txt files in name order joined by newlines."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"input not found: {path}")
    if path.is_dir():
        files = sorted(p for p in path.glob("*.txt") if p.is_file())
        if not files:
            raise UsageError(f"no .txt files in folder {path}")
    else:
        files = [path]
    parts = [_read_utf8(f) for f in files]
    # Files that end without a newline still start the next one on a new line.
    return "".join(p if p.endswith("\n") or i == len(parts) - 1 else p + "\n"
                   for i, p in enumerate(parts))


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None
    return text.removeprefix("\ufeff")  # a byte-order mark is not part of the text


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """First (1 - val_fraction) of the characters for training, the rest for validation."""
    if not 0.0 < val_fraction < 1.0:
        raise UsageError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    if not text.strip():
        raise UsageError("the corpus is empty (or only whitespace)")
    n = len(text)
    cut = int(n * (1.0 - val_fraction))
    if cut == 0 or cut == n:
        raise UsageError(
            f"the corpus has {n} characters, too few to split with --val-fraction {val_fraction}"
        )
    return text[:cut], text[cut:]


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
) -> dict:
    """Split, encode and write a data directory; return its meta dict.

    Refuses (unless force) to write into a run directory, or over a data directory made
    with another tokenizer: the runs trained on it would decode garbage."""
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
                f"the tokenizer produced ids outside its vocabulary of {tokenizer.vocab_size}"
            )
    out_dir = Path(out_dir)
    if not force:
        check_replaceable(out_dir, tokenizer)
    ensure_dir(out_dir)
    # Without meta.json the directory reads as incomplete until the new one lands.
    (out_dir / "meta.json").unlink(missing_ok=True)
    for name, ids in splits.items():
        with atomic_path(out_dir / f"{name}.bin") as tmp:
            ids.astype(dtype).tofile(tmp)
    tokenizer.save(out_dir / "tokenizer.json")
    meta = {
        "version": META_VERSION,
        "vocab_size": int(tokenizer.vocab_size),
        "dtype": dtype.name,
        "tokenizer": tokenizer.kind,
        "train_tokens": int(splits["train"].size),
        "val_tokens": int(splits["val"].size),
        "val_fraction": float(val_fraction),
        "source": source,
    }
    atomic_write_text(out_dir / "meta.json", json.dumps(meta, indent=2) + "\n")
    return meta


def check_replaceable(out_dir: Path, tokenizer: Tokenizer) -> None:
    """out_dir may receive a data directory made with `tokenizer`."""
    import tempfile

    from gptlab.rundir import STATE_FILE, TRAIN_CONFIG_FILE

    if not out_dir.is_dir():
        return
    if (out_dir / STATE_FILE).exists() or (out_dir / TRAIN_CONFIG_FILE).exists():
        raise UsageError(f"{out_dir} holds a training run; prepare data into another directory")
    old = out_dir / "tokenizer.json"
    if not old.is_file():
        return
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(Path(tmp) / "tokenizer.json")
        same = (Path(tmp) / "tokenizer.json").read_bytes() == old.read_bytes()
    if not same:
        raise UsageError(f"{out_dir} holds data made with another tokenizer; replacing it "
                         f"would leave the runs trained on it unreadable")


@dataclass
class TokenData:
    train: np.ndarray  # read-only memmap of token ids
    val: np.ndarray
    meta: dict
    vocab_size: int
    tokenizer_path: Path

    def split(self, name: str) -> np.ndarray:
        return {"train": self.train, "val": self.val}[name]


def load_data(data_dir: str | Path) -> TokenData:
    """Open a data directory written by `prepare`, checking it against its meta.json."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise UsageError(f"data directory not found: {data_dir} (make one with `gptlab prepare`)")
    meta = _read_meta(data_dir / "meta.json")
    dtype = np.dtype(meta["dtype"])
    arrays = {}
    for name in ("train", "val"):
        path = data_dir / f"{name}.bin"
        if not path.is_file():
            raise UsageError(f"missing {path}")
        expected = meta[f"{name}_tokens"] * dtype.itemsize
        if path.stat().st_size != expected:
            raise UsageError(
                f"{path} has {path.stat().st_size} bytes but meta.json says "
                f"{meta[f'{name}_tokens']} {dtype.name} tokens ({expected} bytes)"
            )
        arrays[name] = np.memmap(path, dtype=dtype, mode="r")
    tokenizer_path = data_dir / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise UsageError(f"missing {tokenizer_path}")
    _check_vocabulary(data_dir, meta, arrays, tokenizer_path)
    return TokenData(arrays["train"], arrays["val"], meta, meta["vocab_size"], tokenizer_path)


def _check_vocabulary(data_dir: Path, meta: dict, arrays: dict[str, np.ndarray],
                      tokenizer_path: Path) -> None:
    """Every token id below meta.json's vocab_size, which is the tokenizer's: checked now,
    since an id past the embedding table would fail only mid-training (or, on a GPU, as
    an unreadable device-side assert). One pass over the files, ~1 ms per million tokens."""
    from gptlab.tokenizers import load_tokenizer

    vocab = meta["vocab_size"]
    for name, ids in arrays.items():
        top = int(ids.max())
        if top >= vocab:
            raise UsageError(f"{data_dir / (name + '.bin')} holds token id {top}, but meta.json "
                             f"says the vocabulary has {vocab} ids: rerun `gptlab prepare`")
    tokenizer_vocab = load_tokenizer(tokenizer_path).vocab_size
    if tokenizer_vocab != vocab:
        raise UsageError(f"{tokenizer_path} has {tokenizer_vocab} tokens but meta.json says "
                         f"{vocab}: rerun `gptlab prepare`")


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
            raise UsageError(
                f"the {name} split has {n} tokens, too few for one block of {block_size} "
                f"(needs at least {block_size + 1}): use more text, a different "
                f"--val-fraction or a smaller block_size"
            )


def get_batch(
    tokens: np.ndarray,
    batch_size: int,
    block_size: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random contiguous windows on the CPU: x (B, T) int64 and y, the same windows
    shifted by one."""
    if len(tokens) <= block_size:
        raise UsageError(f"{len(tokens)} tokens are too few for one block of {block_size}")
    offsets = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)
    # One fancy-indexing gather reads all windows from the memmap: (B, T + 1).
    index = offsets.numpy()[:, None] + np.arange(block_size + 1)
    windows = torch.from_numpy(np.asarray(tokens[index]).astype(np.int64))
    return windows[:, :-1], windows[:, 1:]


# --- the trainer's batches ------------------------------------------------------------------


class TokenBatches:
    """Random windows of a token stream, the same draws whether 1 or N processes train.

    Every process holds the same generator and draws the offsets of the *global*
    micro-batch (batch_size x world_size windows); rank r keeps rows r*B..(r+1)*B. So the
    ranks see different windows, and N ranks x B reproduce 1 rank x N*B draw for draw.
    Training batches come from their own generator, seeded apart from the weights;
    evaluation batches from generators seeded by (seed, split, index): the same windows at
    every evaluation, independent of how far training has gone.
    """

    def __init__(self, train: np.ndarray, val: np.ndarray, batch_size: int, block_size: int,
                 seed: int, ctx: Dist) -> None:
        self.splits = {"train": train, "val": val}
        self.batch_size, self.block_size, self.seed, self.ctx = batch_size, block_size, seed, ctx
        self.generator = torch.Generator().manual_seed(derived_seed(seed, 0))

    def _draw(self, split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        B, ctx = self.batch_size, self.ctx
        x, y = get_batch(self.splits[split], B * ctx.world_size, self.block_size, generator)
        rows = slice(ctx.rank * B, (ctx.rank + 1) * B)
        return to_device(x[rows], ctx.device), to_device(y[rows], ctx.device)  # (B, T) each

    def train_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._draw("train", self.generator)

    def eval_batch(self, split: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        stream = 1 + 2 * index + (split == "val")
        return self._draw(split, torch.Generator().manual_seed(derived_seed(self.seed, stream)))

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def load_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


class NanoGPTBatches(TokenBatches):
    """nanoGPT's batch stream: every draw from torch's global generator, continuing the
    stream that initialised the weights, and the next training batch drawn as soon as the
    last one is handed out (nanoGPT's prefetch), so its recipe retraces its run."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.generator = torch.default_generator
        self.pending = self._draw("train", self.generator)

    def train_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        batch, self.pending = self.pending, self._draw("train", self.generator)
        return batch

    def eval_batch(self, split: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._draw(split, self.generator)

    def state(self) -> torch.Tensor:
        """The batch drawn ahead, (2, B, T); the generator is torch's own, which the
        trainer saves anyway."""
        return torch.stack(self.pending).cpu()

    def load_state(self, state: torch.Tensor) -> None:
        self.pending = (to_device(state[0], self.ctx.device), to_device(state[1], self.ctx.device))


BATCH_STREAMS = {"separate": TokenBatches, "nanogpt": NanoGPTBatches}


def derived_seed(seed: int, stream: int) -> int:
    """A seed for random stream number `stream` of a run. The weights are initialised from
    `seed` itself; the batches must not replay that same Mersenne Twister sequence, so each
    stream gets a seed scrambled by one step of Knuth's MMIX linear congruential generator."""
    return (((seed << 20) + stream) * 6364136223846793005 + 1442695040888963407) % 2**63


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU batch on `device`; on CUDA through pinned memory, so the copy overlaps the
    GPU's work."""
    t = t.contiguous()
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
