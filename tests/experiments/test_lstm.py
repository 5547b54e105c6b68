"""The recurrence experiment's baseline and measurements (gptlab.experiments.lstm): the
LSTM's parameter arithmetic; the gradient by distance equals finite differences in float64,
for the LSTM and for a GPT read through its embeddings; a model trained once is saved
(safetensors) and reused while its spec is unchanged."""

from __future__ import annotations

import pytest
import torch

from gptlab.experiments.lstm import (
    LSTMModel,
    cached,
    distance_gradients,
    gpt_logits,
    gpt_loss,
    lstm_logits,
    lstm_loss,
    lstm_parameters,
    matching_hidden,
    train_model,
)
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


@pytest.mark.parametrize("layers", [1, 2])
def test_the_parameter_arithmetic_counts_the_model(layers):
    model = LSTMModel(11, 6, 9, layers)
    assert lstm_parameters(11, 6, 9, layers) == sum(p.numel() for p in model.parameters())


def test_the_matching_hidden_size_is_the_closest():
    target = 5000
    h = matching_hidden(target, 20, 8)
    best = abs(lstm_parameters(20, 8, h) - target)
    assert best <= abs(lstm_parameters(20, 8, h - 1) - target)
    assert best <= abs(lstm_parameters(20, 8, h + 1) - target)


def finite_difference_norms(logits, x, y, position, eps=1e-6):
    """The same quantity as distance_gradients, by central differences on every input."""
    def loss(z):
        return torch.nn.functional.cross_entropy(logits(z)[:, position], y[:, position],
                                                 reduction="sum")
    grad = torch.zeros_like(x)
    with torch.no_grad():
        for index in torch.cartesian_prod(*[torch.arange(s) for s in x.shape]):
            i = tuple(index.tolist())
            up, down = x.clone(), x.clone()
            up[i] += eps
            down[i] -= eps
            grad[i] = (loss(up) - loss(down)) / (2 * eps)
    return grad[:, : position + 1].norm(dim=-1).flip(-1)


def test_the_lstm_gradient_by_distance_equals_finite_differences_in_float64():
    torch.manual_seed(0)
    model = LSTMModel(7, 3, 4).double()
    idx = torch.randint(7, (2, 6))
    x, y = model.embedding(idx).detach(), torch.randint(7, (2, 6))
    position = 4
    ours = distance_gradients(lstm_logits(model), x, y, position)
    assert ours.shape == (2, position + 1)
    reference = finite_difference_norms(lstm_logits(model), x, y, position)
    assert torch.allclose(ours, reference, rtol=1e-6, atol=1e-9)
    # the embedding k back: nothing after the position reaches it (k < 0 is not there)
    assert (ours > 0).all()


def test_a_gpt_read_through_its_embeddings_is_the_model_and_its_gradient_is_exact():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=7, n_layer=1, n_head=1, n_embd=4, block_size=8,
                          dropout=0.0, bias=False, pos_encoding="rope")).double()
    idx = torch.randint(7, (2, 4))
    logits = gpt_logits(model)
    assert torch.equal(logits(model.wte(idx)), model(idx)[0])
    assert not model.wte._forward_hooks  # the hook is gone after each call
    x, y = model.wte(idx[:1]).detach(), torch.randint(7, (1, 4))
    ours = distance_gradients(logits, x, y, 3)
    assert torch.allclose(ours, finite_difference_norms(logits, x, y, 3), rtol=1e-6,
                          atol=1e-9)


def test_training_takes_the_steps_and_moves_the_weights():
    torch.manual_seed(0)
    model = LSTMModel(5, 3, 4)
    before = [p.detach().clone() for p in model.parameters()]
    batches = iter(lambda: (torch.randint(5, (2, 4)), torch.randint(5, (2, 4))), None)
    losses = train_model(model, lstm_loss, batches, steps=3, lr=1e-2, warmup=1)
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not model.training


def test_a_model_is_trained_once_and_reused_while_its_spec_holds(tmp_path):
    calls = []

    def make():
        torch.manual_seed(0)
        return GPT(GPTConfig(vocab_size=6, n_layer=1, n_head=1, n_embd=4, block_size=4,
                             dropout=0.0, bias=False))  # tied: wte and lm_head one tensor

    def train(model):
        calls.append(1)
        batches = iter(lambda: (torch.randint(6, (2, 4)), torch.randint(6, (2, 4))), None)
        return {"loss": train_model(model, gpt_loss, batches, 2, 1e-2, 1)[-1]}

    first, record = cached(tmp_path, "m", {"a": 1}, make, train)
    assert not record["reused"] and (tmp_path / "m.safetensors").is_file()
    again, record2 = cached(tmp_path, "m", {"a": 1}, make, train)
    assert record2["reused"] and record2["loss"] == record["loss"] and len(calls) == 1
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    cached(tmp_path, "m", {"a": 2}, make, train)  # another spec: trained again
    assert len(calls) == 2
