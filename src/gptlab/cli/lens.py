"""`gptlab lens`: the logit lens on a text: what the model would predict after each block."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.outdir import check_out_dir, open_out_dir
from gptlab.cli.tokeninput import add_text_options, encode_text, input_texts, token_labels
from gptlab.files.atomic import atomic_write_text
from gptlab.plots.interp import lens_grid

if TYPE_CHECKING:
    from torch import Tensor

CELL = 12  # characters per table cell: the token, then its probability


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lens",
        help="the logit lens: the top next token after each block, at each position",
        description=(
            "Read the residual stream after each block through the model's final norm and "
            "unembedding (the logit lens), and print, per depth and position, the likeliest "
            "next token and its probability, then, in the same columns, the probability "
            "each depth gives the token that actually comes next. The last row is the "
            "model's own prediction."
        ),
        examples=[
            "gptlab lens runs/demo --text 'ROMEO:\\nWhat'",
            "gptlab lens runs/demo --text-file line.txt --last 20 --out runs/demo/lens",
        ],
    )
    p.add_argument("run_dir", metavar="MODEL", help=argtypes.MODEL_HELP)
    text = p.add_mutually_exclusive_group(required=True)
    add_text_options(text)
    p.add_argument("--last", type=argtypes.int_in(1), default=10, metavar="N",
                   help="print the last N positions (default 10; the PNG and JSON have all)")
    p.add_argument("--top", type=argtypes.int_in(1, 100), default=5, metavar="K",
                   help="tokens per cell in lens.json (default 5)")
    p.add_argument("--out", metavar="DIR", help="also write lens.png and lens.json here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_dir(args.out)
    (label, text), = input_texts(args)
    flag = "--text" if args.text is not None else f"--text-file {label}"
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.interp import lens
    from gptlab.loading import load, provenance

    model, tokenizer = load(args.run_dir)
    idx = encode_text(tokenizer, text, model.config.block_size, flag)
    logits = lens.logit_lens(model, idx)  # (rows, 1, T, vocab)
    probs, ids = lens.top_tokens(logits[:, 0], args.top)  # (rows, T, k)
    following = lens.next_token_probs(logits, idx)[:, 0]  # (rows, T - 1)
    rows = lens.depth_names(logits.shape[0] - 1)
    inputs = token_labels(tokenizer, idx[0].tolist())
    tops = [token_labels(tokenizer, ids[r, :, 0].tolist()) for r in range(len(rows))]

    shown = (f" (the last {args.last} shown: --last N for more)" if idx.shape[1] > args.last
             else "")
    print(f"input: {idx.shape[1]:,} tokens{shown}; each cell: the top next token and its "
          f"probability")
    print(format_grid(rows, inputs, tops, probs[..., 0], args.last))
    if idx.shape[1] > 1:
        print()
        print("probability of the actual next token, by depth (the same positions):")
        print(format_following(rows, inputs, following, args.last))
    if args.out is not None:
        out = open_out_dir(args.out, "lens")
        lens_grid(probs[..., 0], tops, rows, inputs,
                  title="logit lens: top next token by depth").save(out / "lens.png")
        report = {"model": provenance(model, args.run_dir),
                  "tokens": idx[0].tolist(), "rows": rows,
                  "top_ids": ids.tolist(), "top_probs": probs.tolist(),
                  "next_token_probs": following.tolist()}
        atomic_write_text(out / "lens.json", json.dumps(report) + "\n")
        print(f"wrote {out}/: lens.png, lens.json")
    return 0


def _cell(text: str, width: int = CELL) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def format_grid(rows: list[str], inputs: list[str], tops: list[list[str]],
                probs: Tensor, last: int) -> str:
    start = max(0, len(inputs) - last)
    header = f"{'':>8} " + " ".join(f"{_cell(inputs[t]):>{CELL}}" for t in
                                    range(start, len(inputs)))
    lines = [header]
    for r, name in enumerate(rows):
        cells = [_cell(f"{_cell(tops[r][t], CELL - 5)} {float(probs[r, t]):.2f}")
                 for t in range(start, len(inputs))]
        lines.append(f"{name:>8} " + " ".join(f"{c:>{CELL}}" for c in cells))
    return "\n".join(lines)


def format_following(rows: list[str], inputs: list[str], following: Tensor,
                     last: int) -> str:
    """following (rows, T - 1): the probability of inputs[t + 1] after position t, printed
    in position t's column, the columns of format_grid (the last position has no next
    token: '-')."""
    T = len(inputs)
    positions = range(max(0, T - last), T)
    header = f"{'':>8} " + " ".join(
        f"{_cell('->' + inputs[t + 1]) if t + 1 < T else '':>{CELL}}" for t in positions)
    lines = [header.rstrip()]
    for r, name in enumerate(rows):
        lines.append(f"{name:>8} " + " ".join(
            f"{float(following[r, t]):>{CELL}.3f}" if t + 1 < T else f"{'-':>{CELL}}"
            for t in positions))
    return "\n".join(lines)
