"""The logit lens (gptlab.interp.lens): its last row is the model's output, every row is the
final norm and the unembedding of that depth's stream, as TransformerLens computes it."""

import copy

import pytest
import torch

from gptlab.interp import lens
from gptlab.interp.residuals import capture_residuals


def test_last_row_is_the_model_and_each_row_its_depth(kind, one_thread, widened, idx):
    model = widened(kind)
    rows = lens.logit_lens(model, idx)
    assert rows.shape == (model.config.n_layer + 1, *idx.shape, model.config.vocab_size)
    with torch.no_grad():
        logits, _ = model(idx)
    assert torch.equal(rows[-1], logits)  # exactly: the same ops on the same tensor
    parts = capture_residuals(model, idx)
    wide = copy.deepcopy(model).double()  # the final norm and W_U again, in float64
    with torch.no_grad():
        for depth, stream in enumerate(parts.resid_pre):
            by_hand = wide.lm_head(wide.ln_f(stream.double()))
            torch.testing.assert_close(rows[depth].double(), by_hand, rtol=0, atol=1e-4)
    assert not torch.allclose(rows[0], rows[-1], atol=1e-2)  # the rows do differ


def test_top_tokens_and_next_token_probabilities(one_thread, widened, idx):
    model = widened("gpt2")
    rows = lens.logit_lens(model, idx)
    probs, ids = lens.top_tokens(rows, k=3)
    full = torch.softmax(rows, dim=-1)
    assert torch.equal(ids[..., 0], full.argmax(dim=-1))
    assert (probs[..., :-1] >= probs[..., 1:]).all()
    torch.testing.assert_close(probs[..., 0], full.max(dim=-1).values)
    following = lens.next_token_probs(rows, idx)
    assert following.shape == (3, 2, 9)
    for depth, b, t in [(0, 0, 0), (2, 1, 8), (1, 0, 4)]:
        assert float(following[depth, b, t]) == pytest.approx(
            float(full[depth, b, t, idx[b, t + 1]]), abs=1e-7)


# ----------------------------------------------------------------------------- TransformerLens

@pytest.mark.oracle
def test_logit_lens_matches_transformer_lens_accumulated_resid(lens_pair, one_thread):
    t = lens_pair
    _, cache = t.raw.run_with_cache(t.clean)
    theirs = t.raw.unembed(cache.accumulated_resid(apply_ln=True))  # (n_layer + 1, B, T, V)
    mine = lens.logit_lens(t.ours, t.clean)
    diff = t.worst(theirs, mine)
    print(t.name, "logit lens: max |diff|", diff)
    assert theirs.shape == mine.shape and diff < 1e-5
