"""The Features view: a model's FFN read through a sparse dictionary (gptlab.interp.sae)
instead of its neurons. The dictionaries it opens are the one gptlab ships (trained by
`gptlab experiment features` on the shipped model, kept beside its results) and those of
any features experiment in the runs folder (its sae/ and transcoder/). For one:

- search: the features that promote a token most (its column of W_U (gain * W_dec), the
  logit effect, computed from weights alone), or that fire most where the reference text
  has the token (their mean activation there);
- a feature: its top contexts in the reference text, the character it fires on last, its
  top promoted and suppressed tokens, its activation histogram, and its activation along a
  typed text.

The reference text is the first REFERENCE_CHARS characters of the embedded Shakespeare's
validation tenth, which neither the shipped model nor its dictionary trained on. The
numbers are gptlab.interp.sae.features' own, as `experiment features` reports them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import torch

from gptlab.data.tokenizer import encode_checked
from gptlab.errors import UsageError
from gptlab.experiments import features as experiment
from gptlab.experiments import shipped_results
from gptlab.interp.sae import features, store
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.lab.context.window import SHAKESPEARE_VAL, shakespeare_val
from gptlab.lab.experiments.report import experiment_folder, experiment_folders
from gptlab.lab.features import schemas
from gptlab.lab.runs import Runs

SHIPPED = "shipped"
SHIPPED_FOLDER = shipped_results.FOLDER / "features-sae"  # the default run's autoencoder
REFERENCE_CHARS = 6000

# ----------------------------------------------------------------------------- dictionaries


def _describe(name: str, folder: Path, label: str | None) -> dict[str, Any]:
    sae, training = store.load(folder)
    config = sae.config
    cfg = config.to_cfg()
    return {"name": name, "model": config.model_name, "site": config.site,
            "hook_name": cfg["metadata"]["hook_name"], "layer": config.layer,
            "d_sae": config.d_sae, "k": config.k if config.activation == "topk" else None,
            "architecture": config.architecture, "label": label}


def list_dictionaries(runs: Runs) -> list[dict[str, Any]]:
    found = []
    if store.is_saved(SHIPPED_FOLDER):
        results = shipped_results.load(experiment.NAME)
        label = shipped_results.label(results) if results else "shipped"
        found.append(_describe(SHIPPED, SHIPPED_FOLDER, label))
    for name, folder in experiment_folders(runs, experiment.NAME):
        for part in experiment.DICTIONARIES:
            if store.is_saved(folder / part):
                found.append(_describe(f"{name}/{part}", folder / part, None))
    return found


def dictionary_folder(runs: Runs, name: str) -> Path:
    """The folder of dictionary `name`; a UsageError for one the lab does not have."""
    if name == SHIPPED:
        if not store.is_saved(SHIPPED_FOLDER):
            raise UsageError("this install ships no dictionary: run `gptlab experiment "
                             "features` into the runs folder")
        return SHIPPED_FOLDER
    folder_name, _, part = name.rpartition("/")
    try:
        folder = experiment_folder(runs, folder_name, experiment.NAME) if folder_name else None
    except UsageError:
        raise UsageError(f"dictionary {name[:80]!r} must be 'shipped' or a path inside the "
                         f"runs folder") from None
    if folder is None or part not in experiment.DICTIONARIES \
            or not store.is_saved(folder / part):
        raise UsageError(f"no dictionary named {name[:80]!r}: 'shipped', or FOLDER/sae or "
                         f"FOLDER/transcoder of a features experiment in the runs folder")
    return folder / part


class Reading:
    """A dictionary, the model it reads, and the reference text read through both (the
    site's activations and the features at every position), computed once."""

    def __init__(self, runs: Runs, folder: Path) -> None:
        self.sae: SparseAutoencoder = store.load(folder)[0]
        config = self.sae.config
        self.run = runs.load(config.model_name)
        if self.run.model.config.n_embd != config.d_in:
            raise UsageError(f"the dictionary reads {config.d_in} numbers but "
                             f"{config.model_name!r} is {self.run.model.config.n_embd} wide")
        text = shakespeare_val()[:REFERENCE_CHARS]
        ids = encode_checked(self.run.tokenizer, text, SHAKESPEARE_VAL, 10**9, min_tokens=3)
        with runs.model_lock, torch.no_grad():
            self.capture = features.capture_text(self.run.model, ids, config.site,
                                                 config.layer)
            self.acts = self.sae.encode(self.capture.x)  # (N, d_sae)

    def decode(self, ids: list[int]) -> str:
        return self.run.tokenizer.decode(ids)


_readings: dict[tuple[str, float, str], Reading] = {}
_readings_lock = threading.Lock()


def reading(runs: Runs, name: str) -> Reading:
    """The Reading of dictionary `name` (kept for the last few asked)."""
    folder = dictionary_folder(runs, name)
    key = (str(folder), (folder / store.WEIGHTS_FILE).stat().st_mtime, str(runs.root))
    with _readings_lock:
        if key not in _readings:
            if len(_readings) >= 2:
                _readings.pop(next(iter(_readings)))
            _readings[key] = Reading(runs, folder)
        return _readings[key]


# ----------------------------------------------------------------------------- views


def _token_id(r: Reading, token: str) -> int:
    ids = encode_checked(r.run.tokenizer, token, "token", 10**6)
    if len(ids) != 1:
        raise UsageError(f"token {token[:20]!r} is {len(ids)} tokens of the model's "
                         f"vocabulary, not one")
    return ids[0]


def search_view(runs: Runs, body: schemas.SearchRequest) -> dict[str, Any]:
    r = reading(runs, body.dictionary)
    token = _token_id(r, body.token)
    effects = features.logit_effects(r.run.model, r.sae)  # (d_sae, vocab) float64
    density = (r.acts > 0).double().mean(0)
    if body.by == "promotes":
        scores = effects[:, token]
    else:
        where = r.capture.tokens == token
        if not where.any():
            raise UsageError(f"the reference text never has {body.token!r}")
        scores = r.acts[where].double().mean(0)
    top = scores.topk(min(body.count, len(scores)))
    promotes = effects.argmax(-1)
    return {"dictionary": body.dictionary, "token": body.token, "by": body.by,
            "features": [{"feature": int(f), "score": float(v), "density": float(density[f]),
                          "promotes": r.decode([int(promotes[f])])}
                         for v, f in zip(top.values, top.indices, strict=True)]}


def feature_view(runs: Runs, body: schemas.FeatureRequest) -> dict[str, Any]:
    r = reading(runs, body.dictionary)
    d_sae = r.sae.config.d_sae
    if body.feature >= d_sae:
        raise UsageError(f"feature {body.feature} is out of range: the dictionary has "
                         f"features 0..{d_sae - 1}")
    record = features.feature_record(r.run.model, r.sae, r.capture, r.acts, body.feature,
                                     r.decode, k=body.contexts)
    del record["feature"]
    along = []
    if body.text:
        ids = encode_checked(r.run.tokenizer, body.text, "text", schemas.MAX_PROMPT_CHARS)
        config = r.sae.config
        with runs.model_lock, torch.no_grad():
            read = features.capture_text(r.run.model, ids, config.site, config.layer)
            acts = r.sae.encode(read.x)[:, body.feature]
        along = [{"token": r.decode([i]), "activation": float(a)}
                 for i, a in zip(ids, acts, strict=True)]
    return {"dictionary": body.dictionary, "feature": body.feature, "d_sae": d_sae,
            **record, "along": along}

