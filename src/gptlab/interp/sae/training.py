"""Training a dictionary on a model's activations, streamed (gptlab.interp.sae.stream),
with the standard recipe:

- inputs scaled so their mean norm is sqrt(d_in) (SAELens' "expected_average_only_in",
  the scale measured on the first batches), folded back into the weights at the end; a
  transcoder's inputs also centred on their mean there (an SAE's are, by b_dec), folded
  into b_enc;
- the decoder's rows held at norm 1: the gradient along each row removed before Adam's
  step, the rows renormalised after it;
- loss: the squared error summed over dimensions, mean over tokens; plus, for "standard"
  (ReLU), l1_coefficient times the features' sum (Bricken et al. 2023); for "topk" no
  sparsity term (k sets L0) but the auxiliary loss of Gao et al. 2024: the dead features'
  top k_aux = d_out / 2 pre-activations reconstruct the live ones' error (scaled down
  while fewer than k_aux are dead, as SAELens does);
- dead features (none fired for dead_feature_window steps): with "standard", re-initialised
  every feature_sampling_window steps (Bricken et al.'s resampling): the decoder row to the
  error at a token drawn with probability proportional to its squared error, the encoder
  column to that token's input scaled to 0.2 x the live columns' mean norm, their Adam
  moments zeroed;
- Adam, the learning rate warmed up over lr_warm_up_steps and decayed linearly to zero over
  the last lr_decay_steps (default a fifth of the steps).

`train_sae` writes a checkpoint (trainer_state.pt) every checkpoint_every steps into its
folder; called again with the same dictionary, settings and text it resumes there, and
once finished it loads the saved dictionary instead of training.
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from gptlab.interp.sae import store, stream
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig, TrainSettings
from gptlab.interp.sae.sites import check_site
from gptlab.model.inputs import unwrap

SCALE_BATCHES = 3  # batches the input scale is measured on
LOG_EVERY = 10  # steps between the history's records
RESAMPLE_ENCODER_SCALE = 0.2  # Bricken et al.: a resampled encoder column's norm vs live


@dataclass
class Trained:
    """A trained dictionary (reading raw activations), its loss log and what it cost."""

    sae: SparseAutoencoder
    history: list[dict[str, float]]
    tokens: int
    seconds: float
    reused: bool


def fingerprint(tokens: np.ndarray | Tensor) -> str:
    """A short hash of the training text's ids: a resume on other text is refused."""
    array = np.ascontiguousarray(np.asarray(tokens, dtype=np.int64))
    return hashlib.sha256(array.tobytes()).hexdigest()[:16]


def lr_at(step: int, total: int, settings: TrainSettings) -> float:
    """The learning rate of `step` of `total`: warm-up, constant, linear decay to zero."""
    decay = settings.lr_decay_steps if settings.lr_decay_steps is not None else total // 5
    if settings.lr_warm_up_steps and step < settings.lr_warm_up_steps:
        return settings.lr * (step + 1) / settings.lr_warm_up_steps
    if decay and step >= total - decay:
        return settings.lr * (total - step) / decay
    return settings.lr


def loss_terms(sae: SparseAutoencoder, x: Tensor, y: Tensor, dead: Tensor,
               settings: TrainSettings) -> dict[str, Tensor]:
    """The loss and its parts on one batch: x (N, d_in) read, y (N, d_out) to rebuild."""
    pre = sae.pre_activations(x)
    features = sae.activate(pre)
    error = y - sae.decode(features)
    mse = error.pow(2).sum(-1).mean()
    terms = {"mse": mse, "features": features, "error": error}
    if sae.config.activation == "standard":
        terms["l1"] = settings.l1_coefficient * features.sum(-1).mean()
        terms["loss"] = mse + terms["l1"]
    else:
        terms["aux"] = auxiliary_loss(sae, pre, error, dead, settings.aux_loss_coefficient)
        terms["loss"] = mse + terms["aux"]
    return terms


def auxiliary_loss(sae: SparseAutoencoder, pre: Tensor, error: Tensor, dead: Tensor,
                   coefficient: float) -> Tensor:
    """Gao et al.'s AuxK: ||e - W_dec^T topk_aux(pre[dead])||^2, e the live features'
    error (held fixed), mean over tokens, times coefficient * min(n_dead / k_aux, 1); the
    dead features' k_aux largest pre-activations taken as they are."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    k_aux = max(1, sae.config.d_out // 2)
    scale = min(n_dead / k_aux, 1.0)
    values, indices = pre.masked_fill(~dead, float("-inf")).topk(min(k_aux, n_dead), dim=-1)
    # no ReLU (as SAELens): a dead feature's pre-activation is mostly negative, and the
    # gradient that brings it back must reach it
    acts = torch.zeros_like(pre).scatter(-1, indices, values)
    rebuilt = acts @ sae.W_dec
    return coefficient * scale * (rebuilt - error.detach()).pow(2).sum(-1).mean()


@torch.no_grad()
def resample(sae: SparseAutoencoder, optimizer: torch.optim.Optimizer, dead: Tensor,
             x: Tensor, error: Tensor, generator: torch.Generator) -> int:
    """Re-initialise the dead features from this batch (module doc); returns how many."""
    chosen = dead.nonzero()[:, 0]
    if len(chosen) == 0:
        return 0
    weights = error.pow(2).sum(-1)
    if not weights.sum() > 0:
        return 0
    tokens = torch.multinomial(weights / weights.sum(), len(chosen), replacement=True,
                               generator=generator)
    directions = error[tokens]
    inputs = x[tokens] - (0 if sae.config.transcoder else sae.b_dec)
    alive = ~dead
    norm = float(sae.W_enc[:, alive].norm(dim=0).mean()) if alive.any() else 1.0
    sae.W_dec[chosen] = directions / directions.norm(dim=1, keepdim=True).clamp_min(1e-12)
    sae.W_enc[:, chosen] = (inputs / inputs.norm(dim=1, keepdim=True).clamp_min(1e-12)).T \
        * RESAMPLE_ENCODER_SCALE * norm
    sae.b_enc[chosen] = 0.0
    for parameter, index in ((sae.W_dec, (chosen,)), (sae.W_enc, (slice(None), chosen)),
                             (sae.b_enc, (chosen,))):
        state = optimizer.state.get(parameter, {})
        for moment in ("exp_avg", "exp_avg_sq"):
            if moment in state:
                state[moment][index] = 0.0
    return len(chosen)


def _mean_norm(values: list[Tensor]) -> float:
    return float(torch.cat([v.norm(dim=-1) for v in values]).mean())


Batches = Callable[[int], tuple[Tensor, Tensor]]  # step -> (x (N, d_in), y (N, d_out))


@dataclass
class FitState:
    """Everything a resumed fit needs besides the dictionary and the optimizer."""

    step: int
    since_fired: Tensor  # (d_sae,) steps since each feature last fired
    fired_window: Tensor  # (d_sae,) bool: fired since the last resampling
    scale_in: float
    scale_out: float
    history: list[dict[str, float]]
    seconds: float
    # A transcoder's inputs, scaled, less their mean (an SAE's are centred by b_dec): the
    # normed stream has a large common part, and a feature pointing away from it would
    # never reach the top k. Folded into b_enc at the end (`raw_dictionary`).
    center: Tensor | None = None


def start_state(sae: SparseAutoencoder, read: Batches, total: int) -> FitState:
    """A fresh fit's state: the scales measured on the first batches (module doc), b_dec
    set to the first batch's mean target (scaled), nothing fired yet."""
    config = sae.config
    first = [read(s) for s in range(min(SCALE_BATCHES, total))]
    scale_in = config.d_in ** 0.5 / _mean_norm([x for x, _ in first])
    scale_out = config.d_out ** 0.5 / _mean_norm([y for _, y in first])
    with torch.no_grad():
        sae.b_dec.copy_((first[0][1] * scale_out).mean(0))
    center = (torch.cat([x for x, _ in first]) * scale_in).mean(0) if config.transcoder \
        else None
    return FitState(0, torch.zeros(config.d_sae, dtype=torch.long),
                    torch.zeros(config.d_sae, dtype=torch.bool), scale_in, scale_out, [], 0.0,
                    center)


def raw_dictionary(sae: SparseAutoencoder, state: FitState) -> SparseAutoencoder:
    """A copy of the fitted dictionary that reads raw activations: the centre folded into
    b_enc ((x - c) W + b = x W + (b - c W)), then the scales (fold_scales); in eval mode,
    without gradients."""
    raw = copy.deepcopy(sae)
    with torch.no_grad():
        if state.center is not None:
            raw.b_enc -= state.center @ raw.W_enc
    raw.fold_scales(state.scale_in, state.scale_out)
    return raw.eval().requires_grad_(False)


def fit(sae: SparseAutoencoder, read: Batches, total: int, settings: TrainSettings,
        optimizer: torch.optim.Optimizer, state: FitState, generator: torch.Generator,
        checkpoint: Callable[[FitState], None] | None = None,
        progress: bool = False) -> FitState:
    """Train `sae` from state.step to `total` steps on read(step)'s batches (any source
    of activations: the model's, or a synthetic one), calling checkpoint(state) every
    settings.checkpoint_every steps. Returns the final state; sae is left in the units it
    trains in (`raw_dictionary` gives the one that reads raw activations)."""
    config = sae.config
    t0 = time.perf_counter()
    bar = _bar(total, state.step) if progress else None
    for step in range(state.step, total):
        x, y = read(step)
        x, y = x * state.scale_in, y * state.scale_out
        if state.center is not None:
            x = x - state.center
        dead = state.since_fired >= settings.dead_feature_window
        terms = loss_terms(sae, x, y, dead, settings)
        optimizer.zero_grad(set_to_none=True)
        terms["loss"].backward()
        sae.remove_parallel_gradient()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, total, settings)
        optimizer.step()
        sae.normalize_decoder()
        fired = (terms["features"] > 0).any(0)
        state.since_fired += 1
        state.since_fired[fired] = 0
        state.fired_window |= fired
        resampled = 0
        if (config.activation == "standard" and (step + 1) % settings.feature_sampling_window
                == 0 and step + 1 < total - total // 5):
            resampled = resample(sae, optimizer, ~state.fired_window, x,
                                 terms["error"].detach(), generator)
            state.fired_window.zero_()
        if step % LOG_EVERY == 0 or step == total - 1:
            state.history.append(_record(step, x.shape[0], terms, y, state.since_fired,
                                         settings, resampled))
            if bar is not None:
                bar.set_postfix(ev=f"{state.history[-1]['explained_variance']:.3f}",
                                l0=f"{state.history[-1]['l0']:.1f}")
        if bar is not None:
            bar.update(1)
        state.step = step + 1
        if checkpoint is not None and state.step % settings.checkpoint_every == 0 \
                and state.step < total:
            checkpoint(FitState(state.step, state.since_fired, state.fired_window,
                                state.scale_in, state.scale_out, state.history,
                                state.seconds + time.perf_counter() - t0, state.center))
    if bar is not None:
        bar.close()
    state.seconds += time.perf_counter() - t0
    return state


def train_sae(model: nn.Module, tokens: np.ndarray | Tensor, config: SAEConfig,
              settings: TrainSettings, folder: str | Path | None = None,
              progress: bool = False, log: Callable[[str], None] | None = None) -> Trained:
    """Train `config`'s dictionary on the site's activations over `tokens` (the training
    text's ids, (N,)), as the module doc says; into `folder` (cfg.json,
    sae_weights.safetensors, training.json) where given, resuming or reusing what is
    there. Returns the dictionary in eval mode, reading raw activations."""
    check_site(model, config.site, config.layer)
    context = settings.context_size or unwrap(model).config.block_size
    windows = max(1, settings.train_batch_size_tokens // context)
    per_step = windows * context
    total = math.ceil(settings.training_tokens / per_step)
    # torch's thread count is part of what a dictionary is, as of an experiment's runs
    # (gptlab.experiments.grid): another count sums in another order, and the weights move
    identity = {"cfg": config.to_cfg(), "settings": settings.to_dict(),
                "text": fingerprint(tokens), "context": context,
                "threads": torch.get_num_threads()}
    folder = store.check_folder(folder) if folder is not None else None
    if folder is not None and store.is_saved(folder):
        sae, training = store.load(folder)
        if training.get("identity") == identity:
            return Trained(sae, training["history"], training["tokens"], training["seconds"],
                           reused=True)

    def read(step: int) -> tuple[Tensor, Tensor]:
        return stream.batch(model, tokens, config.site, config.layer, context, windows,
                            settings.seed, step)

    sae = SparseAutoencoder(config, torch.Generator().manual_seed(settings.seed))
    optimizer = torch.optim.Adam(sae.parameters(), lr=settings.lr,
                                 betas=(settings.adam_beta1, settings.adam_beta2))
    generator = torch.Generator().manual_seed(settings.seed + 1)
    saved = store.load_state(folder) if folder is not None else None
    if saved is not None and saved["identity"] == identity:
        sae.load_state_dict(saved["sae"])
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        state = FitState(**saved["state"])
        if log:
            log(f"resuming the dictionary at step {state.step:,} of {total:,}")
    else:
        state = start_state(sae, read, total)

    def checkpoint(at: FitState) -> None:
        store.save_state(folder, {"identity": identity, "sae": sae.state_dict(),
                                  "optimizer": optimizer.state_dict(),
                                  "generator": generator.get_state(), "state": vars(at)})

    state = fit(sae, read, total, settings, optimizer, state, generator,
                checkpoint if folder is not None else None, progress)
    raw = raw_dictionary(sae, state)
    if folder is not None:
        store.save(folder, raw, {"identity": identity, "history": state.history,
                                 "tokens": total * per_step, "steps": total,
                                 "seconds": round(state.seconds, 1),
                                 "scale_in": state.scale_in, "scale_out": state.scale_out})
        (folder / store.STATE_FILE).unlink(missing_ok=True)
    return Trained(raw, state.history, total * per_step, state.seconds, reused=False)


def _record(step: int, per_step: int, terms: dict[str, Tensor], y: Tensor,
            since_fired: Tensor, settings: TrainSettings, resampled: int) -> dict[str, float]:
    """One line of the loss log, under SAELens' metric names."""
    variance = (y - y.mean(0)).pow(2).sum(-1).mean()
    record = {"step": step, "tokens": (step + 1) * per_step,
              "loss": float(terms["loss"].detach()), "mse": float(terms["mse"].detach()),
              "explained_variance": float(1 - terms["mse"].detach() / variance),
              "l0": float((terms["features"] > 0).float().sum(-1).mean()),
              "dead_features": int((since_fired >= settings.dead_feature_window).sum())}
    if "aux" in terms:
        record["auxiliary_reconstruction_loss"] = float(terms["aux"].detach())
    if "l1" in terms:
        record["l1_loss"] = float(terms["l1"].detach())
        record["resampled"] = resampled
    return record


def _bar(total: int, initial: int) -> Any:
    from tqdm.auto import tqdm  # start-up time: only a run that shows progress needs it

    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                desc="dictionary")
