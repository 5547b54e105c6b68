"""Positions (gptlab.model.positional): the sinusoidal formula at chosen points, RoPE's
relative-position property and its rotation of each pair, linear scaling's interpolation,
ALiBi's slopes against BLOOM's and its bias's dependence on relative position alone, and
what runs past the training length."""

import math

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.model.gpt import GPT
from gptlab.model.positional import (
    AlibiBias,
    ContextWarning,
    RotaryEmbedding,
    alibi_slopes,
    apply_rope,
    check_context,
    rotate_half,
    sinusoidal_table,
)


@pytest.mark.parametrize("pos,i", [(0, 0), (1, 0), (7, 3), (50, 10), (1000, 63)])
def test_sinusoidal_values_equal_the_2017_formula(pos, i):
    d = 128
    table = sinusoidal_table(torch.arange(1001), d)
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_position_zero_alternates_zero_and_one():
    row = sinusoidal_table(torch.tensor([0]), 8)[0]
    assert row.tolist() == [0.0, 1.0] * 4


@pytest.mark.parametrize("m,n", [(0, 5), (3, 8), (17, 22), (40, 3), (100, 100)])
def test_rope_score_depends_only_on_relative_position(m, n, rope, rotate):
    # <R_m q, R_n k> = <q, R_{n-m} k>
    rotary = rope()
    g = torch.Generator().manual_seed(m * 31 + n)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g,
                                                                          dtype=torch.float64)
    left = rotate(rotary, q.float(), m).double() @ rotate(rotary, k.float(), n).double()
    right = q @ rotate(rotary, k.float(), n - m).double()
    assert left.item() == pytest.approx(right.item(), abs=1e-4)


def test_rope_rotates_pairs_i_and_i_plus_half_by_m_theta(rope, rotate):
    rotary, m, i = rope(head_dim=8), 3, 1
    x = torch.zeros(8)
    x[i] = 1.0  # the unit vector of the pair's first coordinate
    theta = 10000 ** (-2 * i / 8)
    out = rotate(rotary, x, m)
    assert out[i].item() == pytest.approx(math.cos(m * theta), abs=1e-6)
    assert out[i + 4].item() == pytest.approx(math.sin(m * theta), abs=1e-6)
    assert torch.linalg.norm(out).item() == pytest.approx(1.0, abs=1e-6)  # a rotation


def test_rope_of_every_head_at_once_is_x_cos_plus_rotate_half_x_sin_bit_for_bit(small_config):
    # attention rotates q and k laid out (B, T, heads, hs) with the tables as (T, 1, hs)
    cos, sin = RotaryEmbedding(small_config(pos_encoding="rope"))(torch.arange(9))
    x = torch.randn(2, 9, 3, cos.shape[-1])
    by_head = x.transpose(1, 2)  # (B, heads, T, hs), the tables broadcast as (T, hs)
    expected = (by_head * cos + rotate_half(by_head) * sin).transpose(1, 2)
    assert torch.equal(apply_rope(x, cos[:, None], sin[:, None]), expected)


def test_linear_scaling_is_position_interpolation(rope):
    plain, scaled = rope(), rope(scaling={"type": "linear", "factor": 4.0})
    cos_scaled, _ = scaled(torch.tensor([8]))
    cos_plain, _ = plain(torch.tensor([2]))  # position 8 / 4
    torch.testing.assert_close(cos_scaled, cos_plain)


# ----------------------------------------------------------------------------- ALiBi


def test_alibi_slopes_are_the_papers_geometric_sequence():
    assert alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]  # 1/2 ... 1/256
    # not a power of two: 4 heads' slopes, then every other one of 8 heads' (Press et al.)
    assert alibi_slopes(6).tolist() == [2.0 ** -k for k in (2, 4, 6, 8, 1, 3)]


@pytest.mark.oracle
@pytest.mark.parametrize("n_head", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64])
def test_alibi_slopes_equal_blooms(n_head):
    """transformers' BLOOM builds its bias as slope_h * key position; its slope is the
    bias at key position 1. BLOOM raises a float32-rounded base to integer powers, which
    drifts by a few float32 ulps at high powers (ours is each power of two rounded once):
    equal to 1e-6 relative, and exactly where the slopes are representable."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    theirs = build_alibi_tensor(torch.ones(1, 2), n_head, torch.float32)[:, 0, 1]
    torch.testing.assert_close(alibi_slopes(n_head), theirs, rtol=1e-6, atol=0)
    if 8 % n_head == 0:  # 8 / n_head a whole number: every slope an exact power of two
        assert torch.equal(alibi_slopes(n_head), theirs)


def test_alibi_bias_depends_only_on_the_distance(small_config):
    alibi = AlibiBias(small_config(pos_encoding="alibi", n_head=5, n_kv_head=5, n_embd=20))
    full = alibi(12, 12).double()  # (nh, 12, 12)
    i, j = torch.meshgrid(torch.arange(12), torch.arange(12), indexing="ij")
    expected = -alibi.slopes.double()[:, None, None] * (i - j)[None]
    torch.testing.assert_close(full, expected, rtol=0, atol=0)
    torch.testing.assert_close(alibi(3, 12), alibi(12, 12)[:, -3:])  # queries after a cache


@pytest.mark.parametrize("encoding, invariant", [("alibi", True), ("rope", True),
                                                 ("learned", False), ("sinusoidal", False)])
def test_relative_encodings_ignore_where_the_text_starts(encoding, invariant, small_config,
                                                         seeded_model):
    """Left padding moves every token 5 positions on: ALiBi and RoPE, whose scores depend
    on relative positions alone, give the same logits; absolute encodings do not."""
    model = seeded_model(small_config(pos_encoding=encoding))
    idx = torch.randint(0, 23, (1, 9), generator=torch.Generator().manual_seed(5))
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), idx], dim=1)
    mask = torch.cat([torch.zeros(1, 5), torch.ones(1, 9)], dim=1)
    with torch.no_grad():
        plain, _ = model(idx)
        shifted, _ = model(padded, attention_mask=mask)
    same = torch.allclose(plain, shifted[:, 5:], atol=1e-5)
    assert same == invariant


def test_alibi_model_has_no_position_parameters(small_config):
    alibi = GPT(small_config(pos_encoding="alibi"))
    none = GPT(small_config(pos_encoding="none"))
    assert alibi.num_parameters() == none.num_parameters()
    assert alibi.state_dict().keys() == none.state_dict().keys()  # slopes are not saved


# ----------------------------------------------------------------------------- past block_size


def test_learned_positions_refuse_in_the_chapters_words(small_config):
    with pytest.raises(UsageError, match=r"block_size = 16 rows, for positions 0..15, and "
                                         r"there is no row for position 16"):
        check_context(small_config(pos_encoding="learned"), 17)
    assert check_context(small_config(pos_encoding="learned"), 16) is None


@pytest.mark.parametrize("encoding", ["sinusoidal", "rope", "alibi", "none"])
def test_other_encodings_run_past_block_size_with_a_warning(encoding, small_config):
    warning = check_context(small_config(pos_encoding=encoding), 64)
    assert warning == ("context 64 is longer than the 16 positions the model was trained on "
                       "(block_size): it never saw positions 16..63")
    model = GPT(small_config(pos_encoding=encoding))
    with pytest.warns(ContextWarning, match="never saw positions 16..63"):
        model.set_context(64)
    assert model.context == 64 and model.config.block_size == 16  # the config is untouched
