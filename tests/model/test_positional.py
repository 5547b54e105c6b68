"""Positions (gptlab.model.positional): the sinusoidal formula at chosen points, RoPE's
relative-position property and its rotation of each pair, linear scaling's interpolation."""

import math

import pytest
import torch

from gptlab.model.positional import sinusoidal_table


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


def test_linear_scaling_is_position_interpolation(rope):
    plain, scaled = rope(), rope(scaling={"type": "linear", "factor": 4.0})
    cos_scaled, _ = scaled(torch.tensor([8]))
    cos_plain, _ = plain(torch.tensor([2]))  # position 8 / 4
    torch.testing.assert_close(cos_scaled, cos_plain)
