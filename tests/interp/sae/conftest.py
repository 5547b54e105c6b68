"""What the feature-reading tests share: a widened tiny-gpt2, an untrained TopK SAE on its
block 1 MLP output, and that site captured (neurons too) over 100 tokens, windows of 32
overlapping by half."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.sae import features
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig

TEXT = torch.arange(100) * 7 % 97


@pytest.fixture(scope="module")
def captured(widen):
    """(model, sae, capture) over TEXT."""
    from gptlab import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny-gpt2")).eval()
    widen(model, 0)
    sae = SparseAutoencoder(SAEConfig(d_in=32, d_sae=64, site="mlp_out", layer=1, k=4),
                            torch.Generator().manual_seed(2)).requires_grad_(False)
    capture = features.capture_text(model, TEXT, "mlp_out", 1, neurons=True)
    return model, sae, capture
