"""Direct logit attribution: the parts sum to the model's logit (difference), checked on
widened weights of every block kind; TransformerLens checks each part in
test_interp_transformer_lens.py."""

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.attribution import logit_attribution
from test_residuals import IDX, KINDS, widened


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("position", [-1, 4, 0])
def test_parts_sum_to_the_logit(kind, position, one_thread):
    model = widened(kind)
    with torch.no_grad():
        logits, _ = model(IDX)
    single = logit_attribution(model, IDX, 7, position=position)
    assert torch.equal(single.total, logits[:, position, 7])
    assert (single.values.sum(dim=0) - single.total).abs().max() < 1e-5
    diff = logit_attribution(model, IDX, torch.tensor([7, 11]), versus=40, position=position)
    expected = logits[:, position, [7, 11]].diagonal() - logits[:, position, 40]
    assert torch.equal(diff.total, expected)
    assert (diff.values.sum(dim=0) - diff.total).abs().max() < 1e-5
    assert diff.values.abs().max() > 0.25  # widened: the parts are not near-zero numbers
    n = model.config.n_layer * (model.config.n_head + 1)
    biases = 2 if model.config.bias else 0  # "attn biases", "final norm bias"
    assert len(diff.labels) == len(diff.values) == n + 1 + (model.wpe is not None) + biases
    assert "L1H3" in diff.labels and "L0 mlp" in diff.labels


def test_the_mlp_part_is_its_output_through_the_frozen_norm(one_thread):
    """One part by hand, in float64: centre it, divide by the final norm's scale on the
    whole stream, multiply by its weight, dot with W_U[target]."""
    from gptlab.interp.residuals import capture_residuals
    model = widened("gpt2")
    got = logit_attribution(model, IDX, 9, position=5)
    parts = capture_residuals(model, IDX)
    x, final = parts.mlp_out[1][:, 5].double(), parts.final[:, 5].double()
    centred = x - x.mean(-1, keepdim=True)
    scale = (final.var(-1, unbiased=False, keepdim=True) + model.ln_f.eps).sqrt()
    expected = centred / scale * model.ln_f.weight.double() @ model.lm_head.weight[9].double()
    torch.testing.assert_close(got.values[got.labels.index("L1 mlp")].double(), expected,
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(target=97), "target token 97 is outside the vocabulary"),
    (dict(target=-1), "outside the vocabulary"),
    (dict(target=3, versus=200), "versus token 200 is outside"),
    (dict(target=3.0), "token id"),
    (dict(target=torch.tensor([1, 2, 3])), "3 target tokens for 2 sequences"),
    (dict(target=3, position=10), "position 10 is out of range for 10 tokens"),
    (dict(target=3, position=-11), "out of range"),
])
def test_bad_input_is_one_clear_error(kwargs, message):
    with pytest.raises(UsageError, match=message):
        logit_attribution(widened("gpt2"), IDX, **kwargs)
