"""Reading features (gptlab.interp.sae.features), checked against direct recomputation: a
captured position's site activation is that of its context run alone; top contexts are
the largest activations in order; a feature's logit effect is W_U (gain * decoder row) in
float64; the pattern rule is memory's."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.memory import pattern_score
from gptlab.interp.sae import features
from gptlab.interp.sae.sites import read_site

pytestmark = pytest.mark.usefixtures("one_thread_module")


def decode(ids):
    return "".join(chr(65 + i % 26) for i in ids)


def test_each_position_is_read_as_its_context_alone_would_be(captured):
    model, _, capture = captured
    for position in (1, 20, 31, 32, 47, 70, 98):
        prefix = capture.prefix(position)
        x, y = read_site(model, prefix, "mlp_out", 1)
        assert torch.allclose(capture.x[position], x[0, -1], atol=1e-5), position
        assert len(prefix) <= 32 and prefix[-1] == capture.tokens[position]
    assert not capture.candidates[0] and not capture.candidates[-1]
    assert capture.candidates[1:-1].all()


def test_top_contexts_are_the_largest_activations_and_recompute_alone(captured):
    model, sae, capture = captured
    acts = sae.encode(capture.x)
    values, positions = features.top_positions(acts, capture.candidates, k=5)
    for unit in (0, 17, 63):
        column = acts[:, unit].masked_fill(~capture.candidates, float("-inf"))
        expected = column.sort(descending=True).values[:5]
        assert torch.equal(values[unit], expected)
    feature = int(acts.sum(0).argmax())
    record = features.feature_record(model, sae, capture, acts, feature, decode, k=4)
    assert len(record["contexts"]) == 4
    shown = [c["activation"] for c in record["contexts"]]
    assert shown == sorted(shown, reverse=True)
    for context in record["contexts"]:
        x, _ = read_site(model, capture.prefix(context["position"]), "mlp_out", 1)
        assert sae.encode(x[0, -1])[feature] == pytest.approx(context["activation"], rel=1e-4)
        assert context["ids"][-1] == int(capture.tokens[context["position"]])
        assert context["text"] == decode(context["ids"])
    assert record["density"] == pytest.approx(float((acts[:, feature] > 0).double().mean()))
    assert sum(record["histogram"]["counts"]) == int((acts[:, feature] > 0).sum())


def test_a_features_logit_effect_is_the_unembedded_decoder_row_in_float64(captured):
    model, sae, capture = captured
    effects = features.logit_effects(model, sae, [3, 9])
    for row, feature in enumerate((3, 9)):
        direct = model.lm_head.weight.double() @ (model.ln_f.weight.double()
                                                  * sae.W_dec[feature].double())
        assert torch.allclose(effects[row], direct)
    record = features.feature_record(model, sae, capture, sae.encode(capture.x), 3, decode,
                                     tokens=3)
    assert [t["id"] for t in record["promoted"]] == effects[0].topk(3).indices.tolist()
    assert [t["id"] for t in record["suppressed"]] == (-effects[0]).topk(3).indices.tolist()


def test_pattern_scores_apply_memorys_rule_to_the_top_k_prefixes(captured):
    _, sae, capture = captured
    acts = sae.encode(capture.x)
    scores = features.pattern_scores(acts, capture, decode, k=5)
    _, positions = features.top_positions(acts, capture.candidates, k=5)
    fires = (acts[capture.candidates] > 0).sum(0)
    for unit in range(64):
        if fires[unit] < 5:
            assert scores[unit].isnan()
        else:
            prefixes = [decode(capture.prefix(p).tolist()) for p in positions[unit].tolist()]
            assert scores[unit] == pattern_score(prefixes)
    have = scores[~scores.isnan()]
    assert features.single_pattern_share(scores) == pytest.approx(
        float((have >= features.SINGLE_PATTERN).double().mean()))
