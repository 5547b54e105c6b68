"""`gptlab experiment features`: the FFN read through sparse dictionaries instead of its
neurons, on a trained model (the shipped one by default; `--model` any run or model
directory): a sparse autoencoder on one layer's FFN output (Bricken et al. 2023, "Towards
Monosemanticity"; Cunningham et al. 2023) and a transcoder from that FFN's input to its
output (Dunefsky et al. 2024), both TopK (Gao et al. 2024) with the same number of
features and the same L0, trained on the training split's activations
(gptlab.interp.sae), then measured on held-out text against the FFN's own neurons.

The held-out text is read as `experiment memory` reads it: the first `samples` disjoint
slices of `chars` characters of the validation split, re-encoded with the model's
tokenizer, each slice a unit of the claims' spread (one model and one dictionary of each
kind: what varies is the text). Per slice:

- the dictionaries' measures under SAELens' names (gptlab.interp.sae.metrics): L0,
  explained variance, CE loss with the dictionary spliced in, zero-ablated and clean,
  their CE loss score, dead and dense features, the density histogram;
- sparsity against the neurons: the number of neurons per token (the largest terms
  m_i W_out[:, i]) whose sum explains as much of the FFN output's variance as the
  autoencoder does at its L0 (gptlab.interp.sae.neurons);
- the pattern rule of `experiment memory` (the share of a unit's top-25 contexts that end
  alike: their last 3 characters or last word) for every feature and every neuron: the
  share of units whose top-25 has a single pattern (a score of at least 0.5).

Claims that read the dictionaries' features carry a precondition
(gptlab.experiments.claims.Precondition): the dictionary learned (explained variance at
least EV_LEARNED on every slice), or, for the loss recovered, the FFN is worth some loss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import UsageError
from gptlab.experiments import report
from gptlab.experiments.claims import Claim, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import choose_size, open_experiment
from gptlab.experiments.memory import held_out_slices
from gptlab.experiments.units import mean, mean_range, per_slice
from gptlab.interp.memory import output_gain
from gptlab.interp.sae import features, metrics, neurons
from gptlab.interp.sae.config import SAEConfig, TrainSettings
from gptlab.interp.sae.training import train_sae
from gptlab.loading import load
from gptlab.plots.experiments import line_panels

NAME = "features"
MODEL = "shakespeare"  # the shipped model (gptlab.pretrained)
FIGURE = "features.png"
FIGURES = (FIGURE,)
TITLE = "Features, not neurons: sparse dictionaries on the FFN"
DICTIONARIES = ("sae", "transcoder")  # OUT/sae and OUT/transcoder, SAELens' layout
SITES = {"sae": "mlp_out", "transcoder": "transcoder"}
NEURON_CURVE = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # neurons per token drawn in the figure


@dataclass(frozen=True)
class Size:
    """The dictionaries and the text they are measured on."""

    name: str
    layer: int | None  # the FFN read (None: the middle one, n_layer // 2)
    d_sae: int  # features per dictionary
    k: int  # TopK's features per token (the L0)
    training_tokens: int
    batch_tokens: int
    lr: float
    chars: int  # characters per held-out slice
    samples: int  # disjoint slices: the claims' units
    kept: int  # feature records kept in results.json (of the first slice)


SIZES = {
    # 1,536 features (2x the shipped model's 768 neurons, 8x its width of 192, Bricken et
    # al.'s 8x the MLP's), 16 per token, on ~0.8M training tokens; three 10,000-character
    # slices, as `experiment memory` reads.
    "default": Size("default", layer=None, d_sae=1536, k=16, training_tokens=800_000,
                    batch_tokens=2048, lr=4e-3, chars=10_000, samples=3, kept=12),
    # For the test suite: seconds, same code paths.
    "quick": Size("quick", layer=None, d_sae=128, k=8, training_tokens=8192,
                  batch_tokens=1024, lr=4e-3, chars=400, samples=3, kept=4),
}

# The dictionary "learned" when it explains at least this share of its site's variance on
# every slice: below it there are no features worth reading (the papers' dictionaries
# explain 0.93 (GPT-2 small, 128k features) and more).
EV_LEARNED = 0.7
# CE loss recovered claimed: the papers' small-model figures, GPT-2 small's 128k SAE 0.993
# and Gemma-2b's 99.1%, rounded down.
CE_CLAIMED = 0.99
# The site must be worth some loss for "recovered" to mean anything: zero-ablating it must
# raise the loss by this much (nats per token) on every slice.
WORTH_SMALLEST = 0.02
# "Matches": a transcoder within this much CE loss score of the SAE counts as matching it.
MATCH = 0.01
# Dead features: Gemma-2b's 16k SAE has ~2.5k (15%) dead, Bricken et al.'s 4,096 168 (4%).
DEAD_CLAIMED = 0.15
SPARSER_SMALLEST = math.log2(1.25)  # a quarter more neurons than features, at least
PATTERN_SMALLEST = 0.05  # five points more of the units with a single pattern


def run_features(out: str | Path, data: str | Path | None = None, quick: bool = False,
                 seed: int = 1337, steps: int | None = None, progress: bool = False,
                 model: str | Path = MODEL,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train the two dictionaries on `model`'s FFN and measure them into `out`:
    results.json, report.md, the figure, and the dictionaries in OUT/sae and
    OUT/transcoder. data: a prepared data directory (default: the embedded Shakespeare);
    seed: the dictionaries' initialisation and batches; steps: their training steps."""
    size = choose_size(SIZES, quick)
    timer = report.Timer()
    folder, data_dir = open_experiment(out, NAME, data, log)
    gpt, tokenizer = load(model)
    config = gpt.config
    layer = size.layer if size.layer is not None else config.n_layer // 2
    train_ids = split_ids(data_dir, tokenizer, "train")
    slices = held_out_slices(data_dir, tokenizer, size)
    tokens = size.training_tokens if steps is None else steps * size.batch_tokens
    settings = TrainSettings(training_tokens=tokens, train_batch_size_tokens=size.batch_tokens,
                             lr=size.lr, seed=seed)
    trained = {}
    for name in DICTIONARIES:
        sae_config = SAEConfig(d_in=config.n_embd, d_sae=size.d_sae, site=SITES[name],
                               layer=layer, k=size.k, model_name=str(model))
        t0 = time.perf_counter()
        trained[name] = train_sae(gpt, train_ids, sae_config, settings, folder / name,
                                  progress, log)
        timer.add("train_s", time.perf_counter() - t0)
        log(f"{name}: {'reused, ' if trained[name].reused else ''}trained on "
            f"{trained[name].tokens:,} tokens")
    t0 = time.perf_counter()
    samples = [measure_slice(gpt, trained, ids, tokenizer.decode, layer, index,
                             size.kept if index == 0 else 0, seed)
               for index, ids in enumerate(slices)]
    timer.add("measure_s", time.perf_counter() - t0)
    kept = samples[0].pop("records")
    for sample in samples[1:]:
        del sample["records"]
    results = {
        "experiment": NAME, "size": size.name, "model": str(model), "data": str(data_dir),
        "architecture": {"n_layer": config.n_layer, "ffn_hidden": config.ffn_hidden,
                         "n_embd": config.n_embd, "mlp": config.mlp,
                         "vocab_size": config.vocab_size},
        "layer": layer, "d_sae": size.d_sae, "k": size.k, "activation": "topk",
        "training": {name: {"tokens": t.tokens, "seconds": round(t.seconds, 1),
                            "reused": t.reused, "final": t.history[-1] if t.history else None}
                     for name, t in trained.items()},
        "settings": settings.to_dict(), "gain": output_gain(gpt)[1], "chars": size.chars,
        "top_k": features.TOP_K, "single_pattern": features.SINGLE_PATTERN, "seed": seed,
        "samples": samples, "records": kept,
    }
    figure(results).save(folder / FIGURE)
    # the dictionaries are not a grid's runs: their training time is their own records'
    trained_s = sum(t["seconds"] for t in results["training"].values() if not t["reused"])
    return report.finish(folder, results, {}, timer, TITLE, sections, CLAIMS,
                         training_s=trained_s)


def split_ids(data_dir: Path, tokenizer: Any, split: str) -> np.ndarray:
    """A split of the data as the model's token ids (decoded and re-encoded, as
    held_out_slices does: the data's tokenizer need not be the model's)."""
    data = load_data(data_dir)
    text = load_tokenizer(data.tokenizer_path).decode(getattr(data, split).tolist())
    try:
        return np.asarray(tokenizer.encode(text), dtype=np.int64)
    except UsageError as exc:
        raise UsageError(f"--data's text does not fit --model's tokenizer: {exc}") from None


def measure_slice(model: Any, trained: dict[str, Any], ids: torch.Tensor,
                  decode: Callable[..., str], layer: int, index: int, keep: int = 0,
                  seed: int = 0) -> dict[str, Any]:
    """One slice: each dictionary's measures, the neuron comparison and the pattern
    shares, and `keep` features' records (`choose_features`)."""
    sae = trained["sae"].sae
    measured = {}
    for name, t in trained.items():
        m = metrics.evaluate(model, t.sae, ids)
        del m["feature_density"]
        measured[name] = {k: metrics.finite(v) if isinstance(v, float) else v
                          for k, v in m.items()}
    capture = features.capture_text(model, ids, "mlp_out", layer, neurons=True)
    acts = sae.encode(capture.x)
    y = capture.y.double()
    variance = float((y - y.mean(0)).pow(2).sum(-1).mean())
    ev = 1 - float((y - sae(capture.x).double()).pow(2).sum(-1).mean()) / variance
    l0 = float((acts > 0).sum(-1).double().mean())
    basis = neurons.NeuronBasis(model, layer, capture.neurons, capture.y)
    needed, reached = basis.needed(ev)
    curve = [(k, basis.explained_variance(k)) for k in NEURON_CURVE if k <= basis.width]
    feature_scores = features.pattern_scores(acts, capture, decode)
    neuron_scores = features.pattern_scores(capture.neurons, capture, decode)
    chosen = choose_features(feature_scores, acts, keep, seed) if keep else []
    records = [features.feature_record(model, sae, capture, acts, f, decode, k=5, tokens=5)
               for f in chosen]
    for record in records:
        score = feature_scores[record["feature"]]
        record["pattern"] = None if score.isnan() else float(score)
    return {
        "sample": index, "tokens": len(ids), **measured,
        "neurons": {"explained_variance_sae": ev, "l0_sae": l0, "needed": needed,
                    "explained_variance_needed": reached,
                    "nonzero": float((capture.neurons != 0).sum(-1).double().mean()),
                    "curve": curve},
        "patterns": {
            "features": _pattern_summary(feature_scores),
            "neurons": _pattern_summary(neuron_scores),
        },
        "records": records,
    }


def _pattern_summary(scores: torch.Tensor) -> dict[str, Any]:
    have = scores[~scores.isnan()]
    return {"units": int(len(scores)), "scored": int(len(have)),
            "single_share": features.single_pattern_share(scores),
            "mean": float(have.mean()) if len(have) else None,
            "at_least": [(t, float((have >= t).double().mean()) if len(have) else None)
                         for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]}


def choose_features(scores: torch.Tensor, acts: torch.Tensor, count: int,
                    seed: int) -> list[int]:
    """`count` features to keep records of: half with the highest pattern scores, half
    drawn at random (seeded) from the other features that fire, in ascending order."""
    scored = [int(f) for f in (~scores.isnan()).nonzero()[:, 0]]
    best = sorted(scored, key=lambda f: (-float(scores[f]), f))[: count // 2]
    rest = [int(f) for f in (acts > 0).any(0).nonzero()[:, 0] if int(f) not in best]
    generator = torch.Generator().manual_seed(seed)
    drawn = [rest[int(i)] for i in torch.randperm(len(rest), generator=generator)
             [: count - len(best)]]
    return sorted(best + drawn)


# ----------------------------------------------------------------------------- claims


def _sparser(sample: dict[str, Any]) -> float:
    n = sample["neurons"]
    return math.log2(n["needed"] / n["l0_sae"])


def _pattern_gap(sample: dict[str, Any]) -> float | None:
    f = sample["patterns"]["features"]["single_share"]
    n = sample["patterns"]["neurons"]["single_share"]
    return None if f is None or n is None else f - n


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _dead_share(sample: dict[str, Any]) -> float:
    return sample["sae"]["dead_features"] / len_features(sample)


def len_features(sample: dict[str, Any]) -> int:
    return sample["sae"]["alive_features"] + sample["sae"]["dead_features"]


def _worst(results: dict[str, Any], value: Callable[[dict[str, Any]], float | None]
           ) -> float | None:
    values = [value(s) for s in results["samples"]]
    return None if any(v is None for v in values) else min(values)


SAE_LEARNED = Precondition(
    "the autoencoder learned", "its explained variance on the worst slice",
    lambda r: _worst(r, lambda s: s["sae"]["explained_variance"]), lambda r: EV_LEARNED,
    why="below it there are no features to read; the papers' explain 0.93 and more")
BOTH_LEARNED = Precondition(
    "both dictionaries learned", "the lower explained variance on the worst slice",
    lambda r: _worst(r, lambda s: min(s["sae"]["explained_variance"],
                                      s["transcoder"]["explained_variance"])),
    lambda r: EV_LEARNED,
    why="below it there are no features to read; the papers' explain 0.93 and more")
SITE_WORTH = Precondition(
    "zero-ablating the FFN costs loss", "the ablated minus the clean loss on the worst "
    "slice, nats/token", lambda r: _worst(r, lambda s: s["sae"]["ce_loss_with_ablation"]
                                          - s["sae"]["ce_loss_without_sae"]),
    lambda r: WORTH_SMALLEST, why="else there is no loss to recover")


CLAIMS = (
    Claim("sparser",
          "the FFN's output is sparser in features than in neurons: fewer features than "
          "neurons per token explain the same share of its variance",
          "neurons are dense (GELU is zero only where it underflows); GPT-2 small's 128k "
          "SAE: "
          "L0 32 at explained variance 0.929; Gemma-2b's: L0 54 (Bricken et al.; SAELens)",
          "log2 of (the neurons per token, largest terms first, that explain as much "
          "variance as the autoencoder / the autoencoder's L0), on the same positions",
          lambda r: per_slice(r, _sparser, lambda s: (
              f"{s['neurons']['needed']} neurons vs L0 {s['neurons']['l0_sae']:.0f} at "
              f"EV {s['neurons']['explained_variance_sae']:.3f}")),
          direction=1, smallest=SPARSER_SMALLEST, precondition=SAE_LEARNED),
    Claim("monosemantic",
          "features are more often single-pattern than neurons",
          "most features are interpretable and monosemantic, neurons mostly polysemantic "
          "(Bricken et al.: human and automated interpretability scores)",
          "the share of features with a single-pattern top-25 (memory's rule: >= 50% end "
          "alike) minus the neurons' share",
          lambda r: per_slice(r, _pattern_gap, lambda s: (
              f"{_share(s['patterns']['features']['single_share'])} of features vs "
              f"{_share(s['patterns']['neurons']['single_share'])} of neurons")),
          direction=1, smallest=PATTERN_SMALLEST, precondition=SAE_LEARNED),
    Claim("recovered",
          f"splicing the autoencoder in recovers at least {100 * CE_CLAIMED:g}% of the "
          f"loss the FFN is worth",
          "CE loss score 0.993 (GPT-2 small, 128k SAE); 99.1% (Gemma-2b, 16k SAE)",
          f"CE loss score ((ablated - spliced) / (ablated - clean)) minus {CE_CLAIMED:g}",
          lambda r: per_slice(r, lambda s: s["sae"]["ce_loss_score"] - CE_CLAIMED,
                              lambda s: f"{s['sae']['ce_loss_score']:.3f}"),
          direction=1, smallest=0.0, precondition=SITE_WORTH),
    Claim("transcoder",
          "a transcoder (the FFN's input to its output) recovers as much loss as an "
          "autoencoder of its output at the same L0",
          "transcoders match SAEs in sparsity and fidelity at 120M-1.4B parameters "
          "(Dunefsky et al. 2024)",
          f"the transcoder's CE loss score minus the autoencoder's, plus {MATCH:g} "
          f"(within {MATCH:g} counts as matching)",
          lambda r: per_slice(r, lambda s: (s["transcoder"]["ce_loss_score"]
                                            - s["sae"]["ce_loss_score"] + MATCH),
                              lambda s: (f"{s['transcoder']['ce_loss_score']:.3f} vs "
                                         f"{s['sae']['ce_loss_score']:.3f}")),
          direction=1, smallest=0.0, precondition=BOTH_LEARNED),
    Claim("dead",
          f"few features die: under {100 * DEAD_CLAIMED:g}% never fire",
          "168 of 4,096 dead (4%, Bricken et al.); ~2.5k of 16,384 (15%, Gemma-2b)",
          f"{DEAD_CLAIMED:g} minus the share of the autoencoder's features that never "
          f"fire on the slice",
          lambda r: per_slice(r, lambda s: DEAD_CLAIMED - _dead_share(s),
                              lambda s: f"{_share(_dead_share(s))} dead"),
          direction=1, smallest=0.0, precondition=SAE_LEARNED),
)
# ----------------------------------------------------------------------------- writing


def dictionaries_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per measure, a column per dictionary: the slices' mean ± half their range."""
    samples = results["samples"]
    rows = []
    for key, digits in (("l0", 1), ("explained_variance", 3), ("ce_loss_without_sae", 4),
                        ("ce_loss_with_sae", 4), ("ce_loss_with_ablation", 4),
                        ("ce_loss_score", 3), ("dead_features", 0), ("dense_features", 0)):
        rows.append([key, *[mean_range([s[name][key] for s in samples], digits)
                            for name in DICTIONARIES]])
    return ["measure", *DICTIONARIES], rows


def neurons_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per slice: the autoencoder against the neurons."""
    header = ["slice", "SAE L0", "SAE expl. var.", "neurons for it", "neurons non-zero",
              "single-pattern features", "single-pattern neurons"]
    body = []
    for s in results["samples"]:
        n, p = s["neurons"], s["patterns"]
        body.append([str(s["sample"]), f"{n['l0_sae']:.1f}", f"{n['explained_variance_sae']:.3f}",
                     str(n["needed"]), f"{n['nonzero']:.0f}",
                     f"{_share(p['features']['single_share'])} of {p['features']['scored']}",
                     f"{_share(p['neurons']['single_share'])} of {p['neurons']['scored']}"])
    return header, body


def records_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The kept features: density, the top context's end and the character it fires on,
    the pattern score, the most promoted token."""
    header = ["feature", "density", "top context (end)", "fires on", "pattern", "promotes"]
    body = [[str(r["feature"]), f"{r['density']:.4f}",
             repr(r["contexts"][0]["text"][-24:]) if r["contexts"] else "—",
             repr(r["contexts"][0]["token"]) if r["contexts"] else "—",
             "—" if r["pattern"] is None else f"{r['pattern']:.2f}",
             repr(r["promoted"][0]["text"])] for r in results["records"]]
    return header, body


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows."""
    return [("the dictionaries, mean over the text slices ± half their range:",
             dictionaries_table(results)),
            ("features against neurons, per slice:", neurons_table(results)),
            ("sampled features (first slice):", records_table(results))]


def notes(results: dict[str, Any]) -> list[str]:
    """What the command prints after the tables."""
    return [f"{name}: {t['tokens']:,} training tokens, {t['seconds']:.0f} s"
            + (" (reused)" if t["reused"] else "") for name, t in results["training"].items()]


def figure(results: dict[str, Any]) -> Any:
    samples = results["samples"]

    curve = [(k, mean([dict(s["neurons"]["curve"])[k] for s in samples]))
             for k, _ in samples[0]["neurons"]["curve"]]
    ev = {name: [(mean([s[name]["l0"] for s in samples]),
                  mean([s[name]["explained_variance"] for s in samples]))]
          for name in DICTIONARIES}
    edges = samples[0]["sae"]["density_histogram"]["log10_edges"]
    centres = [(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)]
    density = {name: [(c, mean([s[name]["density_histogram"]["counts"][i] for s in samples]))
                      for i, c in enumerate(centres)] for name in DICTIONARIES}
    patterns = {f"{who}": [(t, mean([dict(s["patterns"][who]["at_least"])[t] or 0.0
                                     for s in samples]))
                           for t, _ in samples[0]["patterns"][who]["at_least"]]
                for who in ("features", "neurons")}
    return line_panels([
        {"title": "sparsity: units per token for the FFN output's variance",
         "xlabel": "active units per token", "ylabel": "explained variance", "log_x": True,
         "lines": {"neurons (largest terms)": curve,
                   **{f"{name} (TopK)": points for name, points in ev.items()}}},
        {"title": "feature density (dead features apart)",
         "xlabel": "log10 share of tokens a feature fires on",
         "ylabel": "features", "lines": density},
        {"title": "the pattern rule (top-25 contexts)", "xlabel": "pattern score at least",
         "ylabel": "share of units", "lines": patterns},
    ], title=f"{results['model']}: layer {results['layer']}'s FFN, {results['d_sae']:,} "
             f"features (k = {results['k']}) against "
             f"{results['architecture']['ffn_hidden']} neurons, means over "
             f"{len(samples)} text slices")


def sections(results: dict[str, Any]) -> list[tuple[str, str]]:
    a, t = results["architecture"], results["settings"]
    setup = (
        f"Size `{results['size']}`: the model `{results['model']}` ({a['n_layer']} layers, "
        f"{a['ffn_hidden']} FFN units each, `{a['mlp']}`, vocabulary {a['vocab_size']}), "
        f"nothing of it trained. Two dictionaries on layer {results['layer']}'s FFN, each "
        f"{results['d_sae']:,} TopK features with k = {results['k']}: an autoencoder of its "
        f"output (`blocks.{results['layer']}.hook_mlp_out`) and a transcoder from its input "
        f"to its output, trained on {t['training_tokens']:,} tokens of the training split "
        f"in batches of {t['train_batch_size_tokens']:,} (Adam, lr {t['lr']:g}, AuxK "
        f"coefficient {t['aux_loss_coefficient']:g}, seed {t['seed']}), saved in SAELens' "
        f"layout in `sae/` and `transcoder/`. Held-out text: {len(results['samples'])} "
        f"disjoint slices of {results['chars']:,} characters from the start of the "
        f"validation split of `{results['data']}`, each a unit of the claims. Logit effects "
        f"through the final norm's gain ({results['gain']}) and the unembedding.")
    return [("Setup", setup),
            ("The dictionaries", report.markdown_table(*dictionaries_table(results))),
            ("Features against neurons", report.markdown_table(*neurons_table(results))),
            ("Sampled features", report.markdown_table(*records_table(results))),
            ("Figure", f"![features]({FIGURE})"),
            ("Time", report.timing_line(results["timing"], results["machine"])
             + "; " + "; ".join(notes(results)[:2]))]


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("slices",), run=run_features, tables=tables, notes=notes,
                        claims=CLAIMS)
