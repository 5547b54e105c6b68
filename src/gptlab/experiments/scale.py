"""`gptlab experiment scale`: "Dividing by sqrt(d_k) keeps the softmax out of saturation;
without it gradients vanish" (Vaswani et al. 2017, section 3.2.1).

The grid: attention with and without the 1/sqrt(d_k) factor (GPTConfig.attn_scale) at
several head dimensions, the width held fixed (n_embd = n_head * head_dim: more, narrower
heads or fewer, wider ones), every cell with the same seeds, batches and recipe. Each run
reports its final validation loss and, on one fixed probe batch at step 0 and at every
evaluation (gptlab.experiments.probes): each head's mean attention entropy, the share of
its rows whose largest weight exceeds 0.99 (saturated), and the gradient norm reaching the
query and key weights. The lab's view 2 shows the variance argument on random vectors
(q.k has variance d_k for unit-variance q and k); this shows it in training.
"""

from __future__ import annotations

import itertools
import math
import statistics
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

NAME = "scale"
SCALES = (True, False)
FIGURE = "scale.png"
FIGURES = (FIGURE,)
TITLE = "Scaled against unscaled dot-product attention"


def label(scaled: bool) -> str:
    return "1/sqrt(d_k)" if scaled else "unscaled"


@dataclass(frozen=True, kw_only=True)
class Size(probes.ProbedSize):
    """The probed size (models without n_head and attn_scale) and the head dimensions
    (n_head = n_embd // head_dim)."""

    head_dims: tuple[int, ...]


SIZES = {
    # Width 128 as 16 heads of 8, 4 of 32 or 1 of 128; two layers, block 64.
    "default": Size(name="default", model=dict(block_size=64, n_layer=2, n_embd=128,
                                               bias=False, dropout=0.0),
                    head_dims=(8, 32, 128), steps=400, batch_size=12, seeds=3, warmup=40),
    # For the test suite: seconds, same code paths.
    "quick": Size(name="quick", model=dict(block_size=32, n_layer=1, n_embd=32, bias=False,
                                           dropout=0.0),
                  head_dims=(8, 32), steps=6, batch_size=4, seeds=1, warmup=1, evals=2,
                  eval_iters=1, probe_rows=2),
}


def cells(size: Size) -> list[dict[str, Any]]:
    """Every cell of the grid: head dimension, then scaled before unscaled."""
    return [{"head_dim": d, "n_head": size.model["n_embd"] // d, "attn_scale": s}
            for d, s in itertools.product(size.head_dims, SCALES)]


def run_name(cell: dict[str, Any], seed: int) -> str:
    return f"dk{cell['head_dim']}-{'scaled' if cell['attn_scale'] else 'unscaled'}-s{seed}"


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """A run per cell and seed, all with the recipe's rate."""
    return probes.grid_specs(
        size, seed, cells(size), run_name,
        lambda c: GPTConfig(vocab_size=vocab_size, n_head=c["n_head"],
                            attn_scale=c["attn_scale"], **size.model))


def _probe(model, x, y) -> dict[str, Any]:
    return {"qk_grad_norms": probes.qk_grad_norms(model, x, y),
            **probes.attention_stats(model, x)}


def run_scale(out: str | Path, data: str | Path | None = None, quick: bool = False,
              seed: int = 1337, steps: int | None = None, progress: bool = False,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train or reuse every run in `out`, measure them, and write the report and figure
    there too; returns the results. data: a `gptlab prepare` directory (None: Shakespeare)."""
    size = SIZES["quick" if quick else "default"].with_steps(steps)
    trained = probes.train_probed(out, NAME, size, data,
                                  lambda vocab: specs(size, seed, vocab), _probe, _measure,
                                  progress, log)
    folder, records = trained.folder, trained.records
    block = size.model["block_size"]
    results = {
        **probes.results_head(NAME, size, seed, trained),
        "head_dims": list(size.head_dims), "saturated_above": probes.SATURATED,
        # the mean entropy of uniform attention over each row's keys (rows 2..T)
        "uniform_entropy": statistics.fmean(math.log(t + 1) for t in range(1, block)),
        "cells": _cells(size, seed, trained.runs),
    }
    _figure(folder, results)
    return report.finish(folder, results, records, trained.timer, TITLE, sections, CLAIMS)


def _measure(record: RunRecord) -> dict[str, Any]:
    """A run's numbers, read back from its directory (a reused run gives the same ones)."""
    evals = [m for m in read_metrics(record.run_dir) if m.get("kind") == "eval"]
    probed = probes.read_probes(record.run_dir)
    first, last = probed[0], probed[-1]
    return {"final_loss": None if record.diverged else evals[-1]["val_loss"],
            "diverged": (f"{record.diverged['what']} at step {record.diverged['step']}"
                         if record.diverged else None),
            "val_curve": [[m["step"], m["val_loss"]] for m in evals],
            "qk_grad_norm_curve": [[p["step"], probes.norm_of(p["qk_grad_norms"])]
                                   for p in probed],
            "start": first, "end": last}


def _cells(size: Size, seed: int, runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for cell in cells(size):
        names = [run_name(cell, s) for s in seed_list(seed, size.seeds)]

        def mean(key, at, names=names):
            return statistics.fmean(_flat(runs[n][at][key]) for n in names)

        out.append({**cell, "runs": names,
                    "final_loss": report.spread([runs[n]["final_loss"] for n in names]),
                    "diverged": [runs[n]["diverged"] for n in names],
                    "entropy": mean("entropy", "end"),
                    "entropy_step0": mean("entropy", "start"),
                    "saturated": mean("saturated", "end"),
                    "saturated_step0": mean("saturated", "start"),
                    "qk_grad_step0": statistics.fmean(
                        probes.norm_of(runs[n]["start"]["qk_grad_norms"]) for n in names),
                    "qk_grad_end": statistics.fmean(
                        probes.norm_of(runs[n]["end"]["qk_grad_norms"]) for n in names),
                    "entropy_per_head": runs[names[0]]["end"]["entropy"],
                    "saturated_per_head": runs[names[0]]["end"]["saturated"]})
    return out


def _flat(per_layer: list[list[float]]) -> float:
    """The mean over every head of every layer."""
    return statistics.fmean(v for layer in per_layer for v in layer)


# ----------------------------------------------------------------------------- claims


def _paired(results: dict[str, Any], value: Callable[[dict[str, Any]], float | None],
            what: str, fmt: str) -> Measured:
    """Per seed, value(unscaled run) - value(scaled run) at the widest head (the factor
    matters most there: q.k's variance grows with d_k)."""
    d = max(results["head_dims"])
    scaled, unscaled = _cell(results, d, True), _cell(results, d, False)
    effects = []
    for a, b in zip(scaled["runs"], unscaled["runs"], strict=True):
        va, vb = value(results["runs"][a]), value(results["runs"][b])
        effects.append(None if va is None or vb is None else vb - va)
    return Measured(list(results["seeds"]), effects,
                    f"{what} at d_k {d}, unscaled - scaled: {effects_text(effects, fmt)}")


def _saturated(run: dict[str, Any]) -> float:
    return _flat(run["end"]["saturated"])


def _qk_grad(run: dict[str, Any]) -> float:
    return probes.norm_of(run["end"]["qk_grad_norms"])


# Thresholds: a share of saturated rows counts from 1 point (0.01: the scaled models stay
# under 0.5% at every d_k); a gradient difference from 0.05 (the end-of-training q/k
# gradient norms are 0.3-0.6, and a vanishing gradient would be a fraction of that); a loss
# difference from 0.02 nats (about twice the largest seed range at the default size).
CLAIMS = (
    Claim("saturation",
          "dividing by sqrt(d_k) keeps the softmax out of saturation",
          "q.k has variance d_k for unit-variance q and k (Vaswani et al., footnote 4)",
          "share of attention rows with max weight > 0.99 after training, unscaled minus "
          "scaled, at the widest head",
          lambda r: _paired(r, _saturated, "saturated rows", "+.3f"), direction=1,
          smallest=0.01),
    Claim("gradients_vanish",
          "without it gradients vanish",
          "extremely small gradients in saturated regions (Vaswani et al., section 3.2.1)",
          "gradient norm reaching W_q, W_k after training, unscaled minus scaled, at the "
          "widest head (negative: it vanishes without the factor)",
          lambda r: _paired(r, _qk_grad, "‖∇W_q,k‖", "+.3f"), direction=-1, smallest=0.05),
    Claim("trains_worse",
          "without it the model trains worse",
          "unscaled dot products do worse than additive attention at large d_k (Britz et "
          "al. 2017, cited by Vaswani et al.)",
          "final validation loss, unscaled minus scaled, at the widest head (nats)",
          lambda r: _paired(r, lambda run: run["final_loss"], "loss", "+.3f"), direction=1,
          smallest=0.02),
)


# ----------------------------------------------------------------------------- writing


def _cell(results: dict[str, Any], head_dim: int, scaled: bool) -> dict[str, Any]:
    return report.find(results["cells"], head_dim=head_dim, attn_scale=scaled)


def table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per head dimension and scaling; the measurements at the end
    of training (and, for saturation and the q/k gradient, at step 0)."""
    header = ["d_k", "heads", "scores", "val loss", "entropy (nats)", "saturated rows",
              "saturated at step 0", "‖∇W_q,k‖ step 0", "‖∇W_q,k‖ end"]
    rows = []
    for d in results["head_dims"]:
        for scaled in SCALES:
            c = _cell(results, d, scaled)
            rows.append([str(d), str(c["n_head"]), label(scaled),
                         report.loss_cell(c["final_loss"], c["diverged"]),
                         f"{c['entropy']:.2f}", f"{100 * c['saturated']:.1f}%",
                         f"{100 * c['saturated_step0']:.1f}%", f"{c['qk_grad_step0']:.3g}",
                         f"{c['qk_grad_end']:.3g}"])
    return header, rows


def comparison(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per head dimension, unscaled minus scaled loss, and whether that
    exceeds the seed spread."""
    header = ["d_k", "unscaled - scaled loss", "beyond seed spread"]
    rows = []
    for d in results["head_dims"]:
        a = _cell(results, d, True)["final_loss"]
        b = _cell(results, d, False)["final_loss"]
        rows.append([str(d), report.difference_cell(a, b),
                     report.verdict_cell(report.beyond_spread(a, b))])
    return header, rows


def _figure(folder: Path, results: dict[str, Any]) -> None:
    dims = results["head_dims"]
    loss, saturated, grads = {}, {}, {}
    for scaled in SCALES:
        cs = [_cell(results, d, scaled) for d in dims]
        loss[label(scaled)] = [(d, c["final_loss"]["mean"]) for d, c in zip(dims, cs,
                                                                             strict=True)]
        saturated[label(scaled)] = [(d, 100 * c["saturated"]) for d, c in zip(dims, cs,
                                                                               strict=True)]
        for d, c in zip(dims, cs, strict=True):
            run = results["runs"][c["runs"][0]]
            grads[f"d_k {d}, {label(scaled)}"] = [tuple(p) for p in run["qk_grad_norm_curve"]]
    line_panels([
        {"title": "final validation loss", "xlabel": "head dimension d_k", "ylabel":
         "loss (nats / token)", "lines": loss, "log_x": True},
        {"title": f"rows with max weight > {results['saturated_above']}", "xlabel":
         "head dimension d_k", "ylabel": "% of attention rows", "lines": saturated,
         "log_x": True},
        {"title": "gradient norm reaching W_q, W_k", "xlabel": "step", "ylabel":
         "‖∇W_q,k‖", "lines": grads, "log_y": True},
    ], title=f"attention with and without 1/sqrt(d_k), width {results['model']['n_embd']}: "
             f"means over seeds {', '.join(map(str, results['seeds']))} (right: seed "
             f"{results['seeds'][0]})").save(folder / FIGURE)


SETUP = """Size `{size}`: {n_layer} layers of width {n_embd} (n_head = {n_embd} / d_k),
block {block_size}; {steps} steps of batch {batch_size} of `{recipe}` ({warmup} warm-up steps)
on `{data}`. Seeds {seeds} for every cell; a loss is the mean over seeds ± half their range,
the other columns means over seeds and heads. Measured on one fixed batch of
{probe_tokens:,} validation tokens, each row's first query (one key: always one-hot) left
out. Entropy of uniform attention over the same rows: {uniform_entropy:.2f} nats.
Saturated: the row's largest weight > {saturated_above}. ‖∇W_q,k‖: the gradient norm of the
query and key rows of every layer's qkv projection, at step 0 and at the end."""


def sections(results: dict[str, Any]) -> list[tuple[str, str]]:
    setup = SETUP.format_map({**results, **results["model"],
                              "probe_tokens": results["probe"]["tokens"],
                              "seeds": ", ".join(map(str, results["seeds"]))})
    return [("Setup", setup),
            ("Results", report.markdown_table(*table(results), "llllrrrrr")),
            ("Unscaled against scaled", report.markdown_table(*comparison(results))),
            *report.closing(results, FIGURE)]


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables `gptlab experiment scale` prints (and the lab shows)."""
    return [(f"scaled against unscaled attention, seeds {results['seeds']}:", table(results)),
            ("unscaled against scaled, per head dimension:", comparison(results))]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds",), run=run_scale, tables=tables, claims=CLAIMS)
