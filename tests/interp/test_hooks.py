"""Recording attention (gptlab.interp.hooks): the captured weights are the model's own
(softmax of its queries and keys), outputs are unchanged, the instruments are put back even
after an error, and bad tokens are one clear error."""

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.hooks import (
    attention_modules,
    capture_attention,
    capture_with_logits,
    recording_attention,
)
from gptlab.model.attention import attention_weights, causal_mask


@pytest.mark.parametrize("preset", ["tiny-gpt2", "tiny-llama"])
def test_capture_leaves_outputs_unchanged_and_restores_the_instruments(preset, preset_model):
    model = preset_model(preset)
    idx = torch.randint(97, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before, _ = model(idx)
    weights, logits = capture_with_logits(model, idx)
    assert weights.shape == (2, 2, 4, 20, 20)  # (n_layer, B, n_head, T, T); GQA expanded
    assert torch.allclose(logits, before, atol=1e-6, rtol=0)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 4, 20), atol=1e-6)
    assert torch.all(weights.triu(1) == 0)  # causal
    for m in attention_modules(model):
        assert m.record_weights is False and m.weights is None and not m.heads._forward_hooks
    assert torch.equal(capture_attention(model, idx), weights)


def test_captured_layer0_weights_are_the_softmax_of_its_queries_and_keys(preset_model):
    model = preset_model("tiny-gpt2")
    idx = torch.randint(97, (1, 12), generator=torch.Generator().manual_seed(3))
    weights = capture_attention(model, idx)
    with torch.no_grad():
        x = model.wte(idx) + model.wpe(torch.arange(12))
        x = model.blocks[0].norm_1(x)
        attn = model.blocks[0].attn
        q, k, _ = attn.qkv(x).split(32, dim=-1)
        q = q.view(1, 12, 4, 8).transpose(1, 2)
        k = k.view(1, 12, 4, 8).transpose(1, 2)
        want = attention_weights(q, k, causal_mask(12, 12))
    assert torch.allclose(weights[0], want, atol=1e-6)


def test_capture_restores_state_after_an_error_and_keeps_training_mode(preset_model):
    model = preset_model("tiny-gpt2").train()
    with pytest.raises(RuntimeError), recording_attention(model):
        raise RuntimeError("boom")
    assert all(not m.record_weights for m in attention_modules(model))
    capture_attention(model, torch.tensor([1, 2, 3]))
    assert model.training


def test_capture_accepts_a_single_sequence(preset_model):
    model = preset_model()
    assert capture_attention(model, torch.tensor([5, 6, 7])).shape == (2, 1, 4, 3, 3)


@pytest.mark.parametrize("bad, message", [
    (torch.zeros(0, dtype=torch.long), "empty"),
    (torch.zeros(1, 0, dtype=torch.long), "empty"),
    (torch.zeros(33, dtype=torch.long), "longer than the model's context of 32"),
    (torch.tensor([1, 97]), "token id 97 is outside the vocabulary"),
    (torch.tensor([-1, 2]), "token id -1"),
    (torch.tensor([1.0, 2.0]), "integers"),
    (torch.zeros(1, 1, 3, dtype=torch.long), "shape"),
])
def test_bad_tokens_are_usage_errors(bad, message, preset_model):
    with pytest.raises(UsageError, match=message):
        capture_attention(preset_model(), bad)
