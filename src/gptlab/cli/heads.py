"""`gptlab heads`: score every attention head of a model, ablate each one, and draw the
strongest heads' attention patterns."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.outdir import beside_model, check_out_dir, open_out_dir
from gptlab.cli.tokeninput import add_text_options, input_texts, legacy_notice, token_labels
from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_write_text
from gptlab.interp.head_kinds import ABLATION_MODES, SCORE_NAMES
from gptlab.plots import interp as plots

if TYPE_CHECKING:
    from torch import Tensor

SHORT = {"previous_token": "prev-token", "duplicate_token": "duplicate", "induction": "induction"}
DEFAULT_SEQ_LEN = 50  # TransformerLens's induction demos use 50 random tokens, repeated
RANDOM_BATCH = 4


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "heads",
        help="find previous-token, duplicate-token and induction heads",
        description=(
            "Score every attention head of MODEL as TransformerLens's head detector does "
            "(the share of its attention on the previous token, on earlier copies of the "
            "current token, and on the token after such a copy), measure how much the loss "
            "rises when the head is ablated, and write heatmaps of the strongest heads' "
            "attention patterns. Without --text or --text-file the input is random tokens "
            "repeated twice, where induction heads show clearly."
        ),
        examples=[
            "gptlab heads runs/demo",
            "gptlab heads runs/demo --text-file line.txt --ablate mean --out heads-line",
            "gptlab heads runs/demo --text 'to be or not to be' --top 1",
        ],
    )
    p.add_argument("run_dir", metavar="MODEL", help=argtypes.MODEL_HELP)
    text = p.add_mutually_exclusive_group()
    add_text_options(text, what="text to analyse (at most the model's context in tokens)")
    p.add_argument("--out", metavar="DIR", help="where to write the PNGs and scores.json "
                   "(default: MODEL/heads when MODEL is a local directory; the shipped "
                   "model and hub names need --out)")
    p.add_argument("--top", type=argtypes.int_in(0), default=3, metavar="N",
                   help="draw the N strongest heads' patterns (default 3; 0 for none)")
    p.add_argument("--ablate", choices=ABLATION_MODES, default="zero",
                   help="zero (default): the head's output is zeroed; mean: replaced by its "
                        "mean over the input")
    p.add_argument("--seq-len", type=argtypes.int_in(2), metavar="N",
                   help="random tokens per half without --text (default: "
                        f"{DEFAULT_SEQ_LEN} or half the context, the smaller)")
    p.add_argument("--seed", type=argtypes.seed, default=0, metavar="S",
                   help="seed for the random tokens without --text (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the folder of the model loaded (a run's, not one named like a shipped model)
    out = Path(args.out) if args.out is not None else beside_model(args.run_dir, "heads")
    check_out_dir(out)  # before the scoring and ablations, not after
    inputs = input_texts(args, legacy_files=True)
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import torch

    from gptlab.interp.heads import (
        ablation_deltas,
        chance_scores,
        head_scores,
        induction_probe,
        per_token_loss,
    )
    from gptlab.interp.hooks import capture_attention
    from gptlab.loading import load, provenance

    # random tokens need no tokenizer (heatmap labels fall back to ids); a text does
    model, tokenizer = load(args.run_dir, require_tokenizer=bool(inputs))
    config = model.config

    if inputs:
        (label, text), = inputs
        ids, described = _text_tokens(label, text, tokenizer, config.block_size)
        idx = torch.tensor([ids])
        losses = per_token_loss(model, idx).mean(dim=0)  # (T-1,)
        scores = head_scores(model, idx)
        halves = ""
    else:
        half = _seq_len(args.seq_len, config.block_size)
        generator = torch.Generator().manual_seed(args.seed)
        probe = induction_probe(model, half, RANDOM_BATCH, generator)
        idx, losses, scores = probe["tokens"], probe["per_token_loss"], probe["scores"]
        described = (f"no --text given: {RANDOM_BATCH} sequences of {half} random tokens, "
                     f"each repeated once ({2 * half:,} tokens; seed {args.seed})")
        halves = (f"; first half {probe['loss_first_half']:.4f}, repeated half "
                  f"{probe['loss_second_half']:.4f}")

    chance = chance_scores(idx)
    deltas = ablation_deltas(model, idx, mode=args.ablate)

    print(f"input: {described}")
    print(f"clean loss {float(losses.mean()):.4f} nats/token{halves}")
    print("chance (uniform causal attention): " + "  ".join(
        f"{SHORT[name]} {chance[name]:.3f}" for name in SCORE_NAMES))
    print()
    print(format_table(scores, deltas, args.ablate))

    strongest = rank_heads(scores, chance)[: args.top]
    patterns = capture_attention(model, idx[:1])[:, 0] if strongest else None  # (L, nh, T, T)
    open_out_dir(out, "heads")
    written = _write_outputs(out, patterns, idx, tokenizer, scores, chance, deltas, strongest,
                             described, args.ablate, provenance(model, args.run_dir))
    print()
    for (layer, head, name, ratio) in strongest:
        print(f"strongest: layer {layer} head {head}: {SHORT[name]} "
              f"{float(scores[name][layer, head]):.3f} ({ratio:.1f}x chance)")
    print(f"wrote {out}/: {', '.join(written)}")
    legacy_notice(args, "gptlab heads")
    return 0


def format_table(scores: dict[str, Tensor], deltas: Tensor, mode: str) -> str:
    """One row per head: the three scores and the loss change when it is ablated."""
    header = (f"{'layer':>5} {'head':>4} {'prev-token':>10} {'duplicate':>10} "
              f"{'induction':>10} {'dloss(' + mode + ')':>12}")
    rows = [header]
    n_layer, n_head = deltas.shape
    for layer in range(n_layer):
        for head in range(n_head):
            values = [float(scores[name][layer, head]) for name in SCORE_NAMES]
            rows.append(f"{layer:>5} {head:>4} " + " ".join(f"{v:>10.3f}" for v in values)
                        + f" {float(deltas[layer, head]):>+12.4f}")
    return "\n".join(rows)


def rank_heads(
    scores: dict[str, Tensor], chance: dict[str, float]
) -> list[tuple[int, int, str, float]]:
    """(layer, head, kind, score / chance) for every head, by its best multiple of the
    chance score, highest first. A kind the input gives no chance to (no repeated token
    means no duplicate or induction target) is left out."""
    ranked = []
    n_layer, n_head = next(iter(scores.values())).shape
    for layer in range(n_layer):
        for head in range(n_head):
            best = max(((float(scores[name][layer, head]) / chance[name], name)
                        for name in SCORE_NAMES if chance[name] > 0), default=None)
            if best is not None and math.isfinite(best[0]):
                ranked.append((layer, head, best[1], best[0]))
    return sorted(ranked, key=lambda r: -r[3])


def _write_outputs(out, patterns, idx, tokenizer, scores, chance, deltas, strongest, described,
                   mode, model: dict) -> list[str]:
    written = []
    if strongest:
        labels = token_labels(tokenizer, idx[0].tolist())
        for layer, head, name, ratio in strongest:
            filename = f"layer{layer}_head{head}.png"
            title = (f"layer {layer} head {head}: {SHORT[name]} "
                     f"{float(scores[name][layer, head]):.3f} ({ratio:.1f}x chance)")
            plots.attention_pattern(patterns[layer, head], title, labels).save(out / filename)
            written.append(filename)
    plots.head_scores(scores, title=described).save(out / "scores.png")
    written.append("scores.png")
    report = {
        "model": model,  # which model these are of (gptlab.loading.provenance)
        "input": described,
        "tokens": idx.tolist(),
        "chance": chance,
        "scores": {name: s.tolist() for name, s in scores.items()},
        "ablation": {"mode": mode, "loss_delta": deltas.tolist()},
        "strongest": [{"layer": la, "head": h, "kind": k, "times_chance": r}
                      for la, h, k, r in strongest],
    }
    atomic_write_text(out / "scores.json", json.dumps(report, indent=1) + "\n")
    written.append("scores.json")
    return written


def _text_tokens(label: str, text: str, tokenizer, block_size: int) -> tuple[list[int], str]:
    if not text:
        raise UsageError(f"{label} is empty: give some text to analyse")
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise UsageError(f"{label} gives {len(ids):,} token(s); the scores need at least 2")
    if len(ids) > block_size:
        raise UsageError(f"{label} is {len(ids):,} tokens, longer than the model's context of "
                         f"{block_size:,}; shorten it")
    return ids, f"{label}, {len(ids):,} tokens"


def _seq_len(requested: int | None, block_size: int) -> int:
    if requested is None:
        requested = min(DEFAULT_SEQ_LEN, block_size // 2)
    if requested < 2:
        raise UsageError(f"--seq-len must be at least 2 (the context is {block_size}), "
                         f"got {requested}")
    if 2 * requested > block_size:
        raise UsageError(f"--seq-len {requested} repeated twice is longer than the model's "
                         f"context of {block_size}; use at most {block_size // 2}")
    return requested
