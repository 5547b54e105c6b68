"""The facts part of `gptlab experiment memory`: Meng et al. 2022's causal tracing (ROME) on
a small model that memorised invented facts.

Small models (a few seeds) are trained as ordinary runs (gptlab.experiments.grid: cached,
resumable, loadable in the lab) on gptlab.data.facts' statements, character-level, until
they recall them: recall is the share of facts whose attribute's first character (it names
the attribute within its relation) is the model's top prediction after a prompt, in a
phrasing trained on and in the phrasing held out of training. On the facts a seed's model
recalls (up to `prompts`, in the trained phrasing), gptlab.interp.tracing corrupts the
subject's embeddings (noise of 3x their std, `samples` noise draws, seeded by the seed)
and restores one layer's residual stream, attention output or MLP output at one position
at a time. Per seed: the average total effect, and each kind's average indirect effect
per layer and position kind (gptlab.interp.tracing.POSITION_KINDS); the claims compare
them seed by seed, so their spread is that of training and noise together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.data.facts import Prompt, ensure_facts
from gptlab.experiments.claims import Claim, Precondition
from gptlab.experiments.grid import Grid, RunRecord, RunSpec
from gptlab.experiments.report import markdown_table
from gptlab.experiments.units import by_seed, mean, mean_range, measured_over, seed_list
from gptlab.interp.tracing import (
    NOISE_SCALE,
    POSITION_KINDS,
    TRACE_KINDS,
    by_position_kind,
    embedding_std,
    position_kinds,
    subject_noise,
    trace,
)
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.plots.interp import patch_grids
from gptlab.training.config import recipe

RECIPE = "shakespeare-char-cpu-fast"
FIGURE = "memory-tracing.png"
GRID_STATE = "grid-facts.json"
DATA_DIR = "facts-data"
CORPUS_SEED = 0  # the invented facts never change with the training seed
# ROME on GPT-2 XL (1000 known facts, window 10): average total effect 18.6%; at the last
# subject token the MLP's average indirect effect peaks at 6.6%, attention's at 1.6%.
ROME = {"total": 0.186, "mlp_last_subject": 0.066, "attn_last_subject": 0.016}


@dataclass(frozen=True)
class Size:
    """The facts model and how much is traced."""

    name: str
    model: dict[str, Any]  # GPTConfig fields (vocab_size from the data)
    entities: int
    steps: int
    batch_size: int
    seeds: int
    prompts: int  # recalled facts traced per seed (at most)
    samples: int  # noise draws per fact (ROME: 10)
    # ROME traces only facts the model knows; the quick size's barely trained models know
    # none, so it traces the first facts whatever the model answers (same code paths).
    recalled_only: bool = True
    learning_rate: float = 3e-3
    warmup: int = 50
    eval_iters: int = 4


SIZES = {
    "default": Size("default", dict(n_layer=3, n_head=4, n_embd=64, block_size=64,
                                    dropout=0.0, bias=False),
                    entities=40, steps=800, batch_size=32, seeds=3, prompts=24, samples=10),
    # block 48: the longest prompt is 36 characters
    "quick": Size("quick", dict(n_layer=2, n_head=2, n_embd=16, block_size=48, dropout=0.0,
                                bias=False),
                  entities=4, steps=10, batch_size=4, seeds=2, prompts=1, samples=2, warmup=2,
                  eval_iters=1, recalled_only=False),
}


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """A run per seed, named facts-seed-S, evaluated once at the end."""
    model = GPTConfig(vocab_size=vocab_size, **size.model)
    lr = size.learning_rate
    return [RunSpec(f"facts-seed-{s}", model,
                    recipe(RECIPE, seed=s, max_iters=size.steps, eval_interval=size.steps,
                           batch_size=size.batch_size, learning_rate=lr, min_lr=lr / 10,
                           warmup_iters=size.warmup, eval_iters=size.eval_iters,
                           log_interval=max(1, size.steps // 10), whole_val=False,
                           dtype="float32"))
            for s in seed_list(seed, size.seeds)]


def train_models(folder: Path, size: Size, seed: int, progress: bool,
                 log: Callable[[str], None]) -> tuple[Any, dict[str, RunRecord]]:
    """(corpus, records): the facts prepared in FOLDER/facts-data and a model per seed
    trained (or reused) on them."""
    corpus, meta, reused = ensure_facts(folder / DATA_DIR, size.entities, CORPUS_SEED,
                                        by="experiment")
    if not reused:
        log(f"prepared {len(corpus.facts)} invented facts "
            f"({meta['train_tokens'] + meta['val_tokens']:,} characters) in "
            f"{folder / DATA_DIR}/")
    grid = Grid(folder, folder / DATA_DIR, state=GRID_STATE)
    return corpus, grid.train(specs(size, seed, meta["vocab_size"]), progress, log)


def encoded(prompt: Prompt, encode: Callable[[str], list[int]]) -> tuple[torch.Tensor,
                                                                           tuple[int, int], int]:
    """(ids, subject span in tokens, target): the prompt as a training line reads it (after
    a newline, the space before the attribute included), char-level so a character is a
    token; the target is the attribute's first character."""
    ids = torch.tensor(encode("\n" + prompt.text + " "), dtype=torch.long)
    return ids, (1 + prompt.subject_start, 1 + prompt.subject_end), encode(prompt.answer[1])[0]


@torch.no_grad()
def recalled(model: Any, prompts: tuple[Prompt, ...],
             encode: Callable[[str], list[int]]) -> list[bool]:
    """Per prompt: is the attribute's first character the model's top prediction?"""
    out = []
    for p in prompts:
        ids, _, target = encoded(p, encode)
        logits, _ = model(ids[None])
        out.append(int(logits[0, -1].argmax()) == target)
    return out


def trace_model(run_dir: Path, record: RunRecord, corpus: Any, size: Size) -> dict[str, Any]:
    """One seed's model: its recall, and the tracing of the facts it recalls (the first
    size.prompts in corpus order, trained phrasing; any facts where not
    size.recalled_only)."""
    model, tokenizer = load(run_dir)
    model.eval()
    encode = tokenizer.encode
    seen, held = recalled(model, corpus.train_prompts, encode), recalled(model, corpus.heldout,
                                                                         encode)
    chosen = [p for p, ok in zip(corpus.train_prompts, seen, strict=True)
              if ok or not size.recalled_only][:size.prompts]
    spans = [encoded(p, encode) for p in chosen]
    subject_ids = torch.cat([ids[a:b] for ids, (a, b), _ in spans]) if spans else None
    std = embedding_std(model, subject_ids) if subject_ids is not None else None
    generator = torch.Generator().manual_seed(record.seed)
    traced = []
    for prompt, (ids, (a, b), target) in zip(chosen, spans, strict=True):
        noise = subject_noise(model, size.samples, b - a, std, generator)
        result = trace(model, ids, (a, b), target, noise)
        kinds = position_kinds(len(ids), (a, b))
        traced.append({"text": prompt.text, "answer": prompt.answer, "subject": [a, b],
                       "clean": result.clean, "corrupted": result.corrupted,
                       "indirect": {k: by_position_kind(result.indirect(k), kinds)
                                    for k in TRACE_KINDS}})
    return {"seed": record.seed, "recall_trained": sum(seen) / len(seen),
            "recall_heldout": sum(held) / len(held), "facts": len(seen),
            "embedding_std": std, "traced": traced, **averages(traced)}


def averages(traced: list[dict[str, Any]]) -> dict[str, Any]:
    """The means over the traced facts: total effect, and per kind, position kind and
    layer the indirect effect (None where no fact was traced or has that position kind)."""
    if not traced:
        return {"total_effect": None, "clean": None, "corrupted": None, "aie": None}

    aie: dict[str, dict[str, list[float] | None]] = {}
    for kind in TRACE_KINDS:
        aie[kind] = {}
        for where in POSITION_KINDS:
            rows = [t["indirect"][kind][where] for t in traced
                    if t["indirect"][kind][where] is not None]
            aie[kind][where] = [mean(list(col)) for col in zip(*rows, strict=True)] if rows \
                else None
    return {"total_effect": mean([t["clean"] - t["corrupted"] for t in traced]),
            "clean": mean([t["clean"] for t in traced]),
            "corrupted": mean([t["corrupted"] for t in traced]), "aie": aie}


def run_tracing(folder: Path, size: Size, seed: int, progress: bool,
                log: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, RunRecord]]:
    """(results["tracing"], the grid's records): train, measure recall, trace."""
    corpus, records = train_models(folder, size, seed, progress, log)
    runs = {}
    for name, record in records.items():
        runs[name] = trace_model(record.run_dir, record, corpus, size)
        log(f"{name}: recall {100 * runs[name]['recall_trained']:.0f}% (trained phrasing), "
            f"{100 * runs[name]['recall_heldout']:.0f}% (held out); "
            f"{len(runs[name]['traced'])} facts traced")
    return {"size": size.name, "model": size.model, "entities": size.entities,
            "relations": len(corpus.facts) // size.entities, "steps": size.steps,
            "batch_size": size.batch_size, "learning_rate": size.learning_rate,
            "prompts": size.prompts, "samples": size.samples,
            "recalled_only": size.recalled_only, "noise_scale": NOISE_SCALE,
            "corpus_seed": CORPUS_SEED, "rome": ROME,
            "records": {name: r.to_dict(folder) for name, r in records.items()},
            "runs": runs}, records


# ----------------------------------------------------------------------------- claims


def peak(run: dict[str, Any], kind: str, where: str = "last subject") -> float:
    """The largest average indirect effect over layers of kind at position kind `where`
    (ROME's figures read the peak); NaN where nothing was traced."""
    row = (run.get("aie") or {}).get(kind, {}).get(where)
    return max(row) if row else float("nan")


def _runs(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts claims' units: each seed's model, in seed order."""
    return by_seed(results["tracing"]["runs"].values())


def _pct(v: float | None) -> str:
    return "—" if v is None or v != v else f"{100 * v:.1f}%"


# Thresholds. Recall: a model that recalls at least 90% of the facts in the trained
# phrasing has memorised them (the rest is what tracing would not be run on anyway).
# Total effect: 5 points of probability, a quarter of ROME's 18.6%; below it the noise does
# not take the fact away and nothing is left to trace. MLP against attention and the last
# subject token against the others: 1 point of probability, a fifth of ROME's 5.0-point gap
# (6.6% - 1.6%), and about what ten noise draws over a few dozen facts resolve.
RECALLS = 0.90
TOTAL_SMALLEST = 0.05
AIE_SMALLEST = 0.01
# Tracing reads how a model recalls, so every seed's model must recall (facts_recalled's
# threshold): a model that knows no fact has no recall to trace.
RECALLED = Precondition(
    "every seed's model recalls the facts", "lowest recall (trained phrasing)",
    lambda r: min(run["recall_trained"] for run in r["tracing"]["runs"].values()),
    lambda r: RECALLS, why="the facts memorised")

CLAIMS = (
    Claim("facts_recalled",
          "the small model recalls the invented facts",
          "the precondition of tracing (ROME traces facts GPT-2 XL knows)",
          f"share of facts whose attribute is the top prediction (trained phrasing) minus "
          f"{RECALLS:g}",
          measured_over(_runs, lambda r: r["recall_trained"] - RECALLS,
                        lambda r: f"{_pct(r['recall_trained'])} ({_pct(r['recall_heldout'])} "
                                  f"held out)"),
          direction=1, smallest=0.0),
    Claim("tracing_total",
          "corrupting the subject takes the fact away",
          f"average total effect {_pct(ROME['total'])} (ROME, GPT-2 XL)",
          "p(attribute) clean minus with the subject's embeddings noised, mean over the "
          "traced facts",
          measured_over(_runs, lambda r: r["total_effect"], lambda r: _pct(r["total_effect"])),
          direction=1, smallest=TOTAL_SMALLEST, precondition=RECALLED),
    Claim("tracing_mlp_over_attention",
          "the MLP at the last subject token carries more of the recall than attention there",
          f"AIE at the last subject token: MLP {_pct(ROME['mlp_last_subject'])} against "
          f"attention {_pct(ROME['attn_last_subject'])} (ROME, peak over layers)",
          "the MLP's peak average indirect effect at the last subject token minus "
          "attention's, over layers",
          measured_over(_runs, lambda r: peak(r, "mlp") - peak(r, "attn"),
                        lambda r: f"{_pct(peak(r, 'mlp'))} vs {_pct(peak(r, 'attn'))}"),
          direction=1, smallest=AIE_SMALLEST, precondition=RECALLED),
    Claim("tracing_last_subject_token",
          "the MLP's effect sits at the last subject token, not the subject's earlier ones",
          "ROME: the early site is the MLPs at the last subject token",
          "the MLP's peak average indirect effect at the last subject token minus at the "
          "subject's earlier tokens",
          measured_over(_runs, lambda r: peak(r, "mlp") - peak(r, "mlp", "subject"),
                        lambda r: f"{_pct(peak(r, 'mlp'))} vs "
                                  f"{_pct(peak(r, 'mlp', 'subject'))}"),
          direction=1, smallest=AIE_SMALLEST, precondition=RECALLED),
)


# ----------------------------------------------------------------------------- writing


def runs_table(tracing: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per seed: recall, p clean and corrupted, total effect, peak AIEs."""
    header = ["run", "recall (trained / held out)", "traced", "p clean", "p corrupted",
              "total effect", "MLP peak AIE, last subject", "attention peak AIE, last subject",
              "residual peak AIE, last subject"]
    rows = []
    for name, r in tracing["runs"].items():
        rows.append([name, f"{_pct(r['recall_trained'])} / {_pct(r['recall_heldout'])}",
                     str(len(r["traced"])), _pct(r["clean"]), _pct(r["corrupted"]),
                     _pct(r["total_effect"]), _pct(peak(r, "mlp")), _pct(peak(r, "attn")),
                     _pct(peak(r, "resid"))])
    rows.append(["ROME, GPT-2 XL", "known facts", "1000", "—", "—", _pct(ROME["total"]),
                 _pct(ROME["mlp_last_subject"]), _pct(ROME["attn_last_subject"]), "—"])
    return header, rows


def mean_aie(tracing: dict[str, Any], kind: str) -> list[list[float | None]]:
    """(n_layer, position kinds): kind's average indirect effect, mean over the seeds
    (None where no seed has that position kind)."""
    n_layer = tracing["model"]["n_layer"]
    out = []
    for layer in range(n_layer):
        row = []
        for where in POSITION_KINDS:
            values = [r["aie"][kind][where][layer] for r in tracing["runs"].values()
                      if r["aie"] and r["aie"][kind][where] is not None]
            row.append(mean(values) if values else None)
        out.append(row)
    return out


def layers_table(tracing: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per layer and kind: the average indirect effect per position kind, the seeds'
    mean ± half their range."""
    header = ["layer", "restored"] + list(POSITION_KINDS)
    rows = []
    for layer in range(tracing["model"]["n_layer"]):
        for kind in TRACE_KINDS:
            cells = []
            for where in POSITION_KINDS:
                values = [r["aie"][kind][where][layer] if r["aie"] and r["aie"][kind][where]
                          else None for r in tracing["runs"].values()]
                cells.append(mean_range(values, 1, percent=True))
            rows.append([str(layer), kind, *cells])
    return header, rows


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    tracing = results["tracing"]
    return [("facts: recall and causal tracing per seed (p = probability of the attribute):",
             runs_table(tracing)),
            ("facts: average indirect effect per layer and position, seeds' mean ± half "
             "their range:", layers_table(tracing))]


def figure(results: dict[str, Any]) -> Any:
    """ROME's heatmaps: layer x position kind, the average indirect effect of restoring the
    residual stream, the MLP and attention, mean over the seeds."""
    tracing = results["tracing"]
    grids = {}
    for kind, label in (("resid", "residual stream"), ("mlp", "MLP output"),
                        ("attn", "attention output")):
        values = [[float("nan") if v is None else v for v in row]
                  for row in mean_aie(tracing, kind)]
        grids[label] = torch.tensor(values).nan_to_num(0.0)
    return patch_grids(grids, {label: POSITION_KINDS for label in grids},
                       title=f"average indirect effect on p(attribute), "
                             f"{len(tracing['runs'])} seeds (ROME's causal tracing)")


def section(results: dict[str, Any]) -> str:
    """report.md's facts section: setup, the tables, the figure."""
    t = results["tracing"]
    m = t["model"]
    setup = (f"A model of {m['n_layer']} layers x {m['n_head']} heads, width {m['n_embd']}, "
             f"per seed ({len(t['runs'])} seeds), trained {t['steps']} steps of batch "
             f"{t['batch_size']} on {t['entities']} invented people x {t['relations']} "
             f"relations (gptlab.data.facts, seed {t['corpus_seed']}), character-level. "
             f"Up to {t['prompts']} {'recalled ' if t['recalled_only'] else ''}facts per "
             f"seed traced (trained phrasing), {t['samples']} noise draws "
             f"each of {t['noise_scale']:g} x the subject embeddings' std; one layer restored "
             f"at a time (ROME restores a window of 10 of GPT-2 XL's 48 for MLP and "
             f"attention). \"resid\" is the stream a block reads (layer 0: the embeddings).")
    parts = [setup]
    for title, (header, rows) in tables(results):
        parts.append(f"{title}\n\n{markdown_table(header, rows)}")
    parts.append(f"![tracing]({FIGURE})")
    return "\n\n".join(parts)
