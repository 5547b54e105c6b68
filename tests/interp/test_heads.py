"""Head scores and ablations (gptlab.interp.heads): detection patterns and scores against
TransformerLens's algorithm on crafted and random patterns, chance levels, batch averages,
zero and mean ablation against an edited output projection, the induction probe, and a
two-layer model trained until it grows an induction circuit that ablation takes apart."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.errors import UsageError
from gptlab.interp.head_kinds import ABLATION_MODES, SCORE_NAMES
from gptlab.interp.heads import (
    ablate_heads,
    ablation_deltas,
    chance_scores,
    detection_patterns,
    head_scores,
    induction_probe,
    mean_head_outputs,
    next_token_targets,
    scores_from_patterns,
)
from gptlab.interp.hooks import attention_modules, capture_attention
from gptlab.model.attention import causal_mask

TOKENS = torch.tensor([1, 2, 3, 1, 2, 3])  # "abcabc": one repeat of a 3-token sequence


def pattern(rows):
    """A (T, T) attention pattern from {query: {key: weight}}."""
    T = len(rows)
    A = torch.zeros(T, T)
    for i, row in rows.items():
        for j, w in row.items():
            A[i, j] = w
    return A


def tl_reference_scores(A, tokens, exclude_bos, exclude_current_token):
    """TransformerLens's head detector, element by element: detection patterns built as it
    builds them (duplicate: equal tokens, diagonal zeroed, tril; induction: duplicate rolled
    one column right, first column zeroed, tril), then sum(A * D) / sum(A) after exclusions."""
    T = len(tokens)
    t = tokens.tolist()
    dup = [[1.0 if (t[i] == t[j] and i != j and j <= i) else 0.0 for j in range(T)]
           for i in range(T)]
    patterns = {
        "previous_token": [[1.0 if j == i - 1 else 0.0 for j in range(T)] for i in range(T)],
        "duplicate_token": dup,
        "induction": [[(dup[i][j - 1] if j >= 1 else 0.0) if j <= i else 0.0
                       for j in range(T)] for i in range(T)],
    }
    A = A.clone().double()
    if exclude_bos:
        A[:, 0] = 0
    if exclude_current_token:
        A.fill_diagonal_(0)
    return {name: float((A * torch.tensor(D, dtype=torch.float64)).sum() / A.sum())
            for name, D in patterns.items()}


# ----------------------------------------------------------------------------- patterns

def test_detection_patterns_by_hand():
    D = detection_patterns(TOKENS)
    assert D["previous_token"].nonzero().tolist() == [[1, 0], [2, 1], [3, 2], [4, 3], [5, 4]]
    assert D["duplicate_token"].nonzero().tolist() == [[3, 0], [4, 1], [5, 2]]
    assert D["induction"].nonzero().tolist() == [[3, 1], [4, 2], [5, 3]]


def test_induction_pattern_keeps_the_diagonal_when_a_token_repeats_itself():
    # "aa": at query 1 the earlier copy (key 0) was followed by key 1, the query itself.
    D = detection_patterns(torch.tensor([7, 7]))
    assert D["duplicate_token"].tolist() == [[False, False], [True, False]]
    assert D["induction"].tolist() == [[False, False], [False, True]]


def test_pure_previous_token_pattern():
    A = pattern({0: {0: 1}, 1: {0: 1}, 2: {1: 1}, 3: {2: 1}, 4: {3: 1}, 5: {4: 1}})
    s = scores_from_patterns(A, TOKENS)
    # Query 0 can only attend to itself: 5 of the 6 rows' attention is on the previous token.
    assert s["previous_token"].item() == pytest.approx(5 / 6)
    assert s["duplicate_token"].item() == 0 and s["induction"].item() == 0
    # Without the diagonal, row 0 drops out: all the remaining attention is previous-token.
    s = scores_from_patterns(A, TOKENS, exclude_current_token=True)
    assert s["previous_token"].item() == pytest.approx(1.0)
    # Without column 0, rows 0 and 1 drop out: 4 of 4 left.
    s = scores_from_patterns(A, TOKENS, exclude_bos=True)
    assert s["previous_token"].item() == pytest.approx(1.0)


def test_pure_induction_pattern_and_exclusions():
    # Before the repeat the head rests on position 0; in the repeat it looks one past the
    # earlier copy of the current token.
    A = pattern({0: {0: 1}, 1: {0: 1}, 2: {0: 1}, 3: {1: 1}, 4: {2: 1}, 5: {3: 1}})
    s = scores_from_patterns(A, TOKENS)
    assert s["induction"].item() == pytest.approx(3 / 6)
    assert s["previous_token"].item() == pytest.approx(1 / 6)  # row 1 -> key 0
    assert s["duplicate_token"].item() == 0
    s = scores_from_patterns(A, TOKENS, exclude_bos=True)
    assert s["induction"].item() == pytest.approx(1.0)
    assert s["previous_token"].item() == 0
    s = scores_from_patterns(A, TOKENS, exclude_current_token=True)
    assert s["induction"].item() == pytest.approx(3 / 5)
    assert s["previous_token"].item() == pytest.approx(1 / 5)
    s = scores_from_patterns(A, TOKENS, exclude_bos=True, exclude_current_token=True)
    assert s["induction"].item() == pytest.approx(1.0)


def test_split_attention_pattern():
    # Half on self, half on the previous token (row 0 all on itself); duplicate rows 3..5
    # put half on the earlier copy instead: 0.5 * 3 duplicate hits out of 6.
    A = pattern({0: {0: 1}, 1: {1: .5, 0: .5}, 2: {2: .5, 1: .5}, 3: {3: .5, 0: .5},
                 4: {4: .5, 1: .5}, 5: {5: .5, 2: .5}})
    s = scores_from_patterns(A, TOKENS)
    assert s["previous_token"].item() == pytest.approx(1.0 / 6)
    assert s["duplicate_token"].item() == pytest.approx(1.5 / 6)
    s = scores_from_patterns(A, TOKENS, exclude_current_token=True)
    assert s["duplicate_token"].item() == pytest.approx(1.5 / 2.5)
    assert s["previous_token"].item() == pytest.approx(1.0 / 2.5)


def test_uniform_attention_is_the_chance_level():
    # A uniform causal head on "aaaa": row i spreads 1/(i+1) over keys 0..i.
    tokens = torch.tensor([4, 4, 4, 4])
    chance = chance_scores(tokens)
    # previous: rows 1..3 each give 1/(i+1) to key i-1.
    assert chance["previous_token"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 4)
    # duplicate: every earlier key matches, i/(i+1) per row.
    assert chance["duplicate_token"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 4) / 4)
    # induction: keys 1..i, i/(i+1) per row as well.
    assert chance["induction"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 4) / 4)


@pytest.mark.parametrize("exclude_bos", [False, True])
@pytest.mark.parametrize("exclude_current_token", [False, True])
def test_scores_match_the_transformerlens_algorithm_on_random_patterns(
    exclude_bos, exclude_current_token
):
    g = torch.Generator().manual_seed(0)
    for T in (3, 5, 17):  # with T = 2 both exclusions leave no attention (see below)
        tokens = torch.randint(4, (T,), generator=g)  # small vocab: plenty of duplicates
        logits = torch.randn(T, T, generator=g)
        A = torch.softmax(logits.masked_fill(~causal_mask(T, T), float("-inf")), dim=-1)
        got = scores_from_patterns(A.double(), tokens, exclude_bos, exclude_current_token)
        want = tl_reference_scores(A, tokens, exclude_bos, exclude_current_token)
        for name in SCORE_NAMES:
            assert got[name].item() == pytest.approx(want[name], abs=1e-12), name


def test_no_attention_left_scores_nan():
    A = pattern({0: {0: 1}, 1: {0: 0.3, 1: 0.7}})
    s = scores_from_patterns(A, torch.tensor([1, 1]), True, True)
    assert all(math.isnan(s[name].item()) for name in SCORE_NAMES)


def test_scores_broadcast_over_leading_dims_and_leave_the_input_alone():
    g = torch.Generator().manual_seed(1)
    T = 8
    A = torch.softmax(torch.randn(3, 2, 4, T, T, generator=g).masked_fill(
        ~causal_mask(T, T), float("-inf")), dim=-1)  # (layers, batch, heads, T, T)
    tokens = torch.randint(3, (2, T), generator=g)
    before = A.clone()
    got = scores_from_patterns(A, tokens[:, None, :], exclude_bos=True,
                                      exclude_current_token=True)
    assert torch.equal(A, before)  # exclusions work on a copy
    assert got["induction"].shape == (3, 2, 4)
    one = scores_from_patterns(A[2, 1, 3], tokens[1], True, True)
    for name in SCORE_NAMES:
        assert got[name][2, 1, 3].item() == pytest.approx(one[name].item())


def test_scores_reject_mismatched_shapes():
    with pytest.raises(UsageError):
        scores_from_patterns(torch.zeros(4, 5), torch.zeros(5, dtype=torch.long))
    with pytest.raises(UsageError):
        scores_from_patterns(torch.zeros(4, 4), torch.zeros(5, dtype=torch.long))


# ----------------------------------------------------------------------------- head scores

def test_head_scores_need_two_tokens(preset_model):
    with pytest.raises(UsageError, match="at least 2"):
        head_scores(preset_model(), torch.tensor([3]))


def test_head_scores_average_the_batch_and_pass_the_exclusions(preset_model):
    model = preset_model("tiny-llama")
    idx = torch.randint(5, (3, 16), generator=torch.Generator().manual_seed(2))
    batch = head_scores(model, idx, exclude_bos=True, exclude_current_token=True)
    singles = [head_scores(model, row, exclude_bos=True, exclude_current_token=True)
               for row in idx]
    for name in SCORE_NAMES:
        assert batch[name].shape == (2, 4)
        mean = torch.stack([s[name] for s in singles]).mean(0)
        assert torch.allclose(batch[name], mean, atol=1e-6)
    weights = capture_attention(model, idx[0])
    direct = scores_from_patterns(weights[:, 0], idx[0], True, True)
    assert torch.allclose(singles[0]["induction"], direct["induction"])


# ----------------------------------------------------------------------------- ablation

def _zeroed_proj_copy(model, layer, head, mean=None):
    """The model with head's columns of the output projection zeroed (and, for a mean,
    their contribution folded into the bias): what ablating the head must equal."""
    clone = copy.deepcopy(model)
    proj = clone.blocks[layer].attn.proj
    hs = clone.config.head_dim
    cols = slice(head * hs, (head + 1) * hs)
    with torch.no_grad():
        if mean is not None:
            proj.bias += proj.weight[:, cols] @ mean
        proj.weight[:, cols] = 0
    return clone


def test_zero_ablation_equals_zeroing_the_heads_projection_columns(preset_model):
    model = preset_model("tiny-gpt2")
    idx = torch.randint(97, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), ablate_heads(model, [(1, 2)]):
        got, _ = model(idx)
    with torch.no_grad():
        want, _ = _zeroed_proj_copy(model, 1, 2)(idx)
        clean, _ = model(idx)
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(got, clean, atol=1e-5)
    assert not any(m.heads._forward_hooks for m in attention_modules(model))


@pytest.mark.parametrize("preset", ["tiny-gpt2", "tiny-llama"])
def test_a_plain_forward_hook_on_the_heads_point_sees_and_ablates_heads(preset, preset_model):
    """attn.heads is an ordinary hook point: a torch forward hook sees (B, nh, T, hs), and
    returning a tensor with a head zeroed is what ablate_heads does."""
    model = preset_model(preset)
    idx = torch.randint(97, (2, 10), generator=torch.Generator().manual_seed(8))
    shapes = []

    def zero_head_2(_module, _args, y):
        shapes.append(tuple(y.shape))
        y = y.clone()
        y[:, 2] = 0
        return y

    handle = model.blocks[1].attn.heads.register_forward_hook(zero_head_2)
    try:
        with torch.no_grad():
            hooked, _ = model(idx)
    finally:
        handle.remove()
    assert shapes == [(2, model.config.n_head, 10, model.config.head_dim)]
    with torch.no_grad(), ablate_heads(model, [(1, 2)]):
        ablated, _ = model(idx)
    with torch.no_grad():
        clean, _ = model(idx)
    assert torch.equal(hooked, ablated)
    assert not torch.allclose(hooked, clean, atol=1e-5)


def test_mean_ablation_uses_the_heads_mean_over_batch_and_positions(preset_model):
    model = preset_model("tiny-gpt2")
    idx = torch.randint(97, (2, 10), generator=torch.Generator().manual_seed(5))
    seen = {}
    handle = model.blocks[0].attn.heads.register_forward_hook(
        lambda _m, _a, y: seen.setdefault("y", y))  # (B, nh, T, hs)
    with torch.no_grad():
        model(idx)
    handle.remove()
    mean = seen["y"][:, 3].mean(dim=(0, 1))  # (hs,)
    assert torch.allclose(mean_head_outputs(model, idx)[0][3], mean, atol=1e-6)
    with torch.no_grad(), ablate_heads(model, [(0, 3)], "mean", reference_idx=idx):
        got, _ = model(idx)
    with torch.no_grad():
        want, _ = _zeroed_proj_copy(model, 0, 3, mean)(idx)
    assert torch.allclose(got, want, atol=1e-5)


def test_ablations_nest_and_unwind(preset_model):
    model = preset_model("tiny-gpt2")
    idx = torch.randint(97, (1, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad(), ablate_heads(model, [(0, 0)]):
        with ablate_heads(model, [(0, 1)]):
            both, _ = model(idx)
        outer, _ = model(idx)
    with torch.no_grad(), ablate_heads(model, [(0, 0), (0, 1)]):
        together, _ = model(idx)
    with torch.no_grad(), ablate_heads(model, [(0, 0)]):
        alone, _ = model(idx)
    assert torch.allclose(both, together, atol=1e-6)
    assert torch.allclose(outer, alone, atol=1e-6)
    assert not any(m.heads._forward_hooks for m in attention_modules(model))


def test_ablation_deltas_are_loss_differences(preset_model):
    model = preset_model("tiny-gpt2")
    idx = torch.randint(97, (2, 12), generator=torch.Generator().manual_seed(7))
    targets = next_token_targets(idx)
    assert targets[:, -1].eq(-1).all() and torch.equal(targets[:, :-1], idx[:, 1:])
    for mode in ABLATION_MODES:
        deltas = ablation_deltas(model, idx, mode=mode)
        assert deltas.shape == (2, 4)
        with torch.no_grad():
            _, clean = model(idx, targets)
            with ablate_heads(model, [(1, 1)], mode, reference_idx=idx):
                _, ablated = model(idx, targets)
        assert deltas[1, 1].item() == pytest.approx((ablated - clean).item(), abs=1e-6)
    explicit = ablation_deltas(model, idx, targets=targets)
    assert torch.allclose(explicit, ablation_deltas(model, idx))


@pytest.mark.parametrize("heads, message", [
    ([(2, 0)], "layer 2 is out of range"),
    ([(-1, 0)], "layer -1 is out of range"),
    ([(0, 4)], "head 4 is out of range"),
    ([(0,)], "pair"),
])
def test_bad_heads_are_usage_errors(heads, message, preset_model):
    with pytest.raises(UsageError, match=message), ablate_heads(preset_model(), heads):
        pass


def test_bad_ablation_settings_are_usage_errors(preset_model):
    model = preset_model()
    with pytest.raises(UsageError, match="reference_idx"), \
            ablate_heads(model, [(0, 0)], "mean"):
        pass
    with pytest.raises(UsageError, match="unknown ablation mode"), \
            ablate_heads(model, [(0, 0)], "noise"):
        pass
    with pytest.raises(UsageError, match="unknown ablation mode"):
        ablation_deltas(model, torch.tensor([1, 2, 3]), mode="noise")
    with pytest.raises(UsageError, match="targets"):
        ablation_deltas(model, torch.tensor([[1, 2, 3]]), targets=torch.tensor([[1, 2]]))


# ----------------------------------------------------------------------------- probe

def test_induction_probe_on_an_untrained_model(preset_model):
    model = preset_model("tiny-gpt2")
    out = induction_probe(model, 8, batch=3, generator=torch.Generator().manual_seed(0))
    tokens = out["tokens"]
    assert tokens.shape == (3, 16) and torch.equal(tokens[:, :8], tokens[:, 8:])
    assert out["induction"].shape == (2, 4)
    with torch.no_grad():
        logits, _ = model(tokens)
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:],
                                reduction="none").mean(0)
    assert torch.allclose(out["per_token_loss"], per_token, atol=1e-5)
    assert out["loss_first_half"] == pytest.approx(per_token[:7].mean().item(), abs=1e-5)
    assert out["loss_second_half"] == pytest.approx(per_token[8:].mean().item(), abs=1e-5)
    # Untrained: no in-context learning, both halves near ln(vocab).
    assert abs(out["loss_first_half"] - math.log(97)) < 0.2
    assert abs(out["loss_second_half"] - math.log(97)) < 0.2
    again = induction_probe(model, 8, batch=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again["tokens"], tokens)


def test_induction_probe_rejects_a_repeat_longer_than_the_context(preset_model):
    with pytest.raises(UsageError, match="at most 16"):
        induction_probe(preset_model(), 17)
    with pytest.raises(UsageError, match="at least 2"):
        induction_probe(preset_model(), 1)


# ----------------------------------------------------------------------------- training


def test_training_rows_repeat_at_varying_offsets(induction_batch):
    g = torch.Generator().manual_seed(0)
    x = induction_batch(g, 256, 64, 64, (8, 24))
    periods, starts = set(), set()
    for row in x:
        # the smallest period p with row[t] == row[t - p] over the row's tail
        p = next(p for p in range(8, 25) if torch.equal(row[-p:], row[-2 * p:-p]))
        periods.add(p)
        starts.add(next(t for t in range(64) if torch.equal(row[t + p:], row[t:64 - p])))
        assert len(set(row[-p:].tolist())) == p  # the segment's tokens are distinct
    assert len(periods) > 10 and len(starts) > 10  # position alone cannot predict a copy


@pytest.mark.slow
def test_training_grows_a_two_layer_induction_circuit(induction):
    """The training rows (tests/interp/conftest.py) are random segments of distinct tokens,
    8 to 24 long, repeated to the end of the row after a random-length prefix, so where a
    copy's next token sits is known only from content: a fixed look-back by position cannot
    predict it. Measured (3 seeds): the two-layer circuit forms in a phase change at steps
    600-800; afterwards both layer-1 heads are induction heads (0.37-0.42) and both layer-0
    heads previous-token heads (0.27-0.44), which is why the composition check below
    ablates layer 0's previous-token heads together."""
    model, half = induction.model, induction.half
    probe = induction_probe(model, half, batch=8, generator=torch.Generator().manual_seed(2))
    tokens = probe["tokens"]
    scores = head_scores(model, tokens)
    chance = chance_scores(tokens)
    # Chance (uniform attention) on this probe: induction 0.014, previous-token 0.058.
    assert chance["induction"] < 0.02 and chance["previous_token"] < 0.06
    # The induction head sits in layer 1 (so it can read layer 0's output), far above chance.
    induction = scores["induction"]
    layer, head = divmod(int(induction.argmax()), induction.shape[1])
    assert layer == 1 and float(induction[1, head]) > 0.2, induction
    # A fixed positional look-back would fail on a repeat of another length; this head does
    # not: it keys on content.
    for other in (12, 20):
        again = induction_probe(model, other, batch=8,
                                       generator=torch.Generator().manual_seed(3))
        assert float(again["induction"][1, head]) > 0.2, (other, again["induction"])
    # In-context learning: the repeat is far cheaper than the first pass (ln 256 = 5.5).
    assert probe["loss_first_half"] > 5.0
    assert probe["loss_second_half"] < probe["loss_first_half"] - 2.0
    # Layer 0 holds the previous-token heads (the other half of the circuit).
    previous = scores["previous_token"][0]
    assert float(previous.max()) > 0.35 > 5 * chance["previous_token"], previous
    floor = 4 * chance["previous_token"]
    prev_heads = [(0, h) for h in range(len(previous)) if previous[h] > floor]
    best_prev = (0, int(previous.argmax()))

    def ablated(heads):
        with ablate_heads(model, heads):
            out = induction_probe(model, half, batch=8,
                                         generator=torch.Generator().manual_seed(2))
        return float(out["induction"][1, head]), out["loss_second_half"]

    clean_score, clean_loss = float(induction[1, head]), probe["loss_second_half"]
    # Composition: without layer 0's previous-token heads the layer-1 head no longer finds
    # the token after the earlier copy, and the repeat costs more than a nat per token.
    score, loss = ablated(prev_heads)
    assert score < clean_score / 2 and loss > clean_loss + 1.0, (prev_heads, score, loss)
    # The strongest previous-token head alone already matters, to score and loss.
    score, loss = ablated([best_prev])
    assert score < 0.8 * clean_score and loss > clean_loss + 1.0, (best_prev, score, loss)
    # And the induction head itself carries the repeat.
    _, loss = ablated([(1, head)])
    assert loss > clean_loss + 1.0, loss
