"""`gptlab eval`: loss, perplexity and bits of a model on any text (see
gptlab.inference.evaluate)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.tokeninput import add_text_options, input_texts, legacy_notice
from gptlab.errors import UsageError

if TYPE_CHECKING:
    from gptlab.inference.evaluate import Score


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="loss, perplexity and bits per character of a model on any text",
        description=(
            "Score MODEL (a run or model directory, RUN/best, a converted or Hugging Face "
            "directory, or a hub name) on text (--text, --text-file) or a prepared data "
            "split. Every token after the first is scored exactly once, in windows of "
            "--context tokens sliding by --stride, each token with the longest left context "
            "its window gives it (the method of Hugging Face's 'Perplexity of fixed-length "
            "models'; at stride = context the windows do not overlap and, as there, each "
            "window's first token is "
            "not scored). Bits per character and per byte compare across tokenizers."
        ),
        examples=[
            "gptlab eval runs/demo --data runs/demo-data",
            "gptlab eval runs/demo/best --text-file play.txt other.txt --json",
            "gptlab eval openai-community/gpt2 --text 'Hello, world.' --context 512",
        ],
    )
    p.add_argument("model", metavar="MODEL", help="anything gptlab.load takes: a run or "
                   "model directory, RUN/best, a Hugging Face directory or hub name")
    source = p.add_mutually_exclusive_group(required=True)
    add_text_options(source, many=True, what="text to score")
    source.add_argument("--data", metavar="DATA_DIR",
                        help="a data directory from `gptlab prepare` (its --split is scored)")
    p.add_argument("--split", choices=("val", "train"),
                   help="which split of --data (default val)")
    p.add_argument("--context", type=argtypes.int_in(2), metavar="N",
                   help="tokens per window, at least 2 (default: the model's block_size)")
    p.add_argument("--stride", type=argtypes.int_in(1), metavar="S",
                   help="tokens a window moves on (default: half the context)")
    p.add_argument("--batch-size", type=argtypes.int_in(1), default=8, metavar="B",
                   help="windows per forward pass (default 8)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.split is not None and args.data is None:
        raise UsageError("--split chooses a split of --data; a text is scored whole")
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.distributed.process import pick_device
    from gptlab.inference.evaluate import score_text
    from gptlab.loading import load

    inputs = input_texts(args, legacy_files=True)
    model, tokenizer = load(args.model, device=pick_device(args.device))
    options = dict(context=args.context, stride=args.stride, batch_size=args.batch_size)
    if inputs:
        files = sum(label != "the --text" for label, _ in inputs)
        score, what = None, (f"{files} file(s)" if files else f"{len(inputs)} text(s)")
        for _, text in inputs:
            piece = score_text(model, tokenizer, text, **options)
            score = piece if score is None else score + piece
    else:
        score, what = score_split(model, tokenizer, Path(args.data), args.split or "val",
                                  **options)
    if args.json:
        print(json.dumps({"model": args.model, "source": what, **score.to_dict()}))
    else:
        print(f"{args.model} on {what}: {score.scored:,} of {score.tokens:,} tokens scored")
        print(f"loss {score.loss:.4f} nats/token   perplexity {score.perplexity:.3f}   "
              f"bits/token {score.bits_per_token:.4f}")
        print(f"bits/char {score.bits_per_char:.4f}   bits/byte {score.bits_per_byte:.4f}   "
              f"({score.chars:,} characters, {score.bytes:,} bytes)")
    legacy_notice(args, "gptlab eval")
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
