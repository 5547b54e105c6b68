"""`gptlab experiment memory`: the feed-forward network as key-value memories, measured the
way Geva et al. 2021 ("Transformer Feed-Forward Layers Are Key-Value Memories") did, on a
trained model (the shipped one by default; `--model` any run or model directory).

The held-out text is the validation split of the data (the embedded corpus by default),
decoded and re-encoded with the model's own tokenizer. Its first `samples` slices of
`chars` characters, disjoint, are read one at a time through gptlab.interp.memory: each
slice is one "seed" of the claims, so a verdict's spread is the text-to-text spread of the
same model's numbers (one model, no training seeds; disjoint texts are what varies).

Per slice and layer, over every FFN unit (the default size) or a seeded sample of them
(--quick): the pattern score of each unit's top-25 trigger prefixes against random
prefixes of the same slice, the drop of its activation when the trigger's last token is
removed, its value's top token through the final norm's gain and the unembedding against
the token after its top trigger (agreement, against 1/vocab and a shuffled pairing), and
composition: the share of positions whose FFN-output top token is that of none of the
1, 5 or 10 units with the largest coefficients there. The key and value conventions
(SwiGLU's gate, the gain) are gptlab.interp.memory's.

The facts: small models trained (a few seeds, ordinary runs under OUT/runs) on
gptlab.data.facts' invented people until they recall them, then traced as Meng et al. 2022
did (gptlab.experiments.tracing): its numbers are results.json's "tracing", its claims
judged beside Geva et al.'s. The only part that trains; --steps sets its length.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import UsageError
from gptlab.experiments import report, tracing
from gptlab.experiments.baselines import text_baselines
from gptlab.experiments.claims import Claim, Measured, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import choose_size, open_experiment
from gptlab.experiments.units import mean, mean_range, per_slice
from gptlab.interp.heads import per_token_loss
from gptlab.interp.memory import (
    TOP_K,
    capture_ffn,
    composition_share,
    output_gain,
    random_pattern_score,
    sample_units,
    shuffled_agreement,
    unit_record,
)
from gptlab.loading import load
from gptlab.plots.experiments import line_panels

NAME = "memory"
MODEL = "shakespeare"  # the shipped model (gptlab.pretrained)
FIGURE = "memory.png"
FIGURES = (FIGURE, tracing.FIGURE)
TITLE = "The FFN as key-value memories"
# Composition against the 1, 5 and 10 strongest units at each position. The claim uses
# ONE: "the layer's output is no single memory's" is tested most directly against the
# memory with the largest coefficient (the one that would dominate were the output a single
# memory's); with more units a character vocabulary (tens of tokens) makes a match likely
# by chance alone, so those are reported beside it, not judged.
COMPOSITION_UNITS = (1, 5, 10)
CLAIM_UNITS = 1
# Geva et al.'s upper layers: 11-16 of 16 (their value agreement rises there); the same
# share of the model's layers, counted from the top (at least one).
UPPER_SHARE = 6 / 16
# The bigram baseline is counted over the first characters of the training split, in the
# model's own tokens: a million gives a character vocabulary's table its counts many times
# over, and keeps a subword tokenizer's encoding to seconds.
BASELINE_CHARS = 1_000_000


@dataclass(frozen=True)
class Size:
    """How much is measured: slices of the held-out text and the units per layer."""

    name: str
    chars: int  # characters per slice
    samples: int  # disjoint slices: the units of the claims' spread
    per_layer: int | None  # units per layer (None: all of them)
    draws: int  # random prefix sets for the pattern baseline
    kept: int  # per-unit records kept per layer in results.json (of the first slice)


SIZES = {
    # Every unit, three slices of 10,000 characters (the numbers of docs/interp.md's first).
    "default": Size("default", chars=10_000, samples=3, per_layer=None, draws=100, kept=4),
    # For the test suite: seconds, same code paths.
    "quick": Size("quick", chars=300, samples=3, per_layer=3, draws=5, kept=2),
}


def run_memory(out: str | Path, data: str | Path | None = None, quick: bool = False,
               seed: int = 1337, steps: int | None = None, progress: bool = False,
               model: str | Path = MODEL,
               log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure `model`'s FFN memories over held-out text into `out`, and trace facts in
    small models trained there (gptlab.experiments.tracing): results.json, report.md and
    the figures; returns the results. data: a prepared data directory whose validation
    split is read (default: the embedded Shakespeare, prepared into OUT/data). seed: the
    units sampled (--quick), the random prefixes and the first facts model's seed (and
    its noise); steps: the facts models' training steps."""
    size = choose_size(SIZES, quick)
    facts_size = choose_size(tracing.SIZES, quick, steps=steps)
    timer = report.Timer()
    folder, data_dir = open_experiment(out, NAME, data, log)
    gpt, tokenizer = load(model)
    slices = held_out_slices(data_dir, tokenizer, size)
    baselines = text_baselines(training_ids(data_dir, tokenizer), gpt.config.vocab_size)
    t0 = time.perf_counter()
    samples = []
    for index, ids in enumerate(slices):
        samples.append(measure_slice(gpt, ids, tokenizer.decode, size, seed, index))
        log(f"slice {index}: {len(ids):,} tokens, "
            f"{len(samples[-1]['records'])} units measured")
    timer.add("measure_s", time.perf_counter() - t0)
    t0 = time.perf_counter()
    traced, facts_records = tracing.run_tracing(folder, facts_size, seed, progress, log)
    trained = sum(r.train_s for r in facts_records.values() if not r.reused)
    timer.add("train_s", trained)
    timer.add("tracing_s", time.perf_counter() - t0 - trained)
    kept = kept_records(samples[0]["records"], size.kept)
    for sample in samples:
        del sample["records"]
    config = gpt.config
    results = {
        # the model and the data by name: where they were on this machine says nothing
        "experiment": NAME, "size": size.name, "model": Path(str(model)).name,
        "data": Path(data_dir).name, "baselines": baselines,
        "architecture": {"n_layer": config.n_layer, "ffn_hidden": config.ffn_hidden,
                         "n_embd": config.n_embd, "mlp": config.mlp,
                         "vocab_size": config.vocab_size},
        "gain": output_gain(gpt)[1], "chance": 1 / config.vocab_size,
        "top_k": TOP_K, "chars": size.chars, "per_layer": size.per_layer or config.ffn_hidden,
        "draws": size.draws, "seed": seed, "composition_units": list(COMPOSITION_UNITS),
        "claim_units": CLAIM_UNITS, "upper_layers": upper_layers(config.n_layer),
        "samples": samples, "records": kept, "tracing": traced,
    }
    figure(results).save(folder / FIGURE)
    tracing.figure(results).save(folder / tracing.FIGURE)
    return report.finish(folder, results, facts_records, timer, TITLE, sections, CLAIMS)


def held_out_slices(data_dir: Path, tokenizer: Any, size: Size) -> list[torch.Tensor]:
    """The first size.samples slices of size.chars characters of the validation split, as
    the model's token ids; a UsageError where the split is too short or holds characters
    the model's tokenizer lacks."""
    data = load_data(data_dir)
    text = load_tokenizer(data.tokenizer_path).decode(data.val[: size.chars * size.samples]
                                                      .tolist())
    if len(text) < size.chars * size.samples:
        raise UsageError(f"{data_dir}'s validation split is too short: the memory experiment "
                         f"reads {size.samples} slices of {size.chars:,} characters")
    out = []
    for i in range(size.samples):
        try:
            ids = tokenizer.encode(text[i * size.chars:(i + 1) * size.chars])
        except UsageError as exc:
            raise UsageError(f"--data's text does not fit --model's tokenizer: {exc}") from None
        out.append(torch.as_tensor(ids, dtype=torch.long))
    return out


def training_ids(data_dir: Path, tokenizer: Any) -> Any:
    """The first BASELINE_CHARS characters of the data's training split in the model's
    tokens (numpy ids): what the bigram baseline is counted over."""
    data = load_data(data_dir)
    text = load_tokenizer(data.tokenizer_path).decode(data.train[:BASELINE_CHARS].tolist())
    try:
        return tokenizer.encode(text[:BASELINE_CHARS])
    except UsageError as exc:
        raise UsageError(f"--data's text does not fit --model's tokenizer: {exc}") from None


def text_loss(model: Any, ids: torch.Tensor) -> float:
    """The model's mean next-token loss over ids (N,), nats/token, read in windows of its
    block_size that overlap by one token (each token predicted once, from the start of
    its window)."""
    block = model.config.block_size
    total, count = 0.0, 0
    for start in range(0, len(ids) - 1, block - 1):
        window = ids[start:start + block]
        if len(window) < 2:
            break
        losses = per_token_loss(model, window[None])
        total, count = total + float(losses.sum()), count + losses.numel()
    return total / count


def measure_slice(model: Any, ids: torch.Tensor, decode: Callable[..., str], size: Size,
                  seed: int, index: int) -> dict[str, Any]:
    """One slice's per-layer measures (gptlab.interp.memory) and every measured unit's
    record."""
    capture = capture_ffn(model, ids)
    n_layer, hidden = model.config.n_layer, model.config.ffn_hidden
    chosen = sample_units(model, size.per_layer or hidden, seed)
    records = [unit_record(model, capture, decode, layer, int(unit))
               for layer, units in enumerate(chosen) for unit in units]
    layers = []
    for layer in range(n_layer):
        mine = [r for r in records if r["layer"] == layer]
        drops = [r["drop"] for r in mine if r["drop"] is not None]
        layers.append({
            "layer": layer,
            "pattern": mean([r["pattern"] for r in mine]),
            "drop": mean(drops) if drops else None,
            "agreement": mean([float(r["value_top_token"]["id"] == r["next_token"]["id"])
                               for r in mine]),
            "agreement_shuffled": shuffled_agreement(mine),
            "composition": {str(n): composition_share(model, capture, layer, n)
                            for n in COMPOSITION_UNITS},
        })
    return {"sample": index, "tokens": len(ids), "loss": text_loss(model, ids), "layers": layers,
            "records": records,
            "random_pattern": random_pattern_score(capture, decode, TOP_K, draws=size.draws,
                                                   seed=seed)}


def kept_records(records: list[dict[str, Any]], per_layer: int) -> list[dict[str, Any]]:
    """The first per_layer records of each layer (units in ascending order), without the
    per-unit pattern and drop (the layer means carry them): {layer, unit, top_trigger,
    next_token, value_top_token, activation}."""
    fields = ("layer", "unit", "top_trigger", "next_token", "value_top_token", "activation")
    out: list[dict[str, Any]] = []
    for layer in sorted({r["layer"] for r in records}):
        mine = [r for r in records if r["layer"] == layer][:per_layer]
        out += [{k: r[k] for k in fields} for r in mine]
    return out


def upper_layers(n_layer: int) -> list[int]:
    """The top UPPER_SHARE of the layers (at least one)."""
    count = max(1, round(n_layer * UPPER_SHARE))
    return list(range(n_layer - count, n_layer))


# ----------------------------------------------------------------------------- claims


def _pattern_gap(sample: dict[str, Any]) -> float:
    return mean([r["pattern"] for r in sample["layers"]]) - sample["random_pattern"]


def _drop(sample: dict[str, Any]) -> float:
    drops = [r["drop"] for r in sample["layers"] if r["drop"] is not None]
    return mean(drops) if drops else float("nan")


def _upper_agreement(results: dict[str, Any]) -> Measured:
    """Per slice, agreement in the upper layers minus the larger of chance (1/vocab) and
    the shuffled pairing (a character vocabulary's frequent tokens make the shuffled one
    the higher)."""
    def gap(sample: dict[str, Any]) -> float:
        rows = [sample["layers"][i] for i in results["upper_layers"]]
        return mean([r["agreement"] - max(results["chance"], r["agreement_shuffled"] or 0.0)
                     for r in rows])
    return per_slice(results, gap, lambda s: f"{100 * gap(s):+.1f} pts")


def _composition(sample: dict[str, Any]) -> float:
    return mean([r["composition"][str(CLAIM_UNITS)] for r in sample["layers"]])


# Geva et al.: at least 68% of examples, in every layer, predict no single memory's token.
COMPOSED = 0.68
# "Recognisable pattern": one more of the top-25 prefixes sharing an ending than random
# prefixes do (1/25) is the smallest difference the score can show.
PATTERN_SMALLEST = 1 / TOP_K
# Geva et al.'s smallest drop when the trigger's last token is removed: 10%.
DROP_SMALLEST = 0.10
# Memories are read only in a model that reads its context: a loss on every slice under
# the bigram table's (which the current token's embedding alone gets), so that its keys
# have learned patterns to be triggered by.
READ_TEXT = Precondition(
    "the model reads its text's context", "highest loss over the slices",
    lambda r: max(s["loss"] for s in r["samples"]), lambda r: r["baselines"]["bigram"],
    below=True, why="a bigram table's loss")

CLAIMS = (
    Claim("pattern",
          "a key's top triggers share a recognisable pattern",
          "65-80% of each key's top-25 trigger prefixes share a pattern (human annotation, "
          "160 keys; Geva et al.)",
          "mean pattern score of the units' top-25 prefixes (share with the most common last "
          "3 characters or last word) minus that of random prefixes of the same text",
          lambda r: per_slice(r, _pattern_gap, lambda s: f"{_pattern_gap(s):+.3f}"),
          direction=1, smallest=PATTERN_SMALLEST, precondition=READ_TEXT),
    Claim("drop",
          "removing the trigger's last token lowers the key's activation",
          "by 10-70% (Geva et al.)",
          "mean relative drop of a unit's activation on its top-25 triggers without their "
          "last token, over all layers",
          lambda r: per_slice(r, _drop, lambda s: f"{100 * _drop(s):.0f}%"),
          direction=1, smallest=DROP_SMALLEST, precondition=READ_TEXT),
    Claim("agreement",
          "in upper layers a value's top token agrees with the next token after its key's "
          "trigger above chance",
          "about 0% in layers 1-10, up to 3.5% in 11-16, against 0.0004% random (Geva et "
          "al.)",
          "value agreement in the top 6/16 of the layers minus the larger of 1/vocab and a "
          "shuffled pairing of the same units",
          _upper_agreement,
          direction=1, smallest=0.0, precondition=READ_TEXT),
    Claim("composition",
          "a layer's output is usually a composition of memories",
          "in at least 68% of examples the layer's top prediction is no single memory's "
          "(Geva et al.)",
          f"share of positions whose FFN-output top token is not the value top token of the "
          f"unit with the largest coefficient, mean over layers, minus {COMPOSED:g}",
          lambda r: per_slice(r, lambda s: _composition(s) - COMPOSED,
                              lambda s: f"{100 * _composition(s):.0f}%"),
          direction=1, smallest=0.0, precondition=READ_TEXT),
    *tracing.CLAIMS,
)


# ----------------------------------------------------------------------------- writing


def layers_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per layer: each measure's mean over the text slices ± half their range."""
    samples = results["samples"]
    units = results["composition_units"]
    header = ["layer", "pattern score", "activation drop", "value agreement",
              "shuffled agreement"] + [f"none of top {n}" for n in units]
    body = []
    for layer in range(results["architecture"]["n_layer"]):
        rows = [s["layers"][layer] for s in samples]
        body.append([str(layer), mean_range([r["pattern"] for r in rows]),
                     mean_range([r["drop"] for r in rows]),
                     mean_range([r["agreement"] for r in rows], 1, percent=True),
                     mean_range([r["agreement_shuffled"] for r in rows], 1, percent=True)]
                    + [mean_range([r["composition"][str(n)] for r in rows], 1, percent=True)
                       for n in units])
    return header, body


def records_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The kept per-unit records: the end of the top trigger, the token after it, the
    value's top token, the activation."""
    header = ["layer", "unit", "top trigger (end)", "next", "value top", "activation"]
    body = [[str(r["layer"]), str(r["unit"]), repr(r["top_trigger"]["text"][-20:]),
             repr(r["next_token"]["text"]), repr(r["value_top_token"]["text"]),
             f"{r['activation']:.3f}"] for r in results["records"]]
    return header, body


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows."""
    return [("per layer, mean over the text slices ± half their range:", layers_table(results)),
            ("sampled units (first slice):", records_table(results)),
            *tracing.tables(results)]


def notes(results: dict[str, Any]) -> list[str]:
    """What the command prints after the tables."""
    randoms = [s["random_pattern"] for s in results["samples"]]
    return [f"random prefixes' pattern score: {mean_range(randoms)}; chance agreement 1/vocab "
            f"{100 * results['chance']:.1f}%"]


def figure(results: dict[str, Any]) -> Any:
    layers = range(results["architecture"]["n_layer"])
    samples = results["samples"]

    def over(value: Callable[[dict[str, Any]], float | None]) -> list[tuple[int, float | None]]:
        return [(i, mean([value(s["layers"][i]) for s in samples])) for i in layers]

    random_pattern = mean([s["random_pattern"] for s in samples])
    composition = {f"none of top {n}": over(lambda r, n=n: r["composition"][str(n)])
                   for n in results["composition_units"]}
    composition["Geva et al.'s floor (68%)"] = [(i, COMPOSED) for i in layers]
    return line_panels([
        {"title": "key patterns", "xlabel": "layer", "ylabel": "pattern score (top-25)",
         "lines": {"top-25 triggers": over(lambda r: r["pattern"]),
                   "random prefixes": [(i, random_pattern) for i in layers]}},
        {"title": "value agreement", "xlabel": "layer", "ylabel": "share of units",
         "lines": {"value top = next token": over(lambda r: r["agreement"]),
                   "shuffled": over(lambda r: r["agreement_shuffled"]),
                   "1/vocab": [(i, results["chance"]) for i in layers]}},
        {"title": "composition", "xlabel": "layer", "ylabel": "share of positions",
         "lines": composition},
    ], title=f"{results['model']}: FFN memories, means over {len(samples)} text slices of "
             f"{results['chars']:,} characters")


def sections(results: dict[str, Any]) -> list[tuple[str, str]]:
    a = results["architecture"]
    setup = (
        f"Size `{results['size']}`: the model `{results['model']}` ({a['n_layer']} layers, "
        f"{a['ffn_hidden']} FFN units each, `{a['mlp']}`, vocabulary {a['vocab_size']}), "
        f"nothing trained for this part. Held-out text: {len(results['samples'])} disjoint "
        f"slices of {results['chars']:,} characters from the start of the validation split of "
        f"`{results['data']}`; each slice is one unit of the claims' spread (not a seed). "
        f"{results['per_layer']} units per layer (seed {results['seed']} where sampled); "
        f"top-{results['top_k']} triggers; the random-prefix baseline over "
        f"{results['draws']} draws. Values go through the final norm's gain "
        f"({results['gain']}) and the unembedding. Upper layers (agreement claim): "
        f"{', '.join(map(str, results['upper_layers']))}. Composition is judged against the "
        f"unit with the largest coefficient (top {results['claim_units']}); the 5 and 10 "
        f"strongest are shown beside it.")
    return [("Setup", setup),
            ("Per layer", report.markdown_table(*layers_table(results)) + "\n\n"
             + notes(results)[0]),
            ("Sampled units", report.markdown_table(*records_table(results))),
            ("Figure", f"![memory]({FIGURE})"),
            ("Facts: causal tracing", tracing.section(results)),
            ("Time", report.timing_line(results["timing"], results["machine"]))]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("slices", "seeds"), run=run_memory, tables=tables,
                        notes=notes, claims=CLAIMS)
