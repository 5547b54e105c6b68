"""`gptlab experiment heads`: "plenty of heads are redundant and can be pruned", measured the
way Michel, Levy & Neubig 2019 ("Are Sixteen Heads Really Better than One?") measured it.

A small model is trained (three seeds, same recipe and batches otherwise). On held-out text
each head's importance is the loss's sensitivity to a gate on its output, I_h = sum over
examples (windows) x of |dL(x)/d xi_h| at xi = 1, normalised per layer as the paper does
(gptlab.interp.pruning); the heads are then pruned, least important first, in steps of 10%
of all heads, and the loss measured again on other held-out text (importance and
evaluation never share a token), beside the same counts pruned in the order of the
importance without the per-layer normalisation, and in a random order. Every head is also
removed alone (zero ablation, gptlab.interp.heads.ablation_deltas), counting the removals
that change the loss by less than 1%.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.data.prepared import load_data
from gptlab.errors import UsageError
from gptlab.experiments import report
from gptlab.experiments.baselines import text_baselines
from gptlab.experiments.claims import Claim, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import Grid, RunRecord, RunSpec, choose_size, open_experiment
from gptlab.experiments.units import measured_over, seed_list
from gptlab.interp.heads import ablation_deltas
from gptlab.interp.pruning import (
    head_importance,
    mask_without,
    masked_loss,
    normalize_by_layer,
    pruned_counts,
    pruning_order,
)
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.plots.heads import pruning_curves
from gptlab.training.config import recipe

NAME = "heads"
RECIPE = "shakespeare-char-cpu-fast"  # gptlab's default CPU recipe (training.recipes)
FRACTIONS = tuple(i / 10 for i in range(11))  # Michel et al. prune in steps of 10%
THRESHOLD = 0.01  # a change of the loss smaller than 1% counts as none
FIGURE = "pruning.png"
FIGURES = (FIGURE,)
TITLE = "Pruning heads: are sixteen heads better than one?"
# The orders heads are pruned in: Michel et al.'s importance (normalised per layer), the
# same without the normalisation, and a random order (seeded by the run's seed).
ORDERS = {"importance": "by importance", "unnormalized": "by importance, not normalised",
          "random": "at random"}


@dataclass(frozen=True)
class Size:
    """How big the experiment is: the model, its training, the held-out text."""

    name: str
    model: dict[str, Any]  # GPTConfig fields (besides vocab_size)
    steps: int
    batch_size: int
    seeds: int  # models trained, seeds S, S+1, ...
    windows: int  # held-out windows of block_size: half for importance, half to evaluate
    evals: int = 4
    eval_iters: int = 10


SIZES = {
    # nanoGPT's CPU shape at block 64 with 8 heads of 16 dimensions: 32 heads to prune.
    "default": Size("default", dict(block_size=64, n_layer=4, n_head=8, n_embd=128,
                                    bias=False, dropout=0.0),
                    steps=1000, batch_size=12, seeds=3, windows=256),
    # For the test suite: seconds, same code paths.
    "quick": Size("quick", dict(block_size=32, n_layer=2, n_head=4, n_embd=32, bias=False,
                                dropout=0.0),
                  steps=20, batch_size=8, seeds=2, windows=16, evals=1,
                  eval_iters=2),
}


def run_heads(out: str | Path, data: str | Path | None = None, quick: bool = False,
              seed: int = 1337, steps: int | None = None, progress: bool = False,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or reuse) the models in `out`, score and prune their heads, write
    results.json, report.md and the figure there; returns the results. data: a prepared
    data directory (default: the embedded Shakespeare, prepared into OUT/data)."""
    size = choose_size(SIZES, quick, steps=steps)
    timer = report.Timer()
    folder, data_dir = open_experiment(out, NAME, data, log)
    tokens = load_data(data_dir)
    vocab_size = tokens.vocab_size
    windows = held_out_windows(data_dir, size.windows, size.model["block_size"])
    grid = Grid(folder, data_dir)
    records = grid.train(specs(size, seed, vocab_size), progress, log)
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    t0 = time.perf_counter()
    rows = []
    for name, record in records.items():
        rows.append(evaluate(grid.run_dir(name), windows, record.seed))
        log(f"{name}: importance, pruning and single removals scored")
    timer.add("eval_s", time.perf_counter() - t0)
    cleans = [r["clean_loss"] for r in rows]
    results = {
        "experiment": NAME, "size": size.name, "model": size.model, "recipe": RECIPE,
        "steps": size.steps, "batch_size": size.batch_size, "data": Path(data_dir).name,
        "baselines": text_baselines(tokens.train, vocab_size), "fractions": list(FRACTIONS),
        "orders": list(ORDERS), "threshold": THRESHOLD,
        "held_out": {"windows": size.windows, "block_size": size.model["block_size"],
                     "importance_windows": size.windows // 2,
                     "eval_windows": size.windows - size.windows // 2},
        "runs": {name: r.to_dict(folder) for name, r in records.items()},
        "rows": rows,
        "seed_spread": max(cleans) - min(cleans),
        "beyond_spread": beyond_spread(rows, (max(cleans) - min(cleans)) / min(cleans)),
        "training_time_s": round(sum(r.train_s for r in records.values()), 1),
    }
    figure(results).save(folder / FIGURE)
    return report.finish(folder, results, records, timer, TITLE,
                         lambda done: sections(done, records), CLAIMS)


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """One run per seed, named seed-S: the same model and recipe."""
    out = []
    for s in seed_list(seed, size.seeds):
        train = recipe(RECIPE, max_iters=size.steps, batch_size=size.batch_size, seed=s,
                       eval_interval=max(1, size.steps // size.evals),
                       eval_iters=size.eval_iters, log_interval=50, whole_val=False,
                       dtype="float32")
        out.append(RunSpec(f"seed-{s}", GPTConfig(vocab_size=vocab_size, **size.model), train))
    return out


def held_out_windows(data_dir: Path, count: int, block: int) -> torch.Tensor:
    """(count, block) token ids: the start of the validation split, cut into windows."""
    val = load_data(data_dir).val
    if len(val) < count * block:
        raise UsageError(f"{data_dir}'s validation split has {len(val):,} tokens; the "
                         f"experiment scores {count} windows of {block} ({count * block:,})")
    return torch.as_tensor(val[:count * block].astype("int64")).view(count, block)


def evaluate(run_dir: Path, windows: torch.Tensor, seed: int) -> dict[str, Any]:
    """One model: importance on the first half of the windows (each window an example);
    on the second half, the loss with 0%, 10%, ... of the heads pruned in each of ORDERS,
    and the change each head's removal alone makes."""
    model, _ = load(run_dir)
    half = len(windows) // 2
    scoring, held = windows[:half], windows[half:]
    raw = head_importance(model, scoring.split(1), normalize=False)
    importance = normalize_by_layer(raw)
    shape = tuple(importance.shape)
    n_heads = shape[0] * shape[1]
    shuffled = torch.randperm(n_heads, generator=torch.Generator().manual_seed(seed)).tolist()
    orders = {"importance": pruning_order(importance), "unnormalized": pruning_order(raw),
              "random": [(i // shape[1], i % shape[1]) for i in shuffled]}
    clean = masked_loss(model, held)
    pruning = []
    for fraction, count in zip(FRACTIONS, pruned_counts(n_heads, FRACTIONS), strict=True):
        losses = {name: masked_loss(model, held, mask_without(shape, order[:count]))
                  for name, order in orders.items()}
        pruning.append({"fraction": fraction, "pruned": count, "loss": losses,
                        "change": {name: loss / clean - 1 for name, loss in losses.items()}})
    deltas = ablation_deltas(model, held)
    relative = deltas / clean
    return {
        "run": run_dir.name, "seed": seed, "clean_loss": clean, "heads": n_heads,
        "importance": importance.tolist(), "importance_unnormalized": raw.tolist(),
        "orders": {name: [list(h) for h in order] for name, order in orders.items()},
        "pruning": pruning,
        "prunable": {name: prunable_fraction(pruning, name, THRESHOLD) for name in orders},
        "single": {"deltas": deltas.tolist(), "relative": relative.tolist(),
                   "under_threshold": int((relative.abs() < THRESHOLD).sum()),
                   "largest": float(relative.abs().max())},
        "importance_vs_single": {
            "importance": rank_correlation(importance.flatten(), deltas.flatten()),
            "unnormalized": rank_correlation(raw.flatten(), deltas.flatten())},
    }


def prunable_fraction(pruning: list[dict[str, Any]], order: str, threshold: float) -> float:
    """The largest fraction pruned in `order` such that it, and every smaller fraction,
    raises the loss by less than threshold (relative)."""
    best = 0.0
    for step in pruning:
        if step["change"][order] >= threshold:
            break
        best = step["fraction"]
    return best


def beyond_spread(rows: list[dict[str, Any]], spread: float) -> dict[str, float | None]:
    """Per order, the smallest fraction pruned at which every model's loss rose by more
    than `spread` (relative: the seeds' unpruned losses apart), or None."""
    out: dict[str, float | None] = {}
    for order in ORDERS:
        out[order] = next((step["fraction"] for i, step in enumerate(rows[0]["pruning"])
                           if all(r["pruning"][i]["change"][order] > spread for r in rows)),
                          None)
    return out


def rank_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of two vectors (ties broken by position)."""
    ra = a.argsort().argsort().double()
    rb = b.argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()))


# ----------------------------------------------------------------------------- claims


def _rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims' units: one row per seed's model, in seed order."""
    return results["rows"]


def _change(row: dict[str, Any], fraction: float, order: str) -> float:
    return next(s["change"][order] for s in row["pruning"]
                if math.isclose(s["fraction"], fraction))


def _random_gap(row: dict[str, Any]) -> float:
    """The loss's change pruned at random minus by importance, mean over COMPARED."""
    return sum(_change(row, f, "random") - _change(row, f, "importance")
               for f in COMPARED) / len(COMPARED)


# The fractions the importance is compared with random on: Michel et al.'s range, 10-50%.
COMPARED = (0.1, 0.2, 0.3, 0.4, 0.5)
# "a good share": Michel et al.'s smallest prunable share is 20% (WMT); the measured share
# moves in steps of 10%, so the claim counts from halfway between 10% and 20%.
GOOD_SHARE = 0.15
# "a few heads": Voita et al. keep 10 of 48 heads (about 20%); pruning 80% here.
FEW_KEPT = 0.8
# Heads are read only in models that read their context: a held-out loss under the bigram
# table's, which the current token's embedding alone gets without a head.
READ_TEXT = Precondition(
    "every seed's model reads its context", "highest held-out loss",
    lambda r: max(row["clean_loss"] for row in r["rows"]),
    lambda r: r["baselines"]["bigram"], below=True, why="a bigram table's loss")

CLAIMS = (
    Claim("alone",
          "most heads can be removed alone",
          "8 of 96 WMT encoder heads change BLEU significantly when removed alone (Michel "
          "et al.)",
          "share of heads whose removal alone changes the loss by less than 1%, minus one "
          "half (most: more than half)",
          measured_over(_rows, lambda row: row["single"]["under_threshold"] / row["heads"] - 0.5,
                        lambda row: f"{row['single']['under_threshold']} of {row['heads']} "
                                    f"under 1%"),
          direction=1, smallest=0.0, precondition=READ_TEXT),
    Claim("together",
          "a good share of heads can be removed together",
          "20% (WMT) to 40% (BERT, MNLI) prunable without noticeable loss (Michel et al.)",
          f"largest share pruned by importance with every step under 1%, minus "
          f"{GOOD_SHARE:g}",
          measured_over(_rows, lambda row: row["prunable"]["importance"] - GOOD_SHARE,
                        lambda row: f"{100 * row['prunable']['importance']:.0f}%"),
          direction=1, smallest=0.0, precondition=READ_TEXT),
    Claim("few_do_the_work",
          "a few heads do the work",
          "10 of 48 heads keep BLEU within 0.15 (Voita et al. 2019, trained gates, "
          "fine-tuned)",
          f"1% minus the loss's change with {100 * FEW_KEPT:.0f}% of the heads pruned by "
          f"importance, no retraining (relative)",
          measured_over(_rows, lambda row: THRESHOLD - _change(row, FEW_KEPT, "importance"),
                        lambda row: f"{100 * _change(row, FEW_KEPT, 'importance'):+.1f}% at "
                                    f"{100 * FEW_KEPT:.0f}% pruned"),
          direction=1, smallest=0.0, precondition=READ_TEXT),
    Claim("importance_beats_random",
          "the importance finds the redundant heads",
          "pruning by I_h beats pruning at random (Michel et al.)",
          "the loss's change pruned at random minus by importance, mean over 10-50% pruned "
          "(relative)",
          measured_over(_rows, _random_gap,
                        lambda row: f"random - importance {100 * _random_gap(row):+.1f}%"),
          direction=1, smallest=0.0, precondition=READ_TEXT),
)


# ----------------------------------------------------------------------------- writing


def pruning_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per fraction: the heads pruned, then per order the relative change of the loss
    for each seed ("+4.1% / +2.7%")."""
    rows = results["rows"]
    seeds = " / ".join(str(r["seed"]) for r in rows)
    header = ["pruned", "heads"] + [f"{ORDERS[o]} (seeds {seeds})" for o in results["orders"]]
    body = []
    for i, fraction in enumerate(results["fractions"]):
        line = [f"{100 * fraction:.0f}%", str(rows[0]["pruning"][i]["pruned"])]
        for order in results["orders"]:
            line.append(" / ".join(f"{100 * r['pruning'][i]['change'][order]:+.1f}%"
                                   for r in rows))
        body.append(line)
    return header, body


def single_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per seed: the unpruned loss, single removals under the threshold, the largest
    single change, the fraction prunable under the threshold in each order, and how well
    each importance ranks heads as their single removals do (Spearman)."""
    pct = f"{100 * results['threshold']:g}%"
    header = ["seed", "loss", f"single removals < {pct}", "largest single change",
              f"prunable < {pct}: importance / not normalised / random",
              "rank corr. with removal: importance / not normalised"]
    body = []
    for r in results["rows"]:
        prunable = " / ".join(f"{100 * r['prunable'][o]:.0f}%" for o in results["orders"])
        corr = r["importance_vs_single"]
        body.append([str(r["seed"]), f"{r['clean_loss']:.3f}",
                     f"{r['single']['under_threshold']} of {r['heads']}",
                     f"{100 * r['single']['largest']:.1f}%", prunable,
                     f"{corr['importance']:.2f} / {corr['unnormalized']:.2f}"])
    return header, body


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows."""
    return [("the validation loss's change with heads pruned (each seed):",
             pruning_table(results)),
            ("one head removed at a time:", single_table(results))]


def notes(results: dict[str, Any]) -> list[str]:
    """What the command prints after the tables."""
    return [spread_line(results)]


def spread_line(results: dict[str, Any]) -> str:
    """The seed-to-seed spread, and from which fraction each order's loss rises beyond it."""
    clean = min(r["clean_loss"] for r in results["rows"])
    beyond = "; ".join(
        f"{ORDERS[o]} from {100 * f:.0f}% pruned" if f is not None else f"{ORDERS[o]} never"
        for o, f in results["beyond_spread"].items())
    return (f"seed-to-seed spread of the unpruned loss: {results['seed_spread']:.3f} nats "
            f"({100 * results['seed_spread'] / clean:.1f}%); every seed's loss rises by more "
            f"than that {beyond}")


def figure(results: dict[str, Any]) -> Any:
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {
        ORDERS[order]: {f"seed {r['seed']}": [(s["fraction"], s["loss"][order])
                                              for s in r["pruning"]]
                        for r in results["rows"]}
        for order in results["orders"]}
    single = {f"seed {r['seed']}": [v for row in r["single"]["relative"] for v in row]
              for r in results["rows"]}
    m = results["model"]
    return pruning_curves(curves, single, results["threshold"],
                          title=f"{m['n_layer']} layers x {m['n_head']} heads, "
                                f"{results['steps']} steps")


def sections(results: dict[str, Any], records: dict[str, RunRecord]) -> list[tuple[str, str]]:
    m, held = results["model"], results["held_out"]
    setup = (
        f"Size `{results['size']}`: {m['n_layer']} layers x {m['n_head']} heads "
        f"({m['n_layer'] * m['n_head']} heads), width {m['n_embd']}, block {m['block_size']}, "
        f"{results['steps']} steps of `{results['recipe']}` (batch {results['batch_size']}) "
        f"on `{results['data']}`; {report.seeds_line(records)}. Head importance (Michel et "
        f"al.'s I_h = sum over examples of |dL(x)/d xi_h|, each example a window, then "
        f"normalised per layer by its L2 norm as the paper does) on the first "
        f"{held['importance_windows']} windows of {held['block_size']} tokens of the "
        f"validation split; every loss on the next {held['eval_windows']} windows (no token "
        f"shared). Pruning removes the least important heads first (importance computed "
        f"once, before any pruning), beside the same counts in the order of the importance "
        f"without the per-layer normalisation, and in a random order seeded by the run's "
        f"seed. A removed head's output is zero (the same as `gptlab heads --ablate`'s zero "
        f"ablation). Changes are relative to each model's unpruned loss.")
    header, rows = pruning_table(results)
    single_header, single_rows = single_table(results)
    spread = (spread_line(results) + f". A change counts as none below "
                                      f"{100 * results['threshold']:g}% of the loss.")
    return [("Setup", setup),
            ("The loss's change with heads pruned", report.markdown_table(header, rows)),
            ("One head at a time", report.markdown_table(single_header, single_rows)
             + "\n\n" + spread),
            ("Figure", f"![pruning]({FIGURE})"),
            ("Time", report.timing_line(results["timing"], results["machine"])
             + f". Training took {results['training_time_s']:.0f} s when it was trained.")]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds",), run=run_heads, tables=tables, notes=notes,
                        claims=CLAIMS)
