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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptlab.experiments import probes, report
from gptlab.experiments.grid import RunRecord, RunSpec
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
                    seeds=2),
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
    return report.finish(folder, results, records, trained.timer, TITLE, sections)


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
        names = [run_name(cell, s) for s in size.seed_list(seed)]
        out.append({**cell, "runs": names,
                    "final_loss": report.spread([runs[n]["final_loss"] for n in names]),
                    "diverged": [runs[n]["diverged"] for n in names],
                    "step0_layer_grad_norms": runs[names[0]]["layer_grad_norms"][0][1]})
    return out


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


run = run_norm  # every experiment module's entry point has this name (gptlab.cli.experiment)
