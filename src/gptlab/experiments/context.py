"""`gptlab experiment context`: the chapter's claims about positions past the training
length, measured the way the papers measured them.

One small model per positional encoding (learned, sinusoidal, RoPE, ALiBi, none) and seed is
trained with the same recipe and batches at a short length L (64), then scored on the same
held-out text at L, 2L, 4L and 8L, in both of Press et al.'s modes: non-overlapping windows
of the length (each window's early tokens have little context: the "early token curse") and
sliding windows that move by a quarter of it (every token scored with at least three
quarters of a window behind it). RoPE is also stretched at inference time, no retraining,
by linear (Position Interpolation), NTK-aware, YaRN and dynamic NTK scaling at the factor
that maps each length back onto L (factor 1 at L itself); and fine-tuned with Position
Interpolation for a short run at each longer length (Chen et al. 2023 recover in ~200
steps). Learned positions refuse every length past L: there is no row in their table.

Every encoding and fine-tune is trained with seeds S, S+1, ... (three at the default size):
the claims are judged on each seed's numbers, against their spread. The first seed's runs
keep the plain names (`rope`, `rope-pi-x2`); the others' end in -sSEED (`rope-s1338`).

Every number is `gptlab eval RUN --text-file FOLDER/eval.txt --context N --stride S` (with
`--rope-scaling KIND:F` where there is one): the experiment calls the same functions.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import UsageError
from gptlab.experiments import report
from gptlab.experiments.baselines import text_baselines
from gptlab.experiments.claims import Claim, Measured, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import (
    Grid,
    RunRecord,
    RunSpec,
    choose_size,
    open_experiment,
)
from gptlab.experiments.units import per_unit, seed_list
from gptlab.files.atomic import atomic_write_text
from gptlab.inference.evaluate import score_text
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.model.positional import ContextWarning
from gptlab.plots.positions import loss_by_length, loss_by_position
from gptlab.training.config import recipe, with_settings
from gptlab.training.recipes import RECIPES

NAME = "context"
ENCODINGS = ("learned", "sinusoidal", "rope", "alibi", "none")
SCALINGS = ("linear", "ntk", "yarn", "dynamic")
MULTIPLES = (1, 2, 4, 8)  # evaluation lengths, in training lengths
SLIDING_FRACTION = 4  # sliding windows move by length // 4
MODES = ("non-overlapping", "sliding")
RECIPE = "shakespeare-char-cpu-fast"  # gptlab's default CPU recipe (training.recipes)
EVAL_TEXT = "eval.txt"
FIGURE_LENGTHS = "loss_by_length.png"
FIGURE_POSITIONS = "by_position.png"
FIGURES = (FIGURE_LENGTHS, FIGURE_POSITIONS)
TITLE = "Longer than trained: positions past the training length"
LABELS = {"learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE",
          "alibi": "ALiBi", "none": "none (NoPE)", "linear": "RoPE + linear (PI), no FT",
          "ntk": "RoPE + NTK-aware", "yarn": "RoPE + YaRN", "dynamic": "RoPE + dynamic NTK",
          "pi-ft": "RoPE + PI, fine-tuned"}


@dataclass(frozen=True)
class Size:
    """How big the experiment is: the models, their training, the text they are scored on."""

    name: str
    model: dict[str, Any]  # GPTConfig fields besides pos_encoding (and vocab_size)
    steps: int  # training steps of each encoding's model
    batch_size: int
    seeds: int  # models per encoding (and fine-tunes per length): seeds S, S+1, ...
    finetune_steps: int  # Position Interpolation's fine-tune at each longer length
    warmup: int  # the fine-tune's warm-up steps (Chen et al.: 20)
    eval_tokens: int  # held-out tokens every model is scored on
    buckets: int  # position buckets in the by-position figure
    evals: int = 4  # validation estimates (and checkpoints) during each training
    eval_iters: int = 10  # batches per estimate


SIZES = {
    # Half of nanoGPT's CPU shape (the shakespeare-char-cpu preset: 4 layers of width 128)
    # in depth and width, at its block of 64: three seeds of the full shape would take
    # about three times the 3 minutes a default size may take; a step of this one costs
    # about a fifth (8 against 39 ms at one thread), and it still learns what extrapolation
    # tests (RoPE's 1x loss 2.01 nats against the full shape's 1.87, every claim's
    # direction the same).
    "default": Size("default", dict(block_size=64, n_layer=2, n_head=4, n_embd=64, bias=False,
                                    dropout=0.0),
                    steps=1000, batch_size=12, seeds=3, finetune_steps=200, warmup=20,
                    eval_tokens=8192, buckets=16),
    # For the test suite: seconds, same code paths.
    "quick": Size("quick", dict(block_size=64, n_layer=2, n_head=2, n_embd=32, bias=False,
                                dropout=0.0),
                  steps=30, batch_size=8, seeds=1, finetune_steps=6, warmup=2, eval_tokens=1500,
                  buckets=16, evals=1, eval_iters=2),
}


def run_context(out: str | Path, data: str | Path | None = None, quick: bool = False,
                seed: int = 1337, steps: int | None = None, progress: bool = False,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or reuse) the grid in `out`, score every model, write results.json,
    report.md and the figures there; returns the results. data: a prepared data directory
    (default: the embedded Shakespeare, prepared into OUT/data)."""
    size = choose_size(SIZES, quick, steps=steps)
    timer = report.Timer()
    folder, data_dir = open_experiment(out, NAME, data, log)
    grid = Grid(folder, data_dir)
    tokens = load_data(data_dir)
    records = grid.train(_specs(size, seed, tokens.vocab_size), progress, log)
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    text = _eval_text(folder, data_dir, size.eval_tokens)
    t0 = time.perf_counter()
    seeds = seed_list(seed, size.seeds)
    rows_by_seed = {str(s): _evaluate(grid, text, size, s, seed, log) for s in seeds}
    timer.add("eval_s", time.perf_counter() - t0)
    results = {
        "experiment": NAME, "size": size.name, "trained_length": size.model["block_size"],
        "lengths": [m * size.model["block_size"] for m in MULTIPLES],
        "model": size.model, "recipe": RECIPE, "steps": size.steps,
        "finetune_steps": size.finetune_steps, "seeds": seeds,
        "data": Path(data_dir).name,
        "baselines": text_baselines(tokens.train, tokens.vocab_size),
        "eval": {"text": EVAL_TEXT, "tokens": size.eval_tokens,
                                        "sliding_stride": f"length // {SLIDING_FRACTION}"},
        "runs": {name: r.to_dict(folder) for name, r in records.items()},
        # the first seed's cells (the figures, the by-position table, `gptlab eval`'s
        # example), then every seed's: what the loss tables' means and the claims read
        "rows": rows_by_seed[str(seed)], "rows_by_seed": rows_by_seed,
    }
    _figures(folder, results)
    return report.finish(folder, results, records, timer, TITLE,
                         lambda results: _sections(results, records), CLAIMS)


def run_name(name: str, seed: int, first: int) -> str:
    """`rope` for the first seed's run (the name a one-seed folder always had), `rope-s1338`
    for another seed's."""
    return name if seed == first else f"{name}-s{seed}"


def _specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """Every seed's runs: one per encoding, then a Position Interpolation fine-tune of the
    RoPE run at each longer length (batch cut so that a step sees about as many tokens)."""
    return [spec for s in seed_list(seed, size.seeds)
            for spec in _seed_specs(size, s, vocab_size, lambda name, s=s: run_name(name, s,
                                                                                    seed))]


def _seed_specs(size: Size, seed: int, vocab_size: int,
                named: Callable[[str], str]) -> list[RunSpec]:
    base = RECIPES[RECIPE]
    train = recipe(RECIPE, max_iters=size.steps, batch_size=size.batch_size, seed=seed,
                   eval_interval=max(1, size.steps // size.evals), eval_iters=size.eval_iters,
                   log_interval=50,
                   whole_val=False, dtype="float32")
    specs = [RunSpec(named(enc), GPTConfig(vocab_size=vocab_size, pos_encoding=enc,
                                           **size.model), train) for enc in ENCODINGS]
    rope = specs[ENCODINGS.index("rope")].model
    for m in MULTIPLES[1:]:
        # Chen et al. fine-tune at 1/10 or less of the pre-training rate, with 20 warm-up
        # steps; here a tenth of the recipe's, decaying to a hundredth.
        finetune = with_settings(base, dict(
            max_iters=size.finetune_steps, warmup_iters=size.warmup,
            learning_rate=base["learning_rate"] / 10, min_lr=base["learning_rate"] / 100,
            batch_size=max(2, size.batch_size // m), seed=seed,
            eval_interval=size.finetune_steps, eval_iters=size.eval_iters, log_interval=50,
            whole_val=False, dtype="float32"))
        longer = GPTConfig.from_dict({**rope.to_dict(), "block_size": m * rope.block_size,
                                      "rope_scaling": {"type": "linear", "factor": float(m)}})
        specs.append(RunSpec(named(f"rope-pi-x{m}"), longer, finetune, start=named("rope")))
    return specs


def _eval_text(folder: Path, data_dir: Path, tokens: int) -> str:
    """The start of the data's validation split, decoded: what every model is scored on,
    saved as FOLDER/eval.txt so that `gptlab eval --text` reproduces each number."""
    data = load_data(data_dir)
    if len(data.val) < tokens:
        raise UsageError(f"{data_dir}'s validation split has {len(data.val):,} tokens; the "
                         f"experiment scores {tokens:,}")
    text = load_tokenizer(data.tokenizer_path).decode([int(i) for i in data.val[:tokens]])
    atomic_write_text(folder / EVAL_TEXT, text)
    return text


def _evaluate(grid: Grid, text: str, size: Size, seed: int, first: int,
              log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every method's row for one seed's runs (first: the experiment's first seed, whose
    runs have the plain names): its cells at each length."""
    block = size.model["block_size"]

    def run(name: str) -> str:
        return run_name(name, seed, first)
    rows = []
    for enc in ENCODINGS:
        cells = [_cell(grid.run_dir(run(enc)), text, m * block, None, block, size)
                 for m in MULTIPLES]
        rows.append({"method": enc, "label": LABELS[enc], "run": run(enc), "cells": cells})
    for kind in SCALINGS:
        cells = [_cell(grid.run_dir(run("rope")), text, m * block, f"{kind}:{m}", block, size)
                 for m in MULTIPLES]
        rows.append({"method": kind, "label": LABELS[kind], "run": run("rope"),
                     "cells": cells})
    cells = [None] + [_cell(grid.run_dir(run(f"rope-pi-x{m}")), text, m * block, None, block,
                            size) for m in MULTIPLES[1:]]
    rows.append({"method": "pi-ft", "label": f"{LABELS['pi-ft']} ({size.finetune_steps} steps "
                 f"at each length)", "run": run("rope-pi-xF"), "cells": cells})
    log(f"scored every method, seed {seed}")
    return rows


def _cell(run_dir: Path, text: str, length: int, scaling: str | None, block: int,
          size: Size) -> dict[str, Any]:
    """One model at one length, in both modes; or the refusal, in its own words."""
    cell: dict[str, Any] = {"length": length, "rope_scaling": scaling}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ContextWarning)  # the report says it once
            model, tokenizer = load(run_dir, context=length, rope_scaling=scaling)
    except UsageError as exc:
        return {**cell, "refused": str(exc)}
    starts = [0] + [block * 2**k for k in range(8) if block * 2**k < length]
    with torch.no_grad():
        for mode in MODES:
            stride = length if mode == "non-overlapping" else max(1, length // SLIDING_FRACTION)
            positions = score_text(model, tokenizer, text, stride=stride).positions
            cell[mode] = {"loss": positions.loss, "stride": stride,
                          "tokens_scored": sum(positions.scored),
                          "by_length": positions.spans(starts),
                          "by_position": positions.buckets(size.buckets)}
    return cell


# ----------------------------------------------------------------------------- claims
#
# Every quantity is taken seed by seed (each seed's own models and fine-tunes) and judged
# against the seeds' spread. Losses are non-overlapping windows'; "2x" is twice the trained
# length.


def rows_by_seed(results: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """{seed: that seed's rows}; a results.json from before seeds (one seed, "rows" only)
    gives its one."""
    if "rows_by_seed" in results:
        return {int(s): rows for s, rows in results["rows_by_seed"].items()}
    return {results["runs"]["rope"]["seed"]: results["rows"]}


def _loss(results: dict[str, Any], rows: list[dict[str, Any]], method: str,
          multiple: int) -> float | None:
    """A method's non-overlapping loss at multiple x the trained length in one seed's rows
    (None: refused)."""
    row = next(r for r in rows if r["method"] == method)
    cell = row["cells"][results["lengths"].index(multiple * results["trained_length"])]
    if cell is None or "refused" in cell:
        return None
    return cell["non-overlapping"]["loss"]


def _per_seed(results: dict[str, Any], effect: Callable[[list[dict[str, Any]]], float],
              shown: Callable[[list[dict[str, Any]]], str], what: str = "") -> Measured:
    """effect(rows) of every seed's rows, and what each shows: "WHAT a / b / c (seeds
    ...)"."""
    by_seed = rows_by_seed(results)
    measured = per_unit(sorted(by_seed), lambda s: effect(by_seed[s]),
                        lambda s: shown(by_seed[s]), name=lambda s: s)
    return replace(measured, shown=what + measured.shown)


def _refused_share(results: dict[str, Any], rows: list[dict[str, Any]]) -> float:
    longer = [m for m in MULTIPLES if m > 1]
    return sum(_loss(results, rows, "learned", m) is None for m in longer) / len(longer)


def _refused(results: dict[str, Any]) -> Measured:
    return _per_seed(results, lambda rows: _refused_share(results, rows) - 0.5,
                     lambda rows: f"learned refuses {_refused_share(results, rows):.0%} of "
                                  f"the longer lengths")


def _ratio(results: dict[str, Any], rows: list[dict[str, Any]], method: str) -> float:
    """Perplexity at 2x over perplexity at 1x."""
    return math.exp(_loss(results, rows, method, 2) - _loss(results, rows, method, 1))


def _sinusoidal(results: dict[str, Any]) -> Measured:
    return _per_seed(results, lambda rows: _ratio(results, rows, "sinusoidal") - 1,
                     lambda rows: f"x{_ratio(results, rows, 'sinusoidal'):.2f}",
                     "perplexity at 2x over 1x: ")


def _gentle(results: dict[str, Any]) -> Measured:
    return _per_seed(
        results,
        lambda rows: _ratio(results, rows, "sinusoidal") - _ratio(results, rows, "rope"),
        lambda rows: f"RoPE x{_ratio(results, rows, 'rope'):.3f}, sinusoidal "
                     f"x{_ratio(results, rows, 'sinusoidal'):.2f}", "at 2x: ")


def _difference(results: dict[str, Any], worse: str, better: str, multiple: int) -> Measured:
    def diff(rows: list[dict[str, Any]]) -> float:
        return _loss(results, rows, worse, multiple) - _loss(results, rows, better, multiple)
    return _per_seed(results, diff, lambda rows: f"{diff(rows):+.3f}",
                     f"{LABELS[worse]} - {LABELS[better]} at {multiple}x: ")


def _flat(results: dict[str, Any]) -> Measured:
    def change(rows: list[dict[str, Any]]) -> float:
        return (_loss(results, rows, "alibi", MULTIPLES[-1])
                - _loss(results, rows, "alibi", 1))
    return _per_seed(results, lambda rows: FLAT - abs(change(rows)),
                     lambda rows: f"{change(rows):+.3f}",
                     f"ALiBi's loss at {MULTIPLES[-1]}x - at 1x: ")


def _trained_loss(results: dict[str, Any], methods: tuple[str, ...]) -> float:
    """The highest loss at the trained length of those methods' models over the seeds."""
    return max(_loss(results, rows, m, 1) for rows in rows_by_seed(results).values()
               for m in methods)


def reads_context(*methods: str) -> Precondition:
    """How a model uses positions past its training length is read only off a model that
    uses its context at that length: a loss at 1x under the bigram table's, which the
    current token's embedding alone gets (no position needed)."""
    names = " and ".join(LABELS[m] for m in methods)
    models = f"{names} models read their" if len(methods) > 1 else f"{names} model reads its"
    return Precondition(
        f"every seed's {models} context", "highest loss at 1x",
        lambda r: _trained_loss(r, methods), lambda r: r["baselines"]["bigram"],
        below=True, why="a bigram table's loss")


# Thresholds: a loss difference counts from 0.05 nats (about 5% in perplexity; the second
# decimal moves with the seed at this size); a perplexity ratio from +0.5 (the sinusoidal
# model's rise in the ALiBi paper is +1.17); "flat" is within FLAT nats of the 1x loss.
FLAT = 0.05
CLAIMS = (
    Claim("learned_dies",
          "learned positions that only saw the training length die past it",
          "no row past the table: the model cannot run",
          "share of the longer lengths the learned model refuses, minus one half",
          _refused, direction=1),
    Claim("sinusoidal",
          "sinusoidal positions, in theory extrapolatable, do not extrapolate in practice",
          "20.05 at 512 → 43.54 at 1012 (x2.17; ALiBi, Table 2)",
          "perplexity at 2x over 1x, minus 1",
          _sinusoidal, direction=1, smallest=0.5, precondition=reads_context("sinusoidal")),
    Claim("rope_gentle",
          "RoPE degrades more gently than sinusoidal positions past the trained length",
          "20.07 → 21.37 (x1.065) against sinusoidal's x2.17 (ALiBi, Table 2)",
          "sinusoidal's perplexity ratio 2x / 1x minus RoPE's",
          _gentle, direction=1, smallest=0.5,
          precondition=reads_context("sinusoidal", "rope")),
    Claim("alibi_flat",
          "ALiBi stays flat far past its training length",
          "flat to 15k tokens from 512 (ALiBi, Table 2)",
          f"{FLAT} nats minus |loss at the longest length - loss at 1x|",
          _flat, direction=1, precondition=reads_context("alibi")),
    Claim("pi_without_finetune",
          "Position Interpolation without fine-tuning degrades",
          "degrades (Chen et al. 2023)",
          "loss at 2x, RoPE + linear scaling minus RoPE unscaled (nats)",
          lambda r: _difference(r, "linear", "rope", 2), direction=1, smallest=0.05,
          precondition=reads_context("rope")),
    Claim("pi_finetune",
          "a short fine-tune recovers Position Interpolation",
          "about 200 steps recover (Chen et al. 2023)",
          "loss at 2x, PI without fine-tuning minus PI fine-tuned (nats)",
          lambda r: _difference(r, "linear", "pi-ft", 2), direction=1, smallest=0.05,
          precondition=reads_context("rope")),
    Claim("ntk_beats_pi",
          "adjusting RoPE's frequencies (NTK-aware) beats interpolating them, no fine-tune",
          "NTK better than PI without fine-tuning (YaRN, Table 1)",
          "loss at 2x, RoPE + linear minus RoPE + NTK-aware (nats)",
          lambda r: _difference(r, "linear", "ntk", 2), direction=1, smallest=0.05,
          precondition=reads_context("rope")),
)


# ----------------------------------------------------------------------------- writing


def table(results: dict[str, Any], mode: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the losses in one mode: a row per method, a column per length;
    with several seeds, each cell their mean ± half their range."""
    header = ["method"] + [f"{length // results['trained_length']}x ({length})"
                           for length in results["lengths"]]
    every = list(rows_by_seed(results).values())
    rows = []
    for i, row in enumerate(results["rows"]):
        cells = []
        for j, cell in enumerate(row["cells"]):
            if cell is None:
                cells.append("—")
            elif "refused" in cell:
                cells.append("refused")
            else:
                losses = [rows[i]["cells"][j][mode]["loss"] for rows in every]
                cells.append(report.loss_cell({"mean": sum(losses) / len(losses),
                                               "values": losses,
                                               "spread": max(losses) - min(losses)}, []))
        rows.append([row["label"], *cells])
    return header, rows


def by_position_table(results: dict[str, Any], mode: str = "non-overlapping"
                      ) -> tuple[list[str], list[list[str]]]:
    """At the longest length: each method's loss over positions [0, L), [L, 2L), [2L, 4L),
    [4L, 8L) of its windows (how the loss moves as positions pass the trained ones)."""
    header, rows = None, []
    for row in results["rows"]:
        cell = row["cells"][-1]
        if cell is None or "refused" in cell:
            continue
        spans = cell[mode]["by_length"]
        header = header or ["method"] + [f"positions {s['first']}-{s['last']}" for s in spans]
        rows.append([row["label"]] + [("—" if s["loss"] is None else f"{s['loss']:.3f}")
                                      for s in spans])
    return header or ["method"], rows


def _first_seed(results: dict[str, Any]) -> int:
    return min(rows_by_seed(results))


def _figures(folder: Path, results: dict[str, Any]) -> None:
    """The first seed's losses by length and by position (the other seeds' are in
    results.json and the loss tables' means)."""
    trained, seed = results["trained_length"], _first_seed(results)
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for mode in MODES:
        lines = {}
        for row in results["rows"]:
            points = [(c["length"], c[mode]["loss"]) for c in row["cells"]
                      if c is not None and "refused" not in c]
            if points:
                lines[row["label"]] = points
        panels[f"{mode} windows"] = lines
    loss_by_length(panels, trained, title=f"trained at {trained}, scored at 1x-8x (loss, "
                                          f"nats/token; seed {seed})"
                   ).save(folder / FIGURE_LENGTHS)
    longest = results["lengths"][-1]
    series = {row["label"]: {"buckets": row["cells"][-1]["non-overlapping"]["by_position"]}
              for row in results["rows"]
              if row["cells"][-1] is not None and "refused" not in row["cells"][-1]}
    loss_by_position(series, trained, title=f"loss by position in non-overlapping windows "
                                            f"of {longest} (seed {seed})"
                     ).save(folder / FIGURE_POSITIONS)


def _sections(results: dict[str, Any], records: dict[str, RunRecord]) -> list[tuple[str, str]]:
    trained, m = results["trained_length"], results["model"]
    seeds = sorted(rows_by_seed(results))
    if len(seeds) > 1:
        seeding = (f"seeds {', '.join(map(str, seeds))}, each with its own runs (seed "
                   f"{seeds[0]}'s named plainly, the others' ending in -sSEED); a loss is the "
                   f"mean over seeds ± half their range, the by-position table and the "
                   f"figures seed {seeds[0]}'s")
    else:
        seeding = report.seeds_line(records)
    learned = next(r for r in results["rows"] if r["method"] == "learned")
    refusal = next((c["refused"] for c in learned["cells"] if c and "refused" in c), "")
    setup = (
        f"Size `{results['size']}`: {m['n_layer']} layers, {m['n_head']} heads, width "
        f"{m['n_embd']}, trained at block_size {trained} for {results['steps']} steps of "
        f"`{results['recipe']}` on `{results['data']}`; {seeding}. "
        f"Scored on the first {results['eval']['tokens']:,} tokens of the validation split "
        f"(`{EVAL_TEXT}`). RoPE + PI, fine-tuned: the RoPE model trained "
        f"{results['finetune_steps']} more steps at each longer length with linear scaling "
        f"(runs `rope-pi-x2`, `-x4`, `-x8`). Scalings without fine-tuning use factor = "
        f"length / {trained}. Losses in nats per token (perplexity = e^loss).\n\n"
        f"Learned positions past {trained}: \"{refusal}\"")
    sections = [("Setup", setup)]
    for mode in MODES:
        header, rows = table(results, mode)
        stride = "length" if mode == "non-overlapping" else f"length // {SLIDING_FRACTION}"
        sections.append((f"Loss, {mode} windows (stride = {stride})",
                         report.markdown_table(header, rows)))
    header, rows = by_position_table(results)
    sections.append((f"By position, non-overlapping windows of {results['lengths'][-1]} "
                     f"(seed {seeds[0]})",
                     report.markdown_table(header, rows) + f"\n\n![by position]"
                                                            f"({FIGURE_POSITIONS})"))
    sections.append(("Figure", f"![loss by length]({FIGURE_LENGTHS})"))
    sections.append(("Reproduce one number",
                     f"`gptlab eval {results['runs']['rope']['dir']} --text {EVAL_TEXT} "
                     f"--context {4 * trained} --stride {4 * trained} --rope-scaling yarn:4` "
                     f"(run from this folder) prints the RoPE + YaRN cell at 4x, "
                     f"non-overlapping; any cell likewise."))
    sections.append(report.time_section(results))
    return sections


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables `gptlab experiment context` prints (and the lab shows)."""
    trained, seeds = results["trained_length"], sorted(rows_by_seed(results))
    over = f"; mean over seeds {', '.join(map(str, seeds))}" if len(seeds) > 1 else ""
    return [*[(f"loss (nats/token), {mode} windows; trained at {trained}{over}:",
               table(results, mode)) for mode in MODES],
            (f"by position, non-overlapping windows of {results['lengths'][-1]} (seed "
             f"{seeds[0]}):", by_position_table(results))]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds",), run=run_context, tables=tables, claims=CLAIMS)
