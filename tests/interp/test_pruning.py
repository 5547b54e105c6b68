"""Head gates, importance and pruning (gptlab.interp.pruning): a gate of ones is the model
unchanged, a zero gate is zero ablation, the importance is the gradient a central finite
difference measures (float64), normalised per layer, and the model's own gradients are left
alone."""

from __future__ import annotations

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.heads import ablate_heads, ablation_deltas, next_token_targets
from gptlab.interp.pruning import (
    head_gradients,
    head_importance,
    head_mask,
    mask_without,
    masked_loss,
    pruned_counts,
    pruning_order,
)

pytestmark = pytest.mark.usefixtures("one_thread")
SHAPE = (2, 4)  # tiny-gpt2's layers and heads


def test_a_mask_of_ones_is_the_model_unchanged(widened, kind, idx):
    model = widened(kind)
    with torch.no_grad():
        plain, _ = model(idx)
        with head_mask(model, torch.ones(SHAPE)):
            masked, _ = model(idx)
    assert torch.equal(plain, masked)
    assert masked_loss(model, idx, torch.ones(SHAPE)) == masked_loss(model, idx)


def test_a_zero_in_the_mask_is_zero_ablation(widened, idx):
    model = widened("gpt2")
    heads = [(0, 1), (1, 0)]
    with torch.no_grad():
        with ablate_heads(model, heads):
            ablated, _ = model(idx)
        with head_mask(model, mask_without(SHAPE, heads)):
            masked, _ = model(idx)
        plain, _ = model(idx)
    assert torch.equal(ablated, masked) and not torch.equal(plain, masked)
    deltas = ablation_deltas(model, idx)
    for layer, head in [(0, 0), (1, 3)]:
        one = masked_loss(model, idx, mask_without(SHAPE, [(layer, head)]))
        assert one - masked_loss(model, idx) == pytest.approx(float(deltas[layer, head]),
                                                              abs=1e-6)


def test_the_gradient_by_the_mask_is_the_finite_difference(widened, kind, idx):
    model = widened(kind).double()
    batches = [idx[:1], idx[1:]]
    grads = head_gradients(model, batches)
    assert grads.shape == (2, *SHAPE) and grads.dtype == torch.float64
    eps = 1e-6
    for b, batch in enumerate(batches):
        for layer in range(SHAPE[0]):
            for head in range(SHAPE[1]):
                up, down = (torch.ones(SHAPE, dtype=torch.float64) for _ in range(2))
                up[layer, head] += eps
                down[layer, head] -= eps
                numeric = (masked_loss(model, batch, up) - masked_loss(model, batch, down)) \
                    / (2 * eps)
                assert float(grads[b, layer, head]) == pytest.approx(numeric, rel=1e-5,
                                                                     abs=1e-8)
    raw = head_importance(model, batches, normalize=False)
    assert torch.allclose(raw, grads.abs().sum(dim=0))
    normalized = head_importance(model, batches)
    assert torch.allclose(normalized.norm(dim=1), torch.ones(2, dtype=torch.float64))
    assert torch.allclose(normalized * raw.norm(dim=1, keepdim=True), raw)


def test_importance_leaves_the_models_gradients_and_mode_alone(widened, idx):
    model = widened("gpt2").train()
    _, loss = model(idx, next_token_targets(idx))
    loss.backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters()}
    head_importance(model, [idx])
    assert model.training
    assert all(torch.equal(p.grad, before[n]) for n, p in model.named_parameters())


def test_the_order_counts_and_masks(widened):
    importance = torch.tensor([[0.5, 0.1, 0.9], [0.1, 0.7, 0.2]])
    assert pruning_order(importance) == [(0, 1), (1, 0), (1, 2), (0, 0), (1, 1), (0, 2)]
    assert pruned_counts(32, [0.0, 0.1, 0.5, 1.0]) == [0, 3, 16, 32]
    assert mask_without((2, 3), [(0, 1), (1, 2)]).tolist() == [[1, 0, 1], [1, 1, 0]]
    with pytest.raises(UsageError, match=r"in \[0, 1\]"):
        pruned_counts(8, [1.5])
    with pytest.raises(UsageError, match=r"must be \(n_layer, n_head\) = \(2, 4\)"):
        with head_mask(widened("gpt2"), torch.ones(2, 2)):
            pass
