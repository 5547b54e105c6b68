"""The dictionary itself (gptlab.interp.sae.autoencoder): TopK keeps each token's k largest
pre-activations, the identity dictionary rebuilds exactly, and folding the training scale
(and a transcoder's input centre) into the weights leaves what it computes as it was, its
decoder rows at norm 1."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig
from gptlab.interp.sae.training import (
    FitState,
    raw_dictionary,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_topk_keeps_k_features_and_the_identity_dictionary_rebuilds_exactly():
    x = torch.randn(50, 8, generator=torch.Generator().manual_seed(0))
    topk = SparseAutoencoder(SAEConfig(d_in=8, d_sae=40, site="mlp_out", layer=0, k=5))
    features, pre = topk.encode(x), topk.pre_activations(x)
    kept = features > 0
    assert (kept.sum(-1) <= 5).all() and (kept.sum(-1) > 0).all()
    for row in range(50):  # what is kept is the row's largest, at its pre-activation
        assert pre[row][kept[row]].min() >= pre[row][~kept[row]].max()
        assert torch.equal(features[row][kept[row]], pre[row][kept[row]])
    for activation, k in (("standard", 1), ("topk", 8)):
        config = SAEConfig(d_in=8, d_sae=16, site="mlp_out", layer=0, activation=activation,
                           k=k)
        assert torch.allclose(SparseAutoencoder.identity(config)(x), x, atol=1e-6)


def test_folding_the_training_scale_gives_the_raw_dictionary_the_same_reconstruction():
    # an SAE reads and rebuilds one tensor, so one scale; a transcoder has two
    for site, s_in, s_out in (("mlp_out", 3.7, 3.7), ("transcoder", 3.7, 0.4)):
        config = SAEConfig(d_in=8, d_sae=32, site=site, layer=0, k=4)
        sae = SparseAutoencoder(config, torch.Generator().manual_seed(1))
        with torch.no_grad():
            sae.b_enc.normal_()
            sae.b_dec.normal_()
        x = torch.randn(20, 8)
        scaled = sae(x * s_in) / s_out  # what the trained units give, back in raw units
        features = sae.encode(x * s_in) / s_out
        sae.fold_scales(s_in, s_out)
        assert torch.allclose(sae(x), scaled, atol=1e-5)
        assert torch.allclose(sae.encode(x), features, atol=1e-5)
        assert torch.allclose(sae.W_dec.norm(dim=1), torch.ones(32), atol=1e-5)


def test_a_transcoders_input_centre_folds_into_its_encoder_bias():
    config = SAEConfig(d_in=8, d_sae=32, site="transcoder", layer=0, k=4)
    sae = SparseAutoencoder(config, torch.Generator().manual_seed(2))
    center = torch.randn(8)
    state = FitState(0, torch.zeros(32, dtype=torch.long), torch.zeros(32, dtype=torch.bool),
                     2.5, 0.5, [], 0.0, center)
    x = torch.randn(20, 8)
    trained = sae(x * 2.5 - center) / 0.5  # what fit trains on, back in raw units
    assert torch.allclose(raw_dictionary(sae, state)(x), trained, atol=1e-5)
