"""`gptlab prepare`: text -> a data directory of token files (see gptlab.data.prepared)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.data import corpus, download
from gptlab.data.text import read_text
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.kinds import META_FILE, TOKENIZER_FILE, TRAIN_BIN, VAL_BIN

if TYPE_CHECKING:
    from gptlab.data.tokenizer import Tokenizer

DEFAULT_BPE_VOCAB = 1024
# What a data directory holds, in the order prepare writes it (meta last).
DATA_FILES = (TRAIN_BIN, VAL_BIN, TOKENIZER_FILE, META_FILE)


def _tinyshakespeare() -> str:
    path = download.fetch(download.TINYSHAKESPEARE_URL, sha256=download.TINYSHAKESPEARE_SHA256)
    return read_text(path)


# Named corpora: `shakespeare` ships with the package (offline), `tinyshakespeare` is fetched.
SOURCES = {
    "shakespeare": corpus.shakespeare_text,
    "tinyshakespeare": _tinyshakespeare,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "prepare",
        help="turn text into token files for training",
        description=(
            f"Turn a corpus into a data directory: {TRAIN_BIN} and {VAL_BIN} (token ids), "
            f"{TOKENIZER_FILE} and {META_FILE}. Give exactly one source: a NAME "
            f"({', '.join(SOURCES)}), --input PATH or --url URL."
        ),
        examples=[
            "gptlab prepare shakespeare --out data/shakespeare",
            "gptlab prepare --input input.txt --tokenizer bpe --vocab-size 1024 --out data/tiny",
            "gptlab prepare --input play.txt --tokenizer runs/demo/tokenizer.json --out data/play",
        ],
    )
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="shakespeare (embedded, offline) or tinyshakespeare (downloaded)")
    p.add_argument("--input", metavar="PATH", help="a UTF-8 text file or a folder of .txt files")
    p.add_argument("--url", metavar="URL", help="download a text file (cached, checksummed "
                   "only for named sources; cache: $GPTLAB_CACHE or ~/.cache/gptlab)")
    p.add_argument("--tokenizer", default="char", metavar="char|bpe|PATH.json",
                   help="char (default), bpe (byte-level BPE trained on the corpus) "
                        "or an existing tokenizer.json")
    p.add_argument("--vocab-size", type=int, metavar="N",
                   help=f"vocabulary size for --tokenizer bpe (default {DEFAULT_BPE_VOCAB})")
    p.add_argument("--val-fraction", type=argtypes.finite_float, default=0.1, metavar="F",
                   help="last fraction of the text kept for validation (default 0.1)")
    p.add_argument("--out", required=True, metavar="DATA_DIR",
                   help=f"the data directory to write ({', '.join(DATA_FILES)})")
    p.add_argument("--force", action="store_true",
                   help="replace the data a data directory already holds (the runs trained "
                        "on it then refuse to resume; the same tokens again need none); never "
                        "another kind of folder")
    p.add_argument("--drop-unknown", action="store_true",
                   help="with a character tokenizer.json: leave out the text's characters it "
                        "has no token for (by default they are refused, listed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 0.0 < args.val_fraction < 1.0:  # checked before any download or training
        raise UsageError(
            f"--val-fraction must be between 0 and 1 (exclusive), got {args.val_fraction}"
        )
    if args.drop_unknown and args.tokenizer == "bpe":
        raise UsageError("--drop-unknown is for a character tokenizer.json; byte-level BPE "
                         "encodes every character")
    # before a download or BPE training, not after: never another kind of folder (whether
    # the data there may be replaced is known once the new tokens are: prepare())
    kinds.claim(args.out, kinds.DATA, force=True)
    # start-up time: numpy and tokenizers load when a corpus is prepared, not at parsing
    from gptlab.data.prepared import check_replaceable, load_data, prepare

    text, source = load_source(args.name, args.input, args.url)
    tokenizer = make_tokenizer(args.tokenizer, args.vocab_size, text)
    short = bpe_shortfall(args.tokenizer, args.vocab_size, tokenizer.vocab_size)
    if short:
        print(f"gptlab prepare: note: {short}", file=sys.stderr)
    text, dropped = known_characters(text, source, tokenizer, args.drop_unknown)
    if not args.force:
        try:
            check_replaceable(Path(args.out), tokenizer)
        except UsageError as exc:
            raise UsageError(f"{exc} (--force replaces it)") from None
    try:
        before = load_data(args.out).fingerprint()
    except UsageError:
        before = None  # nothing complete there
    meta = prepare(text, args.out, tokenizer, val_fraction=args.val_fraction, source=source,
                   force=args.force)
    print(
        f"{source}: {len(text):,} characters -> {meta['train_tokens']:,} train + "
        f"{meta['val_tokens']:,} val tokens ({meta['tokenizer']} tokenizer, "
        f"vocab {meta['vocab_size']:,}, {meta['dtype']})"
    )
    if dropped:
        print(f"left out {dropped} (--drop-unknown)")
    if before == meta["fingerprint"] and not args.force:
        print(f"{Path(args.out)}/ already holds these tokens: unchanged")
    else:
        print(f"wrote {Path(args.out)}/: {' '.join(DATA_FILES)}")
    return 0


def load_source(name: str | None, input_path: str | None, url: str | None) -> tuple[str, str]:
    """The corpus text and a short description of where it came from."""
    given = [s for s in (name, input_path, url) if s is not None]
    if len(given) != 1:
        raise UsageError("give exactly one source: NAME, --input PATH or --url URL")
    if name is not None:
        if name not in SOURCES:
            raise UsageError(f"unknown corpus {name!r}; known: {', '.join(SOURCES)}")
        return SOURCES[name](), name
    if input_path is not None:
        return read_text(input_path), str(input_path)
    return read_text(download.fetch(url)), url


def make_tokenizer(spec: str, vocab_size: int | None, text: str) -> Tokenizer:
    # start-up time: numpy and tokenizers load when a corpus is prepared, not at parsing
    from gptlab.data.tokenizer import CharTokenizer, HFTokenizer, load_tokenizer

    if spec != "bpe" and vocab_size is not None:
        raise UsageError("--vocab-size applies only to --tokenizer bpe")
    if spec == "char":
        if not text.strip():
            raise UsageError("the corpus is empty (or only whitespace)")
        return CharTokenizer.from_text(text)
    if spec == "bpe":
        if not text.strip():
            raise UsageError("the corpus is empty (or only whitespace)")
        return HFTokenizer.train_bpe(text, DEFAULT_BPE_VOCAB if vocab_size is None else vocab_size)
    return load_tokenizer(spec)


def bpe_shortfall(spec: str, asked: int | None, learned: int) -> str | None:
    """What to say where BPE learned fewer tokens than --vocab-size asked (None: it did
    not): on little text no pair repeats long before the vocabulary fills."""
    if spec != "bpe":
        return None
    asked = DEFAULT_BPE_VOCAB if asked is None else asked
    if learned >= asked:
        return None
    return (f"BPE learned a vocabulary of {learned:,} tokens, not the {asked:,} --vocab-size "
            f"asked for: merges stop where no pair of tokens appears twice in the text (more "
            f"text gives more)")


def known_characters(text: str, source: str, tokenizer: Tokenizer, drop: bool
                     ) -> tuple[str, str]:
    """(text, what was left out of it: '' for nothing). A character tokenizer has no
    unknown token (a model cannot learn a new symbol by fine-tuning, and a silent stand-in
    would hide the loss), so characters it has no token for are refused, listed, or with
    drop left out."""
    unknown = tokenizer.unknown(text) if tokenizer.kind == "char" else {}
    if not unknown:
        return text, ""
    listed = ", ".join(f"{c!r} x{n:,}" for c, n in list(unknown.items())[:10])
    more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    total = sum(unknown.values())
    if not drop:
        raise UsageError(
            f"{source} has {len(unknown)} character(s) the char tokenizer "
            f"({tokenizer.vocab_size:,} symbols) has no token for: {listed}{more}; it has no "
            f"unknown token and a model cannot learn a new symbol: replace them in the text, "
            f"or pass --drop-unknown to leave out these {total:,} characters")
    return (text.translate(dict.fromkeys(map(ord, unknown))),
            f"{total:,} characters the tokenizer has no token for: {listed}{more}")
