"""The verdict rule (gptlab.experiments.claims): every verdict, its edge cases (one seed,
equal means, NaN / inf / None), and claims judged on results."""

from __future__ import annotations

import math

import pytest

from gptlab.experiments.claims import (
    CONTRADICTED,
    HELD,
    HELD_WEAKLY,
    NOT_SEEN,
    UNDECIDED,
    Claim,
    Measured,
    evaluate,
    judge,
    per_seed,
    table,
    verdict_text,
)


@pytest.mark.parametrize(("effects", "direction", "smallest", "verdict"), [
    ([0.50, 0.60], 1, 0.0, HELD),            # mean 0.55 > 2 x spread 0.2
    ([0.10, 0.60], 1, 0.0, HELD_WEAKLY),     # mean 0.35 <= 2 x spread 1.0
    ([-0.50, -0.60], 1, 0.0, CONTRADICTED),  # the opposite, beyond the spread
    ([-0.10, -0.60], 1, 0.0, NOT_SEEN),      # the opposite, within it
    ([-0.50, -0.60], -1, 0.0, HELD),         # a claimed decrease
    ([0.50, 0.60], -1, 0.0, CONTRADICTED),
    ([0.01, 0.02], 1, 0.05, NOT_SEEN),       # beyond the spread but below the smallest effect
    ([-0.01, -0.02], 1, 0.05, NOT_SEEN),
    ([0.30, 0.30, 0.30], 1, 0.0, HELD),      # no spread at all: any effect is beyond it
    ([0.2, 0.3, 0.4], 1, 0.0, HELD_WEAKLY),  # mean 0.3 <= 2 x spread 0.4
])
def test_the_rule(effects, direction, smallest, verdict):
    judged = judge(effects, direction, smallest)
    assert judged["verdict"] == verdict
    assert judged["mean"] == pytest.approx(sum(effects) / len(effects))
    assert judged["spread"] == pytest.approx(max(effects) - min(effects))
    assert judged["margin"] == pytest.approx(2 * judged["spread"])


def test_the_margin_is_twice_the_spread_exactly():
    # mean 0.3, spread 0.15: 0.3 is not larger than 2 x 0.15
    assert judge([0.225, 0.375])["verdict"] == HELD_WEAKLY
    assert judge([0.23, 0.37])["verdict"] == HELD


@pytest.mark.parametrize("effects", [[0.0, 0.0], [-0.2, 0.2], [0.0], [0.2 - 0.15, 0.1 - 0.15]])
def test_equal_means_are_no_effect(effects):
    assert judge(effects)["verdict"] == NOT_SEEN
    assert judge(effects, direction=-1)["verdict"] == NOT_SEEN
    assert judge(effects)["mean"] == 0.0


def test_one_seed_is_at_most_held_weakly_and_never_contradicted():
    assert judge([5.0])["verdict"] == HELD_WEAKLY
    assert judge([-5.0])["verdict"] == NOT_SEEN
    assert judge([0.01], smallest=0.05)["verdict"] == NOT_SEEN
    judged = judge([5.0])
    assert judged["spread"] is None and judged["margin"] is None
    assert "one seed" in judged["rule"]


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf])
def test_a_missing_number_is_undecided(bad):
    judged = judge([0.5, bad])
    assert judged["verdict"] == UNDECIDED and judged["mean"] is None
    assert "diverged" in judged["rule"]
    assert judge([bad])["verdict"] == UNDECIDED


def test_no_seeds_is_undecided():
    assert judge([])["verdict"] == UNDECIDED


@pytest.mark.parametrize(("field", "value"), [("direction", 0), ("smallest", -1.0),
                                               ("smallest", math.nan)])
def test_a_claim_refuses_a_bad_rule(field, value):
    with pytest.raises(ValueError, match=field):
        Claim("k", "s", "p", "q", lambda r: Measured([], [], ""), **{field: value})


def _claim(key, measure, **kw):
    return Claim(key, f"{key} sentence", f"{key} paper", f"{key} quantity", measure, **kw)


def test_evaluate_carries_the_numbers_and_the_seeds():
    claims = [_claim("up", lambda r: Measured([1, 2], [r["a"], r["b"]], "a and b")),
              _claim("gone", lambda r: Measured([1], [r["missing"]], "never")),
              _claim("down", lambda r: Measured([1, 2], [-1.0, -1.1], "x"), direction=-1)]
    judged = evaluate(claims, {"a": 1.0, "b": 1.2})
    assert [c["verdict"] for c in judged] == [HELD, UNDECIDED, HELD]
    assert judged[0]["seeds"] == [1, 2] and judged[0]["effects"] == [1.0, 1.2]
    assert judged[0]["this_run"] == "a and b" and judged[0]["sentence"] == "up sentence"
    assert "not measurable" in judged[1]["this_run"]
    header, rows = table(judged)
    assert header == ["the claim", "the paper", "this run", "verdict"]
    assert rows[0][:3] == ["up sentence", "up paper", "a and b"]
    assert rows[0][3].startswith("held (+1.1 vs 2 x spread 0.2")
    assert rows[1][3].startswith("undecided: ")


def test_verdict_text_names_one_seed():
    judged = evaluate([_claim("one", lambda r: Measured([7], [0.4], "x"))], {})
    assert verdict_text(judged[0]) == "held weakly (+0.4; one seed, 7: no spread)"


def test_per_seed_orders_by_seed():
    assert per_seed({1338: 2.0, 1337: None}) == ([1337, 1338], [None, 2.0])
