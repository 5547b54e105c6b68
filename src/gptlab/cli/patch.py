"""`gptlab patch`: activation patching: run the corrupted text, put back one clean
activation at a time, and see how much of the clean prediction returns."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gptlab.cli import argtypes
from gptlab.cli.argtypes import TOKEN_ID_PREFIX
from gptlab.cli.outdir import check_out_dir, open_out_dir
from gptlab.cli.tokeninput import encode_text, token_id, token_labels
from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_write_text
from gptlab.plots.interp import patch_grids

if TYPE_CHECKING:
    from torch import Tensor

METRICS = ("logit-diff", "logit", "prob")
# A share restored is (patched - corrupted) / (clean - corrupted): where that gap is under
# this fraction of the metric's size (its larger value; 1 for a probability), the small
# moves any patch makes read as large shares (clean 9.4957 against corrupted 9.6608, 1.7%,
# gave shares from -1.5 to +1.8), and a warning says so.
MIN_GAP = 0.1
SWEEPS = {"resid": "residual stream (block input)", "head": "head output (all positions)",
          "mlp": "MLP output"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "patch",
        help="activation patching: which activations carry the clean prediction",
        description=(
            "Run --corrupt, patch in one activation from the run on --clean (the residual "
            "stream a block reads at one position, one head's output, one MLP's output at "
            "one position), and measure the metric at the last position: the share of the "
            "clean-minus-corrupt gap it restores (1 = all of it). The two texts must be the "
            "same number of tokens so positions line up."
        ),
        examples=[
            "gptlab patch runs/induction --clean 'xQ7mKp2vRzxQ7mKp' --corrupt "
            "'xQ7mKpWvRzxQ7mKp' --out runs/induction/patch",
            "gptlab patch runs/demo --clean 'ROMEO:' --corrupt 'JULIET' --metric prob "
            "--sweep head",
        ],
    )
    p.add_argument("run_dir", metavar="MODEL", help=argtypes.MODEL_HELP)
    p.add_argument("--clean", required=True, type=argtypes.escaped_text, metavar="TEXT",
                   help="the text whose activations are patched in (\\n, \\t, \\r, \\\\ "
                        "escapes understood)")
    p.add_argument("--corrupt", required=True, type=argtypes.escaped_text, metavar="TEXT",
                   help="the text run with them, as many tokens as --clean")
    p.add_argument("--metric", choices=METRICS, default="logit-diff",
                   help="logit-diff (default): logit(target) - logit(versus); logit: "
                        "logit(target); prob: the probability of target")
    p.add_argument("--target", type=argtypes.escaped_text, metavar="TOKEN",
                   help=f"one token's text or {TOKEN_ID_PREFIX}N (default: the clean run's "
                        "top prediction)")
    p.add_argument("--versus", type=argtypes.escaped_text, metavar="TOKEN",
                   help="for logit-diff (default: the corrupted run's top prediction)")
    p.add_argument("--sweep", choices=[*SWEEPS, "all"], default="all",
                   help="which sites to sweep (default all)")
    p.add_argument("--out", metavar="DIR", help="also write patch.png and patch.json here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_dir(args.out)
    if args.versus is not None and args.metric != "logit-diff":
        raise UsageError(f"--versus is for --metric logit-diff, not {args.metric}")
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.interp import patching
    from gptlab.interp.residuals import capture_residuals
    from gptlab.loading import load, provenance

    model, tokenizer = load(args.run_dir)
    config = model.config
    clean = encode_text(tokenizer, args.clean, config.block_size, "--clean")
    corrupt = encode_text(tokenizer, args.corrupt, config.block_size, "--corrupt")
    if clean.shape != corrupt.shape:
        raise UsageError(f"--clean is {clean.shape[1]:,} tokens and --corrupt "
                         f"{corrupt.shape[1]:,}: they must be the same length so positions "
                         f"line up")
    source = capture_residuals(model, clean)
    corrupted = capture_residuals(model, corrupt)
    metric, described = _metric(args, tokenizer, source.logits, corrupted.logits)
    clean_value, corrupt_value = float(metric(source.logits)), float(metric(corrupted.logits))
    gap = clean_value - corrupt_value
    print(f"metric: {described}, at the last position")
    print(f"clean {clean_value:.4f}, corrupted {corrupt_value:.4f}")
    if abs(gap) < 1e-6:
        raise UsageError("the clean and corrupted runs give the same metric: there is "
                         "nothing to restore; change the texts or --target")
    close = too_close(clean_value, corrupt_value, args.metric)
    if close is not None:
        print(f"gptlab patch: warning: {close}", file=sys.stderr)
    kinds = list(SWEEPS) if args.sweep == "all" else [args.sweep]
    grids, columns = {}, {}
    positions = [f"{t}:{label}" for t, label in
                 enumerate(token_labels(tokenizer, clean[0].tolist()))]
    for kind in kinds:
        raw = patching.sweep(model, corrupt, source, kind, metric)
        grids[kind] = (raw - corrupt_value) / gap
        columns[kind] = ([f"H{h}" for h in range(config.n_head)] if kind == "head"
                         else positions)
        print()
        print(f"{SWEEPS[kind]}: share of the gap restored")
        print(format_grid(grids[kind], columns[kind]))
    if args.out is not None:
        out = open_out_dir(args.out, "patch")
        patch_grids(grids, columns, title=f"share of {described} restored by patching in "
                                          f"clean").save(out / "patch.png")
        report = {"model": provenance(model, args.run_dir),
                  "clean": clean[0].tolist(), "corrupt": corrupt[0].tolist(),
                  "metric": described, "clean_value": clean_value,
                  "corrupt_value": corrupt_value,
                  "restored": {kind: grid.tolist() for kind, grid in grids.items()}}
        atomic_write_text(out / "patch.json", json.dumps(report, indent=1) + "\n")
        print(f"wrote {out}/: patch.png, patch.json")
    return 0


def too_close(clean: float, corrupt: float, metric: str) -> str | None:
    """Why the share restored says little for these two values (None: it does not), as a
    warning's text: their gap under MIN_GAP of the metric's size."""
    size = 1.0 if metric == "prob" else max(abs(clean), abs(corrupt))
    gap = abs(clean - corrupt)
    if gap >= MIN_GAP * size:
        return None
    return (f"clean and corrupted differ by {gap:.4f}, {gap / size:.1%} of the metric's size "
            f"({'a probability' if metric == 'prob' else f'{size:.4f}'}): each share "
            f"restored divides by that difference, so a patch that moves the metric a little "
            f"reads as a large share, and the shares mean little; choose texts whose "
            f"predictions differ more, or another --target or --versus")


def _metric(args, tokenizer, clean_logits: Tensor, corrupt_logits: Tensor):
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.interp import patching

    vocab = clean_logits.shape[-1]
    target = (int(clean_logits[0, -1].argmax()) if args.target is None
              else token_id(tokenizer, args.target, vocab, "--target"))
    name = token_labels(tokenizer, [target])[0]
    if args.metric == "logit":
        return patching.logit_difference(target), f"logit({name})"
    if args.metric == "prob":
        return patching.target_probability(target), f"p({name})"
    versus = (int(corrupt_logits[0, -1].argmax()) if args.versus is None
              else token_id(tokenizer, args.versus, vocab, "--versus"))
    if versus == target:
        raise UsageError(f"target and versus are the same token ({name!r}); give --versus "
                         f"or --target")
    other = token_labels(tokenizer, [versus])[0]
    return patching.logit_difference(target, versus), f"logit({name}) - logit({other})"


def format_grid(grid: Tensor, columns: list[str]) -> str:
    width = max(7, *(len(c) for c in columns)) if columns else 7
    lines = ["layer " + " ".join(f"{c:>{width}}" for c in columns)]
    for layer, row in enumerate(grid.tolist()):
        # round(v, 3) + 0.0 prints a tiny negative value as 0.000, not -0.000
        lines.append(f"{layer:>5} " + " ".join(f"{round(v, 3) + 0.0:>{width}.3f}" for v in row))
    return "\n".join(lines)
