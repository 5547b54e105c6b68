"""The logit lens: its last row is the model's output, every row is the final norm and the
unembedding of that depth's stream."""

import copy

import pytest
import torch

from gptlab.interp import lens
from gptlab.interp.residuals import capture_residuals
from test_residuals import IDX, KINDS, widened


@pytest.mark.parametrize("kind", list(KINDS))
def test_last_row_is_the_model_and_each_row_its_depth(kind, one_thread):
    model = widened(kind)
    rows = lens.logit_lens(model, IDX)
    assert rows.shape == (model.config.n_layer + 1, *IDX.shape, model.config.vocab_size)
    with torch.no_grad():
        logits, _ = model(IDX)
    assert torch.equal(rows[-1], logits)  # exactly: the same ops on the same tensor
    parts = capture_residuals(model, IDX)
    wide = copy.deepcopy(model).double()  # the final norm and W_U again, in float64
    with torch.no_grad():
        for depth, stream in enumerate(parts.resid_pre):
            by_hand = wide.lm_head(wide.ln_f(stream.double()))
            torch.testing.assert_close(rows[depth].double(), by_hand, rtol=0, atol=1e-4)
    assert not torch.allclose(rows[0], rows[-1], atol=1e-2)  # the rows do differ


def test_top_tokens_and_next_token_probabilities(one_thread):
    model = widened("gpt2")
    rows = lens.logit_lens(model, IDX)
    probs, ids = lens.top_tokens(rows, k=3)
    full = torch.softmax(rows, dim=-1)
    assert torch.equal(ids[..., 0], full.argmax(dim=-1))
    assert (probs[..., :-1] >= probs[..., 1:]).all()
    torch.testing.assert_close(probs[..., 0], full.max(dim=-1).values)
    following = lens.next_token_probs(rows, IDX)
    assert following.shape == (3, 2, 9)
    for depth, b, t in [(0, 0, 0), (2, 1, 8), (1, 0, 4)]:
        assert float(following[depth, b, t]) == pytest.approx(
            float(full[depth, b, t, IDX[b, t + 1]]), abs=1e-7)
