"""`gptlab attribute`: direct logit attribution: which heads and MLPs push a token's logit
(or one token's logit over another's) up or down, at one position of a text."""

from __future__ import annotations

import argparse
import json

from gptlab.cli import argtypes
from gptlab.cli.argtypes import TOKEN_ID_PREFIX
from gptlab.cli.outdir import check_out_dir, open_out_dir
from gptlab.cli.tokeninput import (
    add_text_options,
    encode_text,
    input_texts,
    token_id,
    token_labels,
)
from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_write_text
from gptlab.plots.interp import attribution_bars

BAR = 30  # characters of the longest bar


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "attribute",
        help="direct logit attribution: each head's and MLP's share of a logit",
        description=(
            "Split the logit of --target (minus that of --versus) after the text into what "
            "the embeddings, each attention head, each MLP and the biases write toward it, "
            "with the final norm's scale frozen at its value in this run (as "
            "TransformerLens's logit_attrs). The parts sum to the model's logit (difference)."
        ),
        examples=[
            "gptlab attribute runs/demo --text 'ROMEO:' --target '\\n'",
            "gptlab attribute runs/demo --text 'the king' --target s --versus id:0 "
            "--out runs/demo/attr",
        ],
    )
    p.add_argument("run_dir", metavar="MODEL", help=argtypes.MODEL_HELP)
    text = p.add_mutually_exclusive_group(required=True)
    add_text_options(text)
    p.add_argument("--target", required=True, type=argtypes.escaped_text, metavar="TOKEN",
                   help=f"the token whose logit to split: its text (one token) or "
                        f"{TOKEN_ID_PREFIX}N")
    p.add_argument("--versus", type=argtypes.escaped_text, metavar="TOKEN",
                   help="split the logit difference target - versus instead")
    p.add_argument("--position", type=int, default=-1, metavar="P",
                   help="the position whose next-token logits to split (default -1, the last)")
    p.add_argument("--out", metavar="DIR",
                   help="also write attribution.png and attribution.json here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_dir(args.out)
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.interp.attribution import logit_attribution
    from gptlab.loading import load, provenance

    (label, text), = input_texts(args)
    flag = "--text" if args.text is not None else f"--text-file {label}"
    model, tokenizer = load(args.run_dir)
    vocab = model.config.vocab_size
    idx = encode_text(tokenizer, text, model.config.block_size, flag)
    target = token_id(tokenizer, args.target, vocab, "--target")
    versus = None if args.versus is None else token_id(tokenizer, args.versus, vocab, "--versus")
    if versus == target:
        raise UsageError("--target and --versus are the same token; their difference is 0")
    T = idx.shape[1]
    if not -T <= args.position < T:
        raise UsageError(f"--position {args.position} is out of range for {T:,} tokens "
                         f"({-T}..{T - 1})")
    result = logit_attribution(model, idx, target, versus, args.position)
    values = [float(v) for v in result.values[:, 0]]
    names = token_labels(tokenizer, [target] + ([versus] if versus is not None else []))
    what = f"logit({names[0]})" + (f" - logit({names[1]})" if versus is not None else "")
    # the text as typed (its escapes shown once, as --text takes them), up to the position
    after = tokenizer.decode(idx[0, : result.position + 1].tolist())
    print(f"{what} after {after!r} (position {result.position}): "
          f"{float(result.total[0]):.4f}")
    print(f"sum of the parts: {sum(values):.4f}")
    print()
    print(format_bars(result.labels, values))
    if args.out is not None:
        out = open_out_dir(args.out, "attribute")
        attribution_bars(result.labels, values, title=f"direct logit attribution: {what}"
                         ).save(out / "attribution.png")
        report = {"model": provenance(model, args.run_dir),
                  "tokens": idx[0].tolist(), "position": result.position, "target": target,
                  "versus": versus, "total": float(result.total[0]),
                  "parts": dict(zip(result.labels, values, strict=True))}
        atomic_write_text(out / "attribution.json", json.dumps(report, indent=1) + "\n")
        print(f"wrote {out}/: attribution.png, attribution.json")
    return 0


def format_bars(labels: list[str], values: list[float]) -> str:
    """One line per part, in stream order: its value and a bar (+ up, - down)."""
    top = max((abs(v) for v in values), default=0.0) or 1.0
    width = max(len(label) for label in labels)
    lines = []
    for label, value in zip(labels, values, strict=True):
        bar = ("+" if value >= 0 else "-") * round(BAR * abs(value) / top)
        lines.append(f"{label:>{width}} {value:>+9.4f} {bar}")
    return "\n".join(lines)
