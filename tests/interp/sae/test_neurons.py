"""The FFN's neuron basis (gptlab.interp.sae.neurons): every neuron rebuilds the FFN's
output exactly, k terms are each row's k longest (checked with topk), and the neurons a
target needs are the smallest count that reaches it."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.sae import neurons

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_every_neuron_rebuilds_the_ffn_and_the_neurons_needed_are_the_fewest(captured):
    model, _, capture = captured
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
