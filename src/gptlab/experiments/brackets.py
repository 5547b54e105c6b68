"""`gptlab experiment brackets`: do heads "track bracket matching"?

Small models (2 layers x 4 heads, a few seeds) are trained as ordinary runs on Dyck-2
(gptlab.data.dyck: balanced words over "()[]", depth at most 4), predicting the next symbol.
On fixed held-out rows, gptlab.interp.brackets scores every head: its attention from a
closing bracket (and from the symbol before it) to the opening bracket it closes, against
chance and the rules that need no stack (nearest opening, nearest of the same kind); how
uniform its attention is (counting, as ARENA's bracket classifier does); and the loss on
closing brackets with a head ablated, for the best-matching head and the most uniform one.
Wen et al. 2023 warn that attention patterns can mislead about the mechanism: the ablations
say which heads the model needs.

Also, beside it: the previous-token heads of the shipped model (gptlab.load("shakespeare"),
TransformerLens's detector, attention on the sub-diagonal) next to GPT-2 small's heads 2.2
and 4.11 from the literature (GPT-2's weights are not available offline: not scored here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.data.dyck import CLOSING, MAX_DEPTH, dyck_rows, ensure_dyck
from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import UsageError
from gptlab.experiments import report
from gptlab.experiments.claims import Claim, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import Grid, RunRecord, RunSpec, choose_size, experiment_folder
from gptlab.experiments.units import by_seed, measured_over, seed_list
from gptlab.interp.brackets import (
    COUNTING_UNIFORMITY,
    MATCH_MARGIN,
    bracket_heads,
    closing_accuracy,
    closing_loss_targets,
)
from gptlab.interp.heads import chance_scores, head_scores, repeated_random_tokens
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.plots.interp import head_scores as head_grids
from gptlab.training.config import recipe

NAME = "brackets"
RECIPE = "shakespeare-char-cpu-fast"
TITLE = "Heads that track bracket matching (Dyck-2)"
FIGURE = "brackets-heads.png"
FIGURES = (FIGURE,)
PROBE_SEED = 12345  # the scored rows never change with the training seed (nor are trained on)
SHIPPED = "shakespeare"
GPT2_PREVIOUS_TOKEN = "2.2 and 4.11"  # GPT-2 small's previous-token heads (TransformerLens)


@dataclass(frozen=True)
class Size:
    name: str
    model: dict[str, Any]  # GPTConfig fields (vocab_size from the data)
    steps: int
    batch_size: int
    seeds: int
    dyck_chars: int  # length of the generated training text
    rows: int  # held-out rows every head is scored on
    shipped_batch: int  # random sequences the shipped model's previous-token score averages
    learning_rate: float = 3e-3
    warmup: int = 40
    eval_iters: int = 4


SIZES = {
    # 2 x 4 heads, width 64, 800 steps: docs/interp.md's measured models; three seeds (the
    # verdicts need a spread) take about 30 s on a quiet 2-core machine, well within 3 minutes
    "default": Size("default", dict(n_layer=2, n_head=4, n_embd=64, block_size=64,
                                    dropout=0.0, bias=False),
                    steps=800, batch_size=32, seeds=3, dyck_chars=400_000, rows=128,
                    shipped_batch=8),
    "quick": Size("quick", dict(n_layer=2, n_head=2, n_embd=16, block_size=32, dropout=0.0,
                                bias=False),
                  steps=10, batch_size=4, seeds=2, dyck_chars=20_000, rows=4,
                  shipped_batch=1, warmup=2, eval_iters=1),
}


def run_brackets(out: str | Path, data: str | Path | None = None, quick: bool = False,
                 seed: int = 1337, steps: int | None = None, progress: bool = False,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or reuse) the seeds' models in `out` on generated Dyck-2 (in OUT/dyck-data),
    score their heads, write results.json, report.md and the figure; returns the results.
    data: must be None (the task is generated; the parameter is every experiment's)."""
    if data is not None:
        raise UsageError(f"data: the brackets experiment trains on Dyck-2 brackets it "
                         f"generates, not on {str(data)!r}")
    size = choose_size(SIZES, quick, steps=steps)
    timer = report.Timer()
    folder = experiment_folder(out, NAME)
    data_dir = folder / "dyck-data"
    meta, reused = ensure_dyck(data_dir, size.dyck_chars, PROBE_SEED + 1, by="experiment")
    if not reused:
        log(f"prepared Dyck-2 ({meta['train_tokens'] + meta['val_tokens']:,} characters) in "
            f"{data_dir}/")
    grid = Grid(folder, data_dir)
    records = grid.train(specs(size, seed, meta["vocab_size"]), progress, log)
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    t0 = time.perf_counter()
    rows = dyck_rows(size.rows, size.model["block_size"], seed=PROBE_SEED)
    runs = {name: measure(grid.run_dir(name), r, rows) for name, r in records.items()}
    baselines = {"bigram_closing_accuracy": bigram_closing_accuracy(data_dir, rows)}
    shipped = shipped_previous_token(size)
    timer.add("measure_s", time.perf_counter() - t0)
    results = {
        "experiment": NAME, "size": size.name, "model": size.model, "recipe": RECIPE,
        "steps": size.steps, "batch_size": size.batch_size,
        "learning_rate": size.learning_rate, "max_depth": MAX_DEPTH,
        "probe": {"seed": PROBE_SEED, "rows": size.rows, "row_length": size.model["block_size"]},
        "match_margin": MATCH_MARGIN, "counting_uniformity": COUNTING_UNIFORMITY,
        "baselines": baselines, "runs": runs,
        "records": {name: r.to_dict(folder) for name, r in records.items()}, "shipped": shipped,
    }
    drawing = time.perf_counter()
    figure(results).save(folder / FIGURE)
    timer.add("report_s", time.perf_counter() - drawing)
    return report.finish(folder, results, records, timer, TITLE,
                         lambda written: sections(written, records), CLAIMS)


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """A run per seed, named dyck-seed-S: one evaluation, at the end (the heads are scored
    afterwards, on held-out rows)."""
    model = GPTConfig(vocab_size=vocab_size, **size.model)
    lr = size.learning_rate
    return [RunSpec(f"dyck-seed-{s}", model,
                    recipe(RECIPE, seed=s, max_iters=size.steps, eval_interval=size.steps,
                           batch_size=size.batch_size, learning_rate=lr, min_lr=lr / 10,
                           warmup_iters=size.warmup, eval_iters=size.eval_iters,
                           log_interval=max(1, size.steps // 10), whole_val=False,
                           dtype="float32"))
            for s in seed_list(seed, size.seeds)]


def measure(run_dir: Path, record: RunRecord, rows: list[str]) -> dict[str, Any]:
    """One model's heads (gptlab.interp.brackets.bracket_heads), the ablation of its most
    uniform head (by its uniformity before closing brackets), and the head whose ablation
    costs the most on closing brackets ("most_needed") with its uniformity and match."""
    model, tokenizer = load(run_dir)
    scored = bracket_heads(model, rows, tokenizer.encode)
    uniformity = torch.tensor(scored["before"]["heads"]["uniformity"])
    layer, head = divmod(int(uniformity.argmax()), uniformity.shape[1])
    scored["most_uniform"] = {"layer": layer, "head": head,
                              "uniformity": float(uniformity[layer, head]),
                              "ablated_loss": scored["ablated_loss"][layer][head]}
    ablated = torch.tensor(scored["ablated_loss"])
    layer, head = divmod(int(ablated.argmax()), ablated.shape[1])
    scored["most_needed"] = {"layer": layer, "head": head,
                             "uniformity": float(uniformity[layer, head]),
                             "match": scored["before"]["heads"]["match"][layer][head],
                             "ablated_loss": float(ablated[layer, head])}
    return {"seed": record.seed, **scored}


def bigram_closing_accuracy(data_dir: Path, rows: list[str]) -> float:
    """The closing accuracy (gptlab.interp.brackets.closing_accuracy) of the bigram table of
    the training split on the scored rows: at each closing bracket, whether the table puts
    more on the right closing bracket than on the other after the symbol before it. What a
    model gets with no head at all."""
    data = load_data(data_dir)
    tokenizer = load_tokenizer(data.tokenizer_path)
    train, vocab = data.train.astype("int64"), data.vocab_size
    counts = torch.zeros(vocab * vocab, dtype=torch.float64)
    counts.index_add_(0, torch.as_tensor(train[:-1] * vocab + train[1:]),
                      torch.ones(len(train) - 1, dtype=torch.float64))
    idx = torch.tensor([tokenizer.encode(r) for r in rows])
    targets = closing_loss_targets(idx, rows)
    right, wrong = (tokenizer.encode(bracket)[0] for bracket in CLOSING)
    other = torch.where(targets == right, wrong, right)
    return closing_accuracy(counts.view(vocab, vocab)[idx], targets, other)


def shipped_previous_token(size: Size) -> dict[str, Any]:
    """The shipped model's previous-token scores on random tokens (seed PROBE_SEED), its
    best head and chance (a head attending uniformly)."""
    model, tokenizer = load(SHIPPED)
    block = model.config.block_size
    tokens = repeated_random_tokens(tokenizer.vocab_size, block // 2, size.shipped_batch,
                                    torch.Generator().manual_seed(PROBE_SEED))
    grid = head_scores(model, tokens)["previous_token"]
    layer, head = divmod(int(grid.argmax()), grid.shape[1])
    return {"model": SHIPPED, "scores": grid.tolist(), "best": {"layer": layer, "head": head,
            "score": float(grid[layer, head])},
            "chance": chance_scores(tokens)["previous_token"],
            "gpt2_small": {"heads": GPT2_PREVIOUS_TOKEN,
                           "scored": "no: GPT-2's weights cannot be fetched offline"}}


# ----------------------------------------------------------------------------- claims


def _best_match_over_rules(run: dict[str, Any]) -> float:
    """The best head's match score minus the best no-stack rule's, at whichever query
    position (the bracket, or the symbol before it) does better."""
    return max(max(max(row) for row in run[w]["heads"]["match"]) - max(run[w]["rules"].values())
               for w in ("closing", "before"))


def _runs(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims' units: each seed's model, in seed order."""
    return by_seed(results["runs"].values())


# Thresholds: matching counts from MATCH_MARGIN above every rule (gptlab.interp.brackets
# says why); "solves" means at least 95% of closing brackets of the right kind, where a coin
# gets 50%; an ablation "hurts" from 0.05 nats on closing brackets, about a tenth of the
# clean loss there (which is mostly the coin toss between closing and opening); counting is
# a uniformity of at least COUNTING_UNIFORMITY.
SOLVED = 0.95
HURTS = 0.05
# The heads are read only in models that learned the task: every seed's model names the
# right kind of closing bracket at least halfway from what a bigram table of the training
# text names to certain. The table, which needs no head, names 0.82 of the default size's
# scored closing brackets rightly (the symbol before one is often its own opening) and
# 0.86 of the quick size's; a model below the bar has learned little more, and has no
# matching or counting to read (a --quick model of 10 steps scores what the table does).
LEARNED_DYCK = Precondition(
    "every seed's model learned Dyck-2", "lowest closing accuracy",
    lambda r: min(run["closing_accuracy"] for run in r["runs"].values()),
    lambda r: (r["baselines"]["bigram_closing_accuracy"] + 1) / 2,
    why=lambda r: f"halfway from a bigram table's "
                  f"{r['baselines']['bigram_closing_accuracy']:.3f} to certain")
CLAIMS = (
    Claim("solves_dyck",
          "the small model solves Dyck-2 (names the right closing bracket)",
          "the task the chapter's bracket heads are found on",
          "closing accuracy (the right kind of closing bracket preferred) minus 0.95",
          measured_over(_runs, lambda r: r["closing_accuracy"] - SOLVED,
                        "closing accuracy - 0.95: {}"),
          direction=1, smallest=0.0),
    Claim("heads_match",
          "some heads track bracket matching",
          "the chapter: some heads \"track bracket matching\"",
          "the best head's attention on the match minus the best no-stack rule's score "
          f"(counts from {MATCH_MARGIN:g})",
          measured_over(_runs, _best_match_over_rules, "best match - best rule: {}"),
          direction=1, smallest=MATCH_MARGIN, precondition=LEARNED_DYCK),
    Claim("matching_head_needed",
          "ablating the best-matching head hurts closing brackets",
          "what a matching mechanism predicts",
          f"loss on closing brackets with that head zeroed minus clean, nats (from {HURTS:g})",
          measured_over(_runs, lambda r: r["best"]["ablated_loss"] - r["closing_loss"],
                        "ablated - clean: {}"),
          direction=1, smallest=HURTS, precondition=LEARNED_DYCK),
    Claim("counts",
          "a head attends uniformly (counting)",
          "ARENA's bracket classifier balances by counting with a uniform head",
          f"the most uniform head's uniformity minus {COUNTING_UNIFORMITY:g}",
          measured_over(_runs,
                        lambda r: r["most_uniform"]["uniformity"] - COUNTING_UNIFORMITY,
                        f"uniformity - {COUNTING_UNIFORMITY:g}: {{}}"),
          direction=1, smallest=0.0, precondition=LEARNED_DYCK),
    Claim("counting_head_needed",
          "ablating the most uniform head hurts closing brackets more than the best-matching",
          "Wen et al. 2023: patterns can mislead; ablation decides",
          "loss on closing brackets, most uniform head zeroed minus best-matching head zeroed, "
          f"nats (from {HURTS:g})",
          measured_over(_runs,
                        lambda r: r["most_uniform"]["ablated_loss"] - r["best"]["ablated_loss"],
                        "uniform ablated - matching ablated: {}"),
          direction=1, smallest=HURTS, precondition=LEARNED_DYCK),
    Claim("needed_head_counts",
          "the head the model needs most attends uniformly (it counts, not matches)",
          "ARENA: counting; Wen et al. 2023: read the mechanism off ablations",
          "the uniformity of the head whose ablation costs the most on closing brackets, "
          f"minus {COUNTING_UNIFORMITY:g}",
          measured_over(_runs,
                        lambda r: r["most_needed"]["uniformity"] - COUNTING_UNIFORMITY,
                        f"most needed head's uniformity - {COUNTING_UNIFORMITY:g}: {{}}"),
          direction=1, smallest=0.0, precondition=LEARNED_DYCK),
)


# ----------------------------------------------------------------------------- writing


def _head(h: dict[str, Any]) -> str:
    return f"{h['layer']}.{h['head']}"


def table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per seed: accuracy, the best match against the rules, the ablations."""
    header = ["run", "closing accuracy", "best match (before / closing)",
              "best rule (before / closing)", "most uniform head", "loss on closing: clean",
              "matching head ablated", "uniform head ablated",
              "most needed head (uniformity, match)"]
    rows = []
    for name, r in results["runs"].items():
        best_match = [max(max(row) for row in r[w]["heads"]["match"]) for w in ("before",
                                                                                "closing")]
        rules = [max(r[w]["rules"].values()) for w in ("before", "closing")]
        u, n = r["most_uniform"], r["most_needed"]
        rows.append([name, f"{r['closing_accuracy']:.3f}",
                     f"{best_match[0]:.3f} / {best_match[1]:.3f} (head {_head(r['best'])})",
                     f"{rules[0]:.3f} / {rules[1]:.3f}",
                     f"{_head(u)} ({u['uniformity']:.2f})", f"{r['closing_loss']:.3f}",
                     f"{r['best']['ablated_loss']:.3f} (accuracy "
                     f"{r['best']['ablated_accuracy']:.3f})", f"{u['ablated_loss']:.3f}",
                     f"{_head(n)}: {n['ablated_loss']:.3f} ({n['uniformity']:.2f}, "
                     f"{n['match']:.3f})"])
    return header, rows


def shipped_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    s = results["shipped"]
    return (["model", "previous-token head", "score", "chance (uniform head)"],
            [[f"shipped ({s['model']})", _head(s["best"]), f"{s['best']['score']:.3f}",
              f"{s['chance']:.3f}"],
             ["GPT-2 small (literature)", s["gpt2_small"]["heads"],
              "not scored: no offline weights", "—"]])


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows."""
    return [("heads on Dyck-2 (held-out rows; the match is the opening bracket a closing one "
             "closes):", table(results)),
            ("previous-token heads (TransformerLens's detector, random tokens):",
             shipped_table(results))]


def notes(results: dict[str, Any]) -> list[str]:
    """Which heads the measurements call matching and counting, per seed."""
    out = []
    for name, r in results["runs"].items():
        matching = sorted({_head({"layer": a, "head": b}) for w in ("closing", "before")
                           for a, b in r[w]["tracks_matching"]})
        counting = [_head({"layer": a, "head": b}) for a, b in r["before"]["counting"]]
        out.append(f"{name}: heads that track matching: {', '.join(matching) or 'none'}; "
                   f"heads that count (uniformity >= {COUNTING_UNIFORMITY:g}): "
                   f"{', '.join(counting) or 'none'}")
    return out


def figure(results: dict[str, Any]) -> Any:
    """The first seed's heads: match score, uniformity, ablated loss minus clean."""
    name, r = next(iter(results["runs"].items()))
    ablated = torch.tensor(r["ablated_loss"]) - r["closing_loss"]
    return head_grids({"match (before closing)": torch.tensor(r["before"]["heads"]["match"]),
                       "uniformity": torch.tensor(r["before"]["heads"]["uniformity"]),
                       "ablated loss - clean (nats)": ablated.clamp(min=0)},
                      title=f"{name}: heads on Dyck-2")


def sections(results: dict[str, Any], records: dict[str, RunRecord]) -> list[tuple[str, str]]:
    m, probe = results["model"], results["probe"]
    model = f"{m['n_layer']} layers x {m['n_head']} heads, width {m['n_embd']}"
    training = (f"{results['steps']} steps of batch {results['batch_size']}, learning rate "
                f"{results['learning_rate']:g}")
    scoring = (f"{probe['rows']} held-out rows of {probe['row_length']} symbols (seed "
               f"{probe['seed']})")
    setup = (f"Size `{results['size']}`: {model}, block {m['block_size']}, trained on Dyck-2 "
             f"(depth at most {results['max_depth']}) for {training}; "
             f"{report.seeds_line(records)}. Heads scored on {scoring}; a head tracks "
             f"matching when its match score beats chance and every no-stack rule by "
             f"{results['match_margin']:g}; it counts when its uniformity is at least "
             f"{results['counting_uniformity']:g}.")
    out = [("Setup", setup), *report.table_sections(tables(results))]
    out.append(("Notes", "\n".join(f"- {line}" for line in notes(results))))
    out += report.closing(results, FIGURE)
    return out


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds",), run=run_brackets, tables=tables, notes=notes,
                        claims=CLAIMS)
