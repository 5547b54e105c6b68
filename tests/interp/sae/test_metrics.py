"""gptlab.interp.sae.metrics, every measure recomputed another way: CE loss recovered from
models with the replacement built into a copy of their modules (no hooks), explained
variance from the centred activations, in float64."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlab.interp.sae import metrics
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig
from gptlab.interp.sae.sites import read_site

pytestmark = pytest.mark.usefixtures("one_thread_module")


class Replaced(nn.Module):
    """`inner`'s output passed through `after` (or zeros): the splice built into a copy of
    the model, for the independent computation."""

    def __init__(self, inner: nn.Module, after) -> None:
        super().__init__()
        self.inner, self.after = inner, after

    def forward(self, *args):
        out = self.inner(*args)
        return torch.zeros_like(out) if self.after is None else self.after(out)


def rebuilt_model(model, site, layer, sae):
    """A copy of model whose site is replaced by sae (None: zeros) in its modules."""
    copied = copy.deepcopy(model)
    block = copied.blocks[layer]
    if site == "resid_post":
        copied.blocks[layer] = Replaced(block, sae)
    elif site == "mlp_out":
        block.mlp = Replaced(block.mlp, sae)
    else:  # the transcoder reads the FFN's input: it is the FFN
        block.mlp = sae if sae is not None else Replaced(block.mlp, None)
    return copied


@torch.no_grad()
def loss(model, windows):
    logits, _ = model(windows)
    return float(F.cross_entropy(logits[:, :-1].double().reshape(-1, logits.size(-1)),
                                 windows[:, 1:].reshape(-1)))


@pytest.mark.parametrize("site", ("mlp_out", "resid_post", "transcoder"))
def test_every_measure_is_the_one_computed_another_way(widened, site):
    model = widened("gpt2")
    width = model.config.n_embd
    sae = SparseAutoencoder(SAEConfig(d_in=width, d_sae=96, site=site, layer=1, k=6),
                            torch.Generator().manual_seed(3)).requires_grad_(False)
    with torch.no_grad():
        sae.b_enc.fill_(0.05)
    ids = np.random.default_rng(1).integers(0, 97, 40 * 32 + 7)  # 40 windows, 7 dropped
    measured = metrics.evaluate(model, sae, ids)
    windows = torch.as_tensor(ids[: 40 * 32]).view(40, 32)
    clean = loss(model, windows)
    with_sae = loss(rebuilt_model(model, site, 1, sae), windows)
    ablated = loss(rebuilt_model(model, site, 1, None), windows)
    assert measured["ce_loss_without_sae"] == pytest.approx(clean, rel=1e-6)
    assert measured["ce_loss_with_sae"] == pytest.approx(with_sae, rel=1e-6)
    assert measured["ce_loss_with_ablation"] == pytest.approx(ablated, rel=1e-6)
    assert measured["ce_loss_score"] == pytest.approx((ablated - with_sae) / (ablated - clean),
                                                      rel=1e-5)
    x, y = read_site(model, windows, site, 1)
    x, y = x.reshape(-1, width).double(), y.reshape(-1, width).double()
    features = sae.encode(x.float()).double()
    rebuilt = sae.double()(x)
    centred = y - y.mean(0)
    assert measured["explained_variance"] == pytest.approx(
        float(1 - (y - rebuilt).pow(2).sum() / centred.pow(2).sum()), abs=1e-6)
    assert measured["l0"] == pytest.approx(float((features > 0).sum(-1).double().mean()))
    fired = (features > 0).double().mean(0)
    assert measured["dead_features"] == int((fired == 0).sum())
    assert measured["dense_features"] == int((fired > metrics.DENSE).sum())
    assert measured["feature_density"] == pytest.approx(fired.tolist())
    histogram = measured["density_histogram"]
    assert sum(histogram["counts"]) + histogram["dead"] == 96
    assert measured["tokens"] == 40 * 32


def test_a_dictionary_that_rebuilds_exactly_recovers_all_the_loss(widened):
    model = widened("gpt2")
    width = model.config.n_embd
    identity = SparseAutoencoder.identity(SAEConfig(d_in=width, d_sae=2 * width,
                                                    site="mlp_out", layer=0,
                                                    activation="standard"))
    measured = metrics.evaluate(model, identity, np.arange(32 * 4) % 97)
    assert measured["ce_loss_score"] == pytest.approx(1.0, abs=1e-5)
    assert measured["explained_variance"] == pytest.approx(1.0, abs=1e-6)
