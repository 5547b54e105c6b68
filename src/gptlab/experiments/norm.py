"""`gptlab experiment norm`: "Pre-LN is far more stable than Post-LN, with no warm-up magic
needed even at great depth" (Xiong et al. 2020, On Layer Normalization in the Transformer
Architecture).

The grid: the norm before each sublayer (pre, GPT-2's) or after the residual add (post, the
2017 paper's), with and without learning-rate warm-up, at two depths and two learning rates;
every cell with the same seeds, batches and recipe. Each run reports its final validation
loss, whether it diverged (a loss or weight became NaN, or the loss ended above where it
started), and the gradient norm of each layer's weights on one fixed probe batch at step 0
and at every evaluation (gptlab.experiments.probes). Xiong et al.'s analysis: at
initialisation the last layer's gradient is large for Post-LN whatever the depth, and
shrinks like 1/sqrt(L) for Pre-LN; warm-up is what lets Post-LN train at all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptlab.experiments import probes, report
from gptlab.experiments.claims import Claim, Measured
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import RunRecord, RunSpec
from gptlab.experiments.units import effects_text, seed_list
from gptlab.model.config import GPTConfig
from gptlab.plots.experiments import line_panels
from gptlab.training.rundir import read_metrics

NAME = "norm"
NORMS = ("pre", "post")
FIGURE = "norm.png"
FIGURES = (FIGURE,)
TITLE = "Pre-LN against Post-LN, with and without warm-up"
LABELS = {"pre": "Pre-LN", "post": "Post-LN"}


@dataclass(frozen=True, kw_only=True)
class Size(probes.ProbedSize):
    """The probed size (models without n_layer and norm_position) and the grid's axes."""

    depths: tuple[int, ...]
    lrs: tuple[float, ...]


SIZES = {
    # A narrow GPT (width 64, 4 heads, block 64) at depth 2 and 6; warm-up a fifth of the
    # run (Xiong et al.'s Post-LN baselines: 4,000 of ~100,000 steps; a short run needs a
    # larger share to reach the peak rate gently).
    "default": Size(name="default", model=dict(block_size=64, n_head=4, n_embd=64, bias=False,
                                               dropout=0.0),
                    depths=(2, 6), lrs=(2e-3, 1e-2), warmup=60, steps=300, batch_size=12,
                    seeds=3),
    # For the test suite: seconds, same code paths.
    "quick": Size(name="quick", model=dict(block_size=32, n_head=2, n_embd=32, bias=False,
                                           dropout=0.0),
                  depths=(1, 2), lrs=(2e-3, 1e-2), warmup=2, steps=6, batch_size=4, seeds=1,
                  evals=2, eval_iters=1, probe_rows=2),
}


def cells(size: Size) -> list[dict[str, Any]]:
    """Every cell of the grid, depth slowest, then learning rate, warm-up, norm."""
    return [{"depth": d, "lr": lr, "warmup": w, "norm": n}
            for d, lr, w, n in itertools.product(size.depths, size.lrs, (0, size.warmup),
                                                 NORMS)]


def run_name(cell: dict[str, Any], seed: int) -> str:
    warm = f"warmup{cell['warmup']}" if cell["warmup"] else "nowarmup"
    return f"{cell['norm']}-L{cell['depth']}-lr{cell['lr']:g}-{warm}-s{seed}"


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """One run per cell and seed, its peak rate the cell's (decaying to a tenth)."""
    return probes.grid_specs(
        size, seed, cells(size), run_name,
        lambda c: GPTConfig(vocab_size=vocab_size, n_layer=c["depth"],
                            norm_position=c["norm"], **size.model),
        lambda c: dict(learning_rate=c["lr"], min_lr=c["lr"] / 10, warmup_iters=c["warmup"]))


def _probe(model, x, y) -> dict[str, Any]:
    return {"layer_grad_norms": probes.layer_grad_norms(model, x, y)}


def run_norm(out: str | Path, data: str | Path | None = None, quick: bool = False,
             seed: int = 1337, steps: int | None = None, progress: bool = False,
             log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole experiment into `out` (see the module's docstring): returns what it
    writes as results.json. data: a prepared data directory, or None for the embedded
    Shakespeare (prepared into OUT/data); quick: the test suite's size."""
    size = SIZES["quick" if quick else "default"].with_steps(steps)
    trained = probes.train_probed(out, NAME, size, data,
                                  lambda vocab: specs(size, seed, vocab), _probe, _measure,
                                  progress, log)
    folder, records = trained.folder, trained.records
    results = {**probes.results_head(NAME, size, seed, trained), "depths": list(size.depths),
               "lrs": list(size.lrs), "cells": _cells(size, seed, trained.runs)}
    _figure(folder, results)
    return report.finish(folder, results, records, trained.timer, TITLE, sections, CLAIMS)


def _measure(record: RunRecord) -> dict[str, Any]:
    """A run's numbers, read back from its directory (a reused run gives the same ones)."""
    metrics = read_metrics(record.run_dir)
    evals = [m for m in metrics if m.get("kind") == "eval"]
    start = evals[0]["val_loss"]  # step 0's: every run evaluates before its first step
    final = None if record.diverged else evals[-1]["val_loss"]
    if record.diverged:
        diverged = f"{record.diverged['what']} at step {record.diverged['step']}"
    elif final > start:
        diverged = "loss ended above its start"
    else:
        diverged = None
    probed = probes.read_probes(record.run_dir)
    return {"start_loss": start, "final_loss": final, "diverged": diverged,
            "val_curve": [[m["step"], m["val_loss"]] for m in evals],
            "grad_norm_curve": [[m["step"], m["grad_norm"]] for m in metrics
                                if m.get("kind") == "train" and "grad_norm" in m],
            "layer_grad_norms": [[p["step"], p["layer_grad_norms"]] for p in probed]}


def _cells(size: Size, seed: int, runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for cell in cells(size):
        names = [run_name(cell, s) for s in seed_list(seed, size.seeds)]
        out.append({**cell, "runs": names,
                    "final_loss": report.spread([runs[n]["final_loss"] for n in names]),
                    "diverged": [runs[n]["diverged"] for n in names],
                    "step0_layer_grad_norms": runs[names[0]]["layer_grad_norms"][0][1]})
    return out


# ----------------------------------------------------------------------------- claims


def _by_seed(results: dict[str, Any], value: Callable[[dict[str, Any]], float | None],
             **where: Any) -> list[list[float | None]]:
    """Per seed, `value(run)` of every cell matching `where` (cells in grid order)."""
    chosen = [c for c in results["cells"] if all(c[k] == v for k, v in where.items())]
    return [[value(results["runs"][c["runs"][i]]) for c in chosen]
            for i in range(len(results["seeds"]))]


def _loss(run: dict[str, Any]) -> float | None:
    return run["final_loss"]


def _gap(results: dict[str, Any], depth: int, pre_warmup: int | None = None,
         post_warmup: int | None = None, what: str = "Post - Pre loss") -> Measured:
    """Post-LN's final loss minus Pre-LN's, per seed, averaged over the learning rates (and
    the warm-ups, where not given) at one depth; a diverged run makes its seed's None."""
    pre = _by_seed(results, _loss, depth=depth, norm="pre",
                   **({} if pre_warmup is None else {"warmup": pre_warmup}))
    post = _by_seed(results, _loss, depth=depth, norm="post",
                    **({} if post_warmup is None else {"warmup": post_warmup}))
    effects = []
    for a, b in zip(pre, post, strict=True):
        values = a + b
        effects.append(None if any(v is None for v in values)
                       else sum(b) / len(b) - sum(a) / len(a))
    return Measured(list(results["seeds"]), effects,
                    f"{what}, {depth} layers: {effects_text(effects)}")


def _deepest(results: dict[str, Any]) -> int:
    return max(results["depths"])


def _post_growth(results: dict[str, Any]) -> Measured:
    """Post-LN's step-0 gradient norm of the last layer over the first's, minus 1, per
    seed, at the deepest depth (Xiong et al.: it grows with the layer)."""
    ratios = _by_seed(results, lambda run: run["layer_grad_norms"][0][1][-1]
                      / run["layer_grad_norms"][0][1][0],
                      depth=_deepest(results), norm="post", warmup=0, lr=results["lrs"][0])
    effects = [r[0] - 1 for r in ratios]
    return Measured(list(results["seeds"]), effects,
                    "Post-LN last / first layer at step 0, "
                    f"{_deepest(results)} layers: "
                    + ", ".join(f"{1 + e:.2f}" for e in effects))


def _pre_shrink(results: dict[str, Any]) -> Measured:
    """Pre-LN's last-layer gradient norm at step 0 at the shallowest depth over the
    deepest's, minus 1, per seed (1/sqrt(L): positive, sqrt(6/2) - 1 = 0.73 for 2 and 6)."""
    shallow, deep = min(results["depths"]), _deepest(results)

    def last(depth: int) -> list[float]:
        return [r[0] for r in _by_seed(results, lambda run: run["layer_grad_norms"][0][1][-1],
                                       depth=depth, norm="pre", warmup=0,
                                       lr=results["lrs"][0])]
    effects = [a / b - 1 for a, b in zip(last(shallow), last(deep), strict=True)]
    expected = math.sqrt(deep / shallow) - 1
    return Measured(list(results["seeds"]), effects,
                    f"Pre-LN last layer, {shallow} layers over {deep}: "
                    + ", ".join(f"{1 + e:.2f}" for e in effects)
                    + f" (1/sqrt(L) predicts {1 + expected:.2f})")


# Thresholds: 0.05 nats is about twice the largest seed range of a Pre-LN cell at the
# default size and a tenth of the loss gap between character frequencies (3.30) and a
# trained model (~2.4): a smaller loss gap is "no difference" here. The gradient ratios
# count from 0.1 (10%): the seeds' step-0 ratios move by a few percent.
CLAIMS = (
    Claim("pre_stable_deep",
          "Pre-LN is far more stable than Post-LN, even at great depth (the deepest grid)",
          "Post-LN without warm-up: BLEU 8.45 against about 34 for Pre-LN (Xiong et al., "
          "IWSLT14, 6+6 layers)",
          "Post-LN minus Pre-LN final validation loss at the deepest depth, mean over "
          "rates and warm-ups (nats)",
          lambda r: _gap(r, _deepest(r)), direction=1, smallest=0.05),
    Claim("pre_stable_shallow",
          "Pre-LN is more stable than Post-LN (the shallowest grid)",
          "the same, at the paper's depth only",
          "Post-LN minus Pre-LN final validation loss at the shallowest depth (nats)",
          lambda r: _gap(r, min(r["depths"])), direction=1, smallest=0.05),
    Claim("no_warmup_needed",
          "no warm-up magic needed: Pre-LN without warm-up does as well as Post-LN with it",
          "Pre-LN without warm-up about 34 BLEU, Post-LN with 4,000 warm-up steps about 34",
          "Post-LN with warm-up minus Pre-LN without, final validation loss at the deepest "
          "depth, mean over rates (nats)",
          lambda r: _gap(r, _deepest(r), pre_warmup=0, post_warmup=r["warmup"],
                         what="Post-LN warmed up - Pre-LN without, loss"),
          direction=1, smallest=0.05),
    Claim("post_grad_grows",
          "Post-LN's gradient at initialisation is largest at the last layer",
          "Post-LN's gradient norm grows with the layer (Xiong et al., Figure 3)",
          "Post-LN's step-0 gradient norm, last layer over first, minus 1",
          _post_growth, direction=1, smallest=0.1),
    Claim("pre_grad_shrinks",
          "Pre-LN's last-layer gradient shrinks like 1/sqrt(L) with depth",
          "Pre-LN's gradient norm level across layers, scaling as 1/sqrt(L) (Xiong et al., "
          "section 3.3)",
          "Pre-LN's step-0 last-layer gradient norm, shallowest over deepest, minus 1",
          _pre_shrink, direction=1, smallest=0.1),
)


# ----------------------------------------------------------------------------- writing


def _cell(results: dict[str, Any], **where: Any) -> dict[str, Any]:
    return report.find(results["cells"], **where)


def table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): final validation loss, Pre-LN beside Post-LN, per depth, rate and
    warm-up; whether the difference exceeds the seed spread."""
    header = ["depth", "lr", "warm-up", "Pre-LN loss", "Post-LN loss", "Post - Pre",
              "beyond seed spread"]
    rows = []
    for depth in results["depths"]:
        for lr in results["lrs"]:
            for warmup in (0, results["warmup"]):
                pre = _cell(results, depth=depth, lr=lr, warmup=warmup, norm="pre")
                post = _cell(results, depth=depth, lr=lr, warmup=warmup, norm="post")
                a, b = pre["final_loss"], post["final_loss"]
                rows.append([str(depth), f"{lr:g}", f"{warmup} steps" if warmup else "none",
                             report.loss_cell(a, pre["diverged"]),
                             report.loss_cell(b, post["diverged"]),
                             report.difference_cell(a, b),
                             report.verdict_cell(report.beyond_spread(a, b))])
    return header, rows


def grad_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): each layer's gradient norm at step 0 (the probe batch, the first
    seed), per norm and depth; the last layer's over the first's."""
    deepest = max(results["depths"])
    header = ["model"] + [f"layer {i + 1}" for i in range(deepest)] + ["last / first"]
    rows = []
    for norm in NORMS:
        for depth in results["depths"]:
            g = _cell(results, depth=depth, norm=norm, lr=results["lrs"][0],
                      warmup=0)["step0_layer_grad_norms"]
            rows.append([f"{LABELS[norm]}, {depth} layers"]
                        + [f"{v:.3f}" for v in g] + ["—"] * (deepest - depth)
                        + [f"{g[-1] / g[0]:.2f}"])
    return header, rows


def _figure(folder: Path, results: dict[str, Any]) -> None:
    deepest, top = max(results["depths"]), max(results["lrs"])
    step0 = {f"{LABELS[n]}, {d} layers": list(enumerate(
        _cell(results, depth=d, norm=n, lr=results["lrs"][0], warmup=0)
        ["step0_layer_grad_norms"], start=1)) for n in NORMS for d in results["depths"]}
    curves, last = {}, {}
    for n in NORMS:
        for w in (0, results["warmup"]):
            cell = _cell(results, depth=deepest, norm=n, lr=top, warmup=w)
            run = results["runs"][cell["runs"][0]]
            label = f"{LABELS[n]}, {'warm-up' if w else 'no warm-up'}"
            curves[label] = [tuple(p) for p in run["val_curve"]]
            last[label] = [(s, g[-1]) for s, g in run["layer_grad_norms"]]
    line_panels([
        {"title": "gradient norm per layer at step 0", "xlabel": "layer", "ylabel":
         "‖∇ layer weights‖", "lines": step0, "log_y": True},
        {"title": f"{deepest} layers, lr {top:g}: validation loss", "xlabel": "step",
         "ylabel": "loss (nats / token)", "lines": curves},
        {"title": f"{deepest} layers, lr {top:g}: last layer's gradient norm", "xlabel":
         "step", "ylabel": "‖∇ last layer‖", "lines": last, "log_y": True},
    ], title=f"Pre-LN vs Post-LN, seed {results['seeds'][0]}").save(folder / FIGURE)


SETUP = """Size `{size}`: width {n_embd}, {n_head} heads, block {block_size}, at depths
{depths}; {steps} steps of batch {batch_size} of `{recipe}` (AdamW, cosine decay to lr / 10,
gradient clipping at 1.0) at peak learning rates {lrs}, with {warmup} warm-up steps or none,
on `{data}`. Seeds {seeds} for every cell (the same weights and batches across cells of one
seed); a loss is the mean over seeds ± half their range. Diverged: a loss or weight became
NaN, or the final validation loss is above the step-0 one. Gradient norms: the norm of each
block's weight gradient on one fixed batch of {probe_tokens:,} validation tokens."""

XIONG = """Xiong et al. 2020 (their Figure 3 and section 3.3): at initialisation Post-LN's
gradient norm grows with the layer, the last layer's large whatever the depth; Pre-LN's stays
level across layers and shrinks like 1/sqrt(L) with depth."""


def sections(results: dict[str, Any]) -> list[tuple[str, str]]:
    setup = SETUP.format_map({
        **results, **results["model"], "probe_tokens": results["probe"]["tokens"],
        "depths": ", ".join(map(str, results["depths"])),
        "lrs": ", ".join(f"{lr:g}" for lr in results["lrs"]),
        "seeds": ", ".join(map(str, results["seeds"]))})
    return [("Setup", setup),
            ("Final validation loss", report.markdown_table(*table(results), "lllrrrr")),
            ("Gradient norm per layer at step 0",
             report.markdown_table(*grad_table(results)) + "\n\n" + XIONG),
            *report.closing(results, FIGURE)]


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables `gptlab experiment norm` prints (and the lab shows)."""
    return [(f"final validation loss (nats/token), seeds {results['seeds']}:", table(results)),
            ("gradient norm per layer at step 0:", grad_table(results))]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES, units=("seeds",),
                        run=run_norm, tables=tables, claims=CLAIMS)
