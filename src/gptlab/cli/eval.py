"""`gptlab eval`: loss, perplexity and bits of a model on any text (see
gptlab.inference.evaluate)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.data.text import read_text
from gptlab.errors import UsageError

if TYPE_CHECKING:
    from gptlab.inference.evaluate import Score


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="loss, perplexity and bits per character of a model on any text",
        description=(
            "Score MODEL (a run or model directory, RUN/best, a converted or Hugging Face "
            "directory, the shipped model's name shakespeare, or a hub name) on text files or a prepared data split. Every token "
            "after the first is scored exactly once, in windows of --context tokens sliding "
            "by --stride, each token with the longest left context its window gives it (the "
            "method of Hugging Face's 'Perplexity of fixed-length models'; at stride = "
            "context the windows do not overlap and, as there, each window's first token is "
            "not scored). Bits per character and per byte compare across tokenizers."
        ),
    )
    p.add_argument("model", metavar="MODEL")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", nargs="+", metavar="FILE",
                        help="UTF-8 text files, each scored as its own document")
    source.add_argument("--data", metavar="DATA_DIR", help="a directory from `gptlab prepare`")
    p.add_argument("--split", choices=("val", "train"), default="val",
                   help="which split of --data (default val)")
    p.add_argument("--context", type=int, metavar="N",
                   help="tokens per window (default: the model's block_size)")
    p.add_argument("--stride", type=int, metavar="S",
                   help="tokens a window moves on (default: half the context)")
    p.add_argument("--batch-size", type=int, default=8, metavar="B",
                   help="windows per forward pass (default 8)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.distributed.process import pick_device
    from gptlab.inference.evaluate import score_text
    from gptlab.loading import load

    model, tokenizer = load(args.model, device=pick_device(args.device))
    options = dict(context=args.context, stride=args.stride, batch_size=args.batch_size)
    if args.text is not None:
        score, what = None, f"{len(args.text)} file(s)"
        for path in args.text:
            piece = score_text(model, tokenizer, _read(Path(path)), **options)
            score = piece if score is None else score + piece
    else:
        score, what = score_split(model, tokenizer, Path(args.data), args.split, **options)
    if args.json:
        print(json.dumps({"model": args.model, "source": what, **score.to_dict()}))
        return 0
    print(f"{args.model} on {what}: {score.scored:,} of {score.tokens:,} tokens scored")
    print(f"loss {score.loss:.4f} nats/token   perplexity {score.perplexity:.3f}   "
          f"bits/token {score.bits_per_token:.4f}")
    print(f"bits/char {score.bits_per_char:.4f}   bits/byte {score.bits_per_byte:.4f}   "
          f"({score.chars:,} characters, {score.bytes:,} bytes)")
    return 0


def score_split(model, tokenizer, data_dir: Path, split: str, **options) -> tuple[Score, str]:
    """Score of a prepared split, which must come from the model's own tokenizer."""
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import numpy as np
    import torch

    from gptlab.data.prepared import load_data
    from gptlab.data.tokenizer import load_tokenizer, same_tokenizer
    from gptlab.inference.evaluate import Score, score_ids

    data = load_data(data_dir)
    if not same_tokenizer(load_tokenizer(data.tokenizer_path), tokenizer):
        raise UsageError(f"{data_dir} was prepared with another tokenizer than the model's: "
                         f"prepare it with `gptlab prepare --tokenizer MODEL/tokenizer.json`")
    ids = torch.from_numpy(np.asarray(data.split(split)).astype(np.int64))
    nll, scored = score_ids(model, ids, **options)
    text = tokenizer.decode(ids.tolist())
    return (Score(nll, scored, len(ids), len(text), len(text.encode("utf-8"))),
            f"{data_dir} ({split})")


def _read(path: Path) -> str:
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give text files")
    return read_text(path)
