"""gptlab.interp.sae.training: on activations that are sparse combinations of known
directions (a synthetic source standing in for the model, fed to the same `fit` the
model's stream feeds), both recipes recover the directions; the auxiliary loss, resampling
and the schedule hold their promises; and a run interrupted after a checkpoint resumes to
the very weights of one that was not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.sae import store
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig, TrainSettings
from gptlab.interp.sae.training import (
    auxiliary_loss,
    fit,
    lr_at,
    resample,
    start_state,
    train_sae,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")

D_IN, N_DIRECTIONS, ACTIVE = 16, 48, 3  # 48 directions in 16 dimensions, 3 per sample


@pytest.fixture(scope="module")
def directions() -> torch.Tensor:
    """(48, 16) unit directions, random (so in superposition: 3x more than dimensions)."""
    d = torch.randn(N_DIRECTIONS, D_IN, generator=torch.Generator().manual_seed(0))
    return d / d.norm(dim=1, keepdim=True)


def synthetic(directions: torch.Tensor):
    """step -> (x, x): 512 samples, each 3 of the directions with magnitudes in [1, 3]."""
    def read(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1000 + step)
        chosen = torch.rand(512, N_DIRECTIONS, generator=g).argsort(dim=1)[:, :ACTIVE]
        codes = torch.zeros(512, N_DIRECTIONS).scatter(
            1, chosen, torch.rand(512, ACTIVE, generator=g) * 2 + 1)
        x = codes @ directions
        return x, x
    return read


@pytest.mark.parametrize("activation, settings", [
    ("topk", dict(lr=3e-3)),
    ("standard", dict(lr=3e-3, l1_coefficient=1.0)),
])
def test_a_dictionary_recovers_the_directions_its_activations_are_made_of(
        directions, activation, settings):
    config = SAEConfig(d_in=D_IN, d_sae=96, site="mlp_out", layer=0, activation=activation,
                       k=ACTIVE)
    train = TrainSettings(dead_feature_window=20, feature_sampling_window=50, **settings)
    sae = SparseAutoencoder(config, torch.Generator().manual_seed(0))
    read, steps = synthetic(directions), 600
    optimizer = torch.optim.Adam(sae.parameters(), lr=train.lr)
    fit(sae, read, steps, train, optimizer, start_state(sae, read, steps),
        torch.Generator().manual_seed(1))
    best = (directions @ sae.W_dec.detach().T).max(dim=1).values  # each direction's best row
    assert (best >= 0.9).double().mean() >= 0.9, best.sort().values[:8]
    assert torch.allclose(sae.W_dec.norm(dim=1), torch.ones(96), atol=1e-5)


def test_the_auxiliary_loss_is_zero_without_dead_features_and_reads_only_the_dead():
    config = SAEConfig(d_in=8, d_sae=32, site="mlp_out", layer=0, k=4)
    sae = SparseAutoencoder(config, torch.Generator().manual_seed(0))
    x = torch.randn(20, 8)
    pre, error = sae.pre_activations(x), torch.randn(20, 8)
    assert float(auxiliary_loss(sae, pre, error, torch.zeros(32, dtype=torch.bool), 1.0)) == 0
    dead = torch.zeros(32, dtype=torch.bool)
    dead[:6] = True
    loss = auxiliary_loss(sae, pre, error, dead, 1.0)
    loss.backward()
    assert sae.W_dec.grad[6:].abs().sum() == 0 and sae.W_dec.grad[:6].abs().sum() > 0
    # by hand: k_aux = d_out // 2 = 4 of the 6 dead, their pre-activations as they are
    # (negative ones too: a dead feature gets the gradient that brings it back)
    values, indices = pre[:, :6].topk(4, dim=-1)
    assert (values < 0).any()
    acts = torch.zeros(20, 6).scatter(-1, indices, values)
    expected = (acts @ sae.W_dec[:6] - error).pow(2).sum(-1).mean()
    assert torch.isclose(loss, expected.detach())


def test_resampling_points_dead_features_at_badly_rebuilt_tokens_and_zeroes_their_moments():
    config = SAEConfig(d_in=8, d_sae=16, site="mlp_out", layer=0, activation="standard")
    sae = SparseAutoencoder(config, torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(sae.parameters())
    x = torch.randn(30, 8)
    sae(x).pow(2).sum().backward()
    optimizer.step()
    error = torch.zeros(30, 8)
    error[7] = torch.randn(8)  # one token holds all the error: every draw picks it
    dead = torch.zeros(16, dtype=torch.bool)
    dead[[2, 5]] = True
    assert resample(sae, optimizer, dead, x, error, torch.Generator().manual_seed(0)) == 2
    direction = error[7] / error[7].norm()
    assert torch.allclose(sae.W_dec[[2, 5]], direction.expand(2, 8), atol=1e-6)
    assert (sae.b_enc[[2, 5]] == 0).all()
    assert (optimizer.state[sae.W_dec]["exp_avg"][[2, 5]] == 0).all()
    assert (optimizer.state[sae.W_dec]["exp_avg"][0] != 0).any()


def test_the_learning_rate_warms_up_holds_and_decays_to_zero():
    settings = TrainSettings(lr=1.0, lr_warm_up_steps=4, lr_decay_steps=10)
    rates = [lr_at(s, 100, settings) for s in range(100)]
    assert rates[:4] == [0.25, 0.5, 0.75, 1.0] and rates[50] == 1.0
    assert rates[90] == 1.0 and rates[99] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(rates[90:], rates[91:], strict=False))


# ------------------------------------------------------------------ on a model, resumable


@pytest.fixture
def tiny(preset_model):
    model = preset_model("tiny-gpt2", seed=0)
    tokens = np.random.default_rng(0).integers(0, 97, 5000).astype(np.uint16)
    return model, tokens


CONFIG = SAEConfig(d_in=32, d_sae=64, site="mlp_out", layer=1, k=4)
SETTINGS = TrainSettings(training_tokens=8 * 256, train_batch_size_tokens=256,
                         checkpoint_every=3, lr=3e-3)


def test_an_interrupted_run_resumes_to_the_weights_of_an_uninterrupted_one(tiny, tmp_path,
                                                                          monkeypatch):
    model, tokens = tiny
    whole = train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "whole")
    from gptlab.interp.sae import stream

    real = stream.batch

    def breaks_at_step_4(*args, **kwargs):
        if args[-1] == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(stream, "batch", breaks_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "cut")
    assert (tmp_path / "cut" / store.STATE_FILE).is_file()
    assert not (tmp_path / "cut" / store.CFG_FILE).exists()
    monkeypatch.setattr(stream, "batch", real)
    resumed = train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "cut")
    for name in store.TENSORS:
        assert torch.equal(getattr(whole.sae, name), getattr(resumed.sae, name)), name
    assert not (tmp_path / "cut" / store.STATE_FILE).exists()
    again = train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "cut")
    assert again.reused and torch.equal(again.sae.W_dec, whole.sae.W_dec)
    assert whole.tokens == 8 * 256 and whole.history[-1]["step"] == 7


def test_other_text_or_settings_train_afresh_and_a_foreign_folder_is_refused(tiny, tmp_path):
    model, tokens = tiny
    first = train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "sae")
    other = train_sae(model, tokens[::-1].copy(), CONFIG, SETTINGS, tmp_path / "sae")
    assert not other.reused and not torch.equal(first.sae.W_dec, other.sae.W_dec)
    # another torch thread count trains afresh too: it is part of what a dictionary is
    threads = torch.get_num_threads()
    train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "threads")
    torch.set_num_threads(threads + 1)
    try:
        assert not train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "threads").reused
    finally:
        torch.set_num_threads(threads)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a dictionary"):
        train_sae(model, tokens, CONFIG, SETTINGS, tmp_path / "mine")
