"""`gptlab eval`: loss, perplexity and bits of a model on any text (see
gptlab.inference.evaluate), at its context or a longer one, by position if asked."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.main import warned
from gptlab.cli.tokeninput import (
    add_text_options,
    input_texts,
    legacy_notice,
    legacy_text_files,
)
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.authorship import FIGURE

if TYPE_CHECKING:
    from gptlab.inference.evaluate import Score

DEFAULT_BUCKETS = 8


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="loss, perplexity and bits per character of a model on any text",
        description=(
            "Score MODEL (a run or model directory, RUN/best, a converted or Hugging Face "
            "directory, the shipped model's name shakespeare, or a hub name) on text (--text, "
            "--text-file) or a prepared data "
            "split. Every token after the first is scored exactly once, in windows of "
            "--context tokens sliding by --stride, each token with the longest left context "
            "its window gives it (the method of Hugging Face's 'Perplexity of fixed-length "
            "models'; at stride = context the windows do not overlap and, as there, each "
            "window's first token is not scored). Bits per character and per byte compare "
            "across tokenizers. --context may exceed the model's block_size (positions it "
            "never saw) for every positional encoding but learned positions; --rope-scaling "
            "stretches a RoPE model's frequencies at inference time; --by-position splits the "
            "loss by where each scored token sits in its window."
        ),
        examples=[
            "gptlab eval runs/demo --data runs/demo-data",
            "gptlab eval runs/demo/best --text-file play.txt other.txt --json",
            "gptlab eval runs/rope --data runs/data --context 256 --rope-scaling yarn:4 "
            "--by-position --plot by-position.png",
        ],
    )
    p.add_argument("model", metavar="MODEL", help=argtypes.MODEL_HELP)
    source = p.add_mutually_exclusive_group(required=True)
    add_text_options(source, many=True, what="text to score")
    source.add_argument("--data", metavar="DATA_DIR",
                        help="a data directory from `gptlab prepare` (its --split is scored)")
    p.add_argument("--split", choices=("val", "train"),
                   help="which split of --data (default val)")
    p.add_argument("--context", type=argtypes.int_in(2), metavar="N",
                   help="tokens per window, at least 2 (default: the model's block_size; "
                        "longer runs the model at positions it never saw, with a warning; "
                        "learned positions refuse)")
    p.add_argument("--stride", type=argtypes.int_in(1), metavar="S",
                   help="tokens a window moves on (default: half the context; = context: "
                        "non-overlapping windows)")
    p.add_argument("--rope-scaling", type=argtypes.rope_scaling, metavar="KIND:F",
                   help="stretch RoPE at inference time, no retraining: linear:F (position "
                        "interpolation), ntk:F (NTK-aware base), yarn:F, dynamic:F (dynamic "
                        "NTK), each from the model's block_size")
    p.add_argument("--by-position", action="store_true",
                   help="also the loss per position bucket of the window")
    p.add_argument("--buckets", type=argtypes.int_in(1), default=DEFAULT_BUCKETS, metavar="K",
                   help=f"position buckets for --by-position (default {DEFAULT_BUCKETS})")
    p.add_argument("--plot", metavar="PNG", help="with --by-position: draw it into this file "
                   "(.png or .svg)")
    p.add_argument("--force", action="store_true",
                   help="with --plot: replace FILE, if it is a figure gptlab drew")
    p.add_argument("--batch-size", type=argtypes.int_in(1), metavar="B",
                   help="windows per forward pass (default: 8,192 tokens' worth, 8 windows "
                        "of 1024, 128 of 64)")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.split is not None and args.data is None:
        raise UsageError("--split chooses a split of --data; a text is scored whole")
    if args.plot is not None and not args.by_position:
        raise UsageError("--plot draws the loss by position: give --by-position with it")
    if args.plot is not None:  # before the model loads and the text is scored
        kinds.claim_file(args.plot, FIGURE, force=args.force, sources=_sources(args),
                         flag="--plot")
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.distributed.process import pick_device
    from gptlab.inference.evaluate import score_text
    from gptlab.loading import load

    inputs = input_texts(args, legacy_files=True)
    with warned("gptlab eval"):
        model, tokenizer = load(args.model, device=pick_device(args.device),
                                context=args.context, rope_scaling=args.rope_scaling)
    options = dict(stride=args.stride, batch_size=args.batch_size)
    if inputs:
        files = sum(label != "the --text" for label, _ in inputs)
        score, what = None, (f"{files} file(s)" if files else f"{len(inputs)} text(s)")
        for _, text in inputs:
            piece = score_text(model, tokenizer, text, **options)
            score = piece if score is None else score + piece
    else:
        score, what = score_split(model, tokenizer, Path(args.data), args.split or "val",
                                  **options)
    by_position = score.positions.to_dict(args.buckets) if args.by_position else None
    if args.plot is not None:
        from gptlab.plots.positions import loss_by_position  # start-up time: torch

        kinds.claim_file(args.plot, FIGURE, force=args.force, sources=_sources(args),
                         flag="--plot")  # again: the scoring took a while
        loss_by_position({args.model: by_position}, trained=model.config.block_size,
                         title=f"{args.model} on {what}: loss by position").save(args.plot)
    if args.json:
        extra = {"context": model.context, "rope_scaling": args.rope_scaling}
        if by_position is not None:
            extra["by_position"] = by_position
        print(json.dumps({"model": args.model, "source": what, **score.to_dict(), **extra}))
    else:
        print(f"{args.model} on {what}: {score.scored:,} of {score.tokens:,} tokens scored")
        print(f"loss {score.loss:.4f} nats/token   perplexity {score.perplexity:.3f}   "
              f"bits/token {score.bits_per_token:.4f}")
        print(f"bits/char {score.bits_per_char:.4f}   bits/byte {score.bits_per_byte:.4f}   "
              f"({score.chars:,} characters, {score.bytes:,} bytes)")
        if by_position is not None:
            print(format_by_position(by_position, model.config.block_size))
        if args.plot is not None:
            print(f"wrote {args.plot}")
    legacy_notice(args, "gptlab eval")
    return 0


def _sources(args: argparse.Namespace) -> tuple[str, ...]:
    """What eval reads, which its figure may never replace."""
    texts = [*(args.text_file or []), *legacy_text_files(args)]
    return tuple(s for s in (args.model, args.data, *texts) if s)


def format_by_position(by_position: dict, trained: int) -> str:
    """The by-position table: one line per bucket, positions past training marked."""
    lines = [f"by position ({by_position['mode']} windows of {by_position['context']}, "
             f"stride {by_position['stride']}; * = past the {trained} trained positions):",
             f"  {'positions':>13} {'tokens':>10} {'loss':>8}"]
    for b in by_position["buckets"]:
        loss = "-" if b["loss"] is None else f"{b['loss']:.4f}"
        mark = " *" if b["last"] >= trained else ""
        lines.append(f"  {b['first']:>6}..{b['last']:<6} {b['tokens']:>10,} {loss:>8}{mark}")
    return "\n".join(lines)


def score_split(model, tokenizer, data_dir: Path, split: str, **options) -> tuple[Score, str]:
    """Score of a prepared split, which must come from the model's own tokenizer."""
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.data.prepared import load_data
    from gptlab.inference.evaluate import score_of

    ids = split_ids(load_data(data_dir), tokenizer, data_dir, split)
    return (score_of(model, ids, tokenizer.decode(ids.tolist()), **options),
            f"{data_dir} ({split})")


def split_ids(data, tokenizer, data_dir: Path, split: str):
    """A prepared split's token ids (a 1-D long tensor), refused when the data was prepared
    with another tokenizer than the model's."""
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import numpy as np
    import torch

    from gptlab.data.tokenizer import load_tokenizer, same_tokenizer

    if not same_tokenizer(load_tokenizer(data.tokenizer_path), tokenizer):
        raise UsageError(f"{data_dir} was prepared with another tokenizer than the model's: "
                         f"prepare it with `gptlab prepare --tokenizer MODEL/tokenizer.json`")
    return torch.from_numpy(np.asarray(data.split(split)).astype(np.int64))
