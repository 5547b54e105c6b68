"""Where a dictionary meets the model, and what is measured there: a spliced identity
dictionary leaves the model's logits as they were (at each site, for each kind of block);
the stream read after the last block is what the final norm and unembedding turn into the
logits; and every measure of gptlab.interp.sae.metrics is recomputed here another way, CE
loss recovered from models with the replacement built into a copy of their weights (no
hooks), explained variance from the centred activations, in float64."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlab.errors import UsageError
from gptlab.interp.sae import metrics
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig
from gptlab.interp.sae.sites import read_site, spliced

pytestmark = pytest.mark.usefixtures("one_thread_module")

SITES = ("mlp_out", "resid_post")


@pytest.mark.parametrize("site", SITES)
def test_splicing_the_identity_dictionary_leaves_the_logits_as_they_were(widened, kind, idx,
                                                                        site):
    model = widened(kind)
    width = model.config.n_embd
    identity = SparseAutoencoder.identity(SAEConfig(d_in=width, d_sae=2 * width, site=site,
                                                    layer=1, activation="standard"))
    clean, _ = model(idx)
    with spliced(model, site, 1, identity):
        assert torch.allclose(model(idx)[0], clean, atol=1e-5)
    with spliced(model, site, 1, lambda x: 0 * x + 1.0):  # anything else changes them
        assert not torch.allclose(model(idx)[0], clean, atol=1e-3)
    assert torch.equal(model(idx)[0], clean)  # the hook is gone after


def test_a_transcoder_spliced_as_the_ffn_itself_leaves_the_logits_as_they_were(widened, kind,
                                                                             idx):
    model = widened(kind)
    clean, _ = model(idx)
    with spliced(model, "transcoder", 0, copy.deepcopy(model.blocks[0].mlp)):
        assert torch.allclose(model(idx)[0], clean, atol=1e-5)


def test_the_stream_after_the_last_block_is_what_becomes_the_logits(widened, idx):
    model = widened("gpt2")
    x, y = read_site(model, idx, "resid_post", model.config.n_layer - 1)
    assert torch.equal(x, y)
    logits, _ = model(idx)
    assert torch.allclose(model.lm_head(model.ln_f(y)), logits, atol=1e-5)
    mlp_in, mlp_out = read_site(model, idx, "transcoder", 0)
    assert torch.allclose(model.blocks[0].mlp(mlp_in), mlp_out, atol=1e-6)


def test_sites_the_model_lacks_are_refused(widened, preset_model, idx):
    with pytest.raises(UsageError, match="layer"):
        read_site(widened("gpt2"), idx, "mlp_out", 2)
    with pytest.raises(UsageError, match="feed-forward"):
        read_site(preset_model("tiny-gpt2", mlp="none"), idx, "mlp_out", 0)


# ---------------------------------------------------------------- metrics, recomputed

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
