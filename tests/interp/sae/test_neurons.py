"""The FFN's neuron basis (gptlab.interp.sae.neurons): every neuron rebuilds the FFN's
output exactly, k terms are each row's k longest (checked with topk), and the neurons a
target needs are the smallest count that reaches it."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.sae import features, neurons
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig

pytestmark = pytest.mark.usefixtures("one_thread_module")

TEXT = torch.arange(100) * 7 % 97


@pytest.fixture(scope="module")
def setup(widen):
    from gptlab import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny-gpt2")).eval()
    widen(model, 0)
    sae = SparseAutoencoder(SAEConfig(d_in=32, d_sae=64, site="mlp_out", layer=1, k=4),
                            torch.Generator().manual_seed(2)).requires_grad_(False)
    capture = features.capture_text(model, TEXT, "mlp_out", 1, neurons=True)
    return model, sae, capture


def test_every_neuron_rebuilds_the_ffn_and_the_neurons_needed_are_the_fewest(setup):
    model, _, capture = setup
    basis = neurons.NeuronBasis(model, 1, capture.neurons, capture.y)
    assert basis.explained_variance(basis.width) == pytest.approx(1.0, abs=1e-6)
    weight = model.blocks[1].mlp.proj.weight.detach().double()
    m = capture.neurons.double()
    for k in (1, 5, 30):  # by hand: each row's k longest terms, with topk
        keep = (m.abs() * weight.norm(dim=0)).topk(k, dim=-1).indices
        kept = torch.zeros_like(m).scatter(-1, keep, m.gather(-1, keep))
        rebuilt = kept @ weight.T + model.blocks[1].mlp.proj.bias.detach().double()
        y = capture.y.double()
        expected = 1 - (y - rebuilt).pow(2).sum(-1).mean() / (y - y.mean(0)).pow(2).sum(-1).mean()
        assert basis.explained_variance(k) == pytest.approx(float(expected), abs=1e-9)
    curve = [basis.explained_variance(k) for k in range(1, basis.width + 1)]
    target = curve[9] - 1e-9
    k, reached = basis.needed(target)
    assert k == next(i + 1 for i, v in enumerate(curve) if v >= target)
    assert reached == pytest.approx(curve[k - 1])
