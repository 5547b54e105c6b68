"""Direct logit attribution (gptlab.interp.attribution): the parts sum to the model's logit
(difference), checked on widened weights of every block kind; each part is
TransformerLens's; on a trained induction circuit the induction head carries the copy."""

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.attribution import logit_attribution
from gptlab.interp.residuals import capture_residuals


@pytest.mark.parametrize("position", [-1, 4, 0])
def test_parts_sum_to_the_logit(kind, position, one_thread, widened, idx):
    model = widened(kind)
    with torch.no_grad():
        logits, _ = model(idx)
    single = logit_attribution(model, idx, 7, position=position)
    assert torch.equal(single.total, logits[:, position, 7])
    assert (single.values.sum(dim=0) - single.total).abs().max() < 1e-5
    diff = logit_attribution(model, idx, torch.tensor([7, 11]), versus=40, position=position)
    expected = logits[:, position, [7, 11]].diagonal() - logits[:, position, 40]
    assert torch.equal(diff.total, expected)
    assert (diff.values.sum(dim=0) - diff.total).abs().max() < 1e-5
    assert diff.values.abs().max() > 0.25  # widened: the parts are not near-zero numbers
    n = model.config.n_layer * (model.config.n_head + 1)
    biases = 2 if model.config.bias else 0  # "attn biases", "final norm bias"
    assert len(diff.labels) == len(diff.values) == n + 1 + (model.wpe is not None) + biases
    assert "L1H3" in diff.labels and "L0 mlp" in diff.labels


def test_the_mlp_part_is_its_output_through_the_frozen_norm(one_thread, widened, idx):
    """One part by hand, in float64: centre it, divide by the final norm's scale on the
    whole stream, multiply by its weight, dot with W_U[target]."""
    model = widened("gpt2")
    got = logit_attribution(model, idx, 9, position=5)
    parts = capture_residuals(model, idx)
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
def test_bad_input_is_one_clear_error(kwargs, message, widened, idx):
    with pytest.raises(UsageError, match=message):
        logit_attribution(widened("gpt2"), idx, **kwargs)


# ----------------------------------------------------------------------------- TransformerLens

@pytest.mark.oracle
def test_direct_logit_attribution_matches_transformer_lens_logit_attrs(lens_pair, one_thread):
    t = lens_pair
    _, cache = t.processed.run_with_cache(t.clean)
    heads = cache.stack_head_results(layer=-1, pos_slice=-1)
    their_heads = cache.logit_attrs(heads, tokens=t.target, incorrect_tokens=t.versus,
                                    pos_slice=-1)[:, 0]
    parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
    their_parts = dict(zip(labels, cache.logit_attrs(parts, tokens=t.target,
                                                     incorrect_tokens=t.versus,
                                                     pos_slice=-1)[:, 0], strict=True))
    mine = logit_attribution(t.ours, t.clean, t.target, t.versus)
    values = dict(zip(mine.labels, mine.values[:, 0], strict=True))
    n_layer, n_head = t.ours.config.n_layer, t.ours.config.n_head
    head_diff = t.worst(their_heads, torch.stack(
        [values[f"L{la}H{h}"] for la in range(n_layer) for h in range(n_head)]))
    mlp_diff = max(t.worst(their_parts[f"{la}_mlp_out"], values[f"L{la} mlp"])
                   for la in range(n_layer))
    embed_diff = max(t.worst(their_parts[k], values[k]) for k in ("embed", "pos_embed"))
    print(t.name, f"DLA: heads {head_diff:.1e}, MLPs {mlp_diff:.1e}, embeddings {embed_diff:.1e}")
    assert max(head_diff, mlp_diff, embed_diff) < 1e-5
    assert (mine.values.sum(dim=0) - mine.total).abs().max() < 1e-5


# ----------------------------------------------------------------------------- the circuit

@pytest.mark.slow
def test_direct_logit_attribution_sees_the_induction_head(circuit, one_thread):
    """On the trained circuit, as the literature shows it (Olsson et al. 2022). Measured on
    this probe for training seeds 0 / 1 / 2: the strongest layer-1 induction head's mean DLA
    to the token that comes next, on the repeated half: 5.00 / 3.39 / 3.50 (the other
    layer-1 head, an induction head too: 3.66 / 3.09 / 3.14); every other part (embeddings,
    layer-0 heads, MLPs) within 1.13 / 0.95 / 1.11 of zero; on the first half, nothing to
    copy: -0.02 / -0.04 / 0.03."""
    model, half, clean, head = circuit.model, circuit.half, circuit.clean, circuit.head
    induction_heads = {f"L1H{h}" for h in range(2) if circuit.scores["induction"][1, h] > 0.2}

    def mean_dla(positions):
        """Each part's direct logit attribution to the actual next token, averaged over
        the batch and `positions`."""
        total = 0
        for t in positions:
            total = total + logit_attribution(model, clean, clean[:, t + 1], position=t).values
        result = logit_attribution(model, clean, clean[:, 1], position=0)
        return dict(zip(result.labels, (total / len(positions)).mean(dim=1).tolist(),
                        strict=True))

    repeated = mean_dla(range(half, 2 * half - 1))
    mine = repeated[f"L1H{head}"]
    rest = max(abs(v) for label, v in repeated.items() if label not in induction_heads)
    assert mine > 2.5 and mine > 2.5 * rest, repeated  # measured: >= 3.39, >= 3.1x
    assert abs(mean_dla(range(half - 1))[f"L1H{head}"]) < 0.3  # nothing to copy yet
