"""Where a dictionary meets the model (gptlab.interp.sae.sites): a spliced identity
dictionary leaves the logits as they were, at each site and for each kind of block; the
stream read after the last block is what the final norm and unembedding turn into the
logits; sites a model lacks are refused."""

from __future__ import annotations

import copy

import pytest
import torch

from gptlab.errors import UsageError
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
