"""The verdict rule (gptlab.experiments.claims): every verdict, its edge cases (one seed,
equal means, NaN / inf / None), claims judged on results, the preconditions of the claims
that read a mechanism, the units the effects run over, the verdict lines with every term
of the rule, the one line of a run that decides nothing, and the terminal's claims within
100 columns."""

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
    Precondition,
    evaluate,
    judge,
    table,
    text,
    undecided_line,
    units_text,
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
    assert all("precondition" not in c for c in judged)  # these read no mechanism
    header, rows = table(judged)
    assert header == ["the claim", "the paper", "this run", "verdict"]
    assert rows[0][:3] == ["up sentence", "up paper", "seeds 1/2: a and b"]
    assert rows[0][3] == judged[0]["verdict_line"] == \
        "held: +1.1 (needs > 0.4, twice the spread over seeds, and ≥ 0)"
    assert rows[1][3].startswith("undecided: ")


def test_a_file_from_before_verdict_lines_is_shown_as_it_was():
    judged = evaluate([_claim("one", lambda r: Measured([7], [0.4], "x"))], {})
    assert verdict_text(judged[0]) == "held weakly (+0.4; one seed, 7: no spread)"
    old = {k: v for k, v in judged[0].items() if k not in ("verdict_line", "units")}
    assert table([old])[1][0][2:] == ["x", "held weakly (+0.4; one seed, 7: no spread)"]


# ----------------------------------------------------------------------------- verdict lines


@pytest.mark.parametrize(("effects", "direction", "smallest", "line"), [
    # the example: in the direction, beyond twice the spread, below the smallest
    ([0.0245, 0.0395], 1, 0.04, "not seen: +0.032 (needs > 0.03, twice the spread over "
                                "seeds, and ≥ 0.04)"),
    ([0.50, 0.60], 1, 0.05, "held: +0.55 (needs > 0.2, twice the spread over seeds, and "
                            "≥ 0.05)"),
    ([0.10, 0.60], 1, 0.0, "held weakly: +0.35 (needs > 1, twice the spread over seeds, and "
                           "≥ 0)"),
    ([-0.50, -0.60], 1, 0.0, "contradicted: -0.55 (needs > 0.2, twice the spread over "
                             "seeds, and ≥ 0)"),
    # a claimed decrease: its bounds are negative
    ([-1.2, -1.4], -1, 1.0, "held: -1.3 (needs < -0.4, twice the spread over seeds, and "
                            "≤ -1)"),
    ([0.4], 1, 0.05, "held weakly: +0.4 (one seed: no spread, at most held weakly; needs "
                     "≥ 0.05)"),
    ([-0.4], 1, 0.0, "not seen: -0.4 (one seed: no spread, at most held weakly; needs > 0)"),
    ([0.5, None], 1, 0.0, "undecided: a seed has no finite number (NaN, inf, a diverged "
                          "run, or a number the run could not measure: this run's column "
                          "says which)"),
])
def test_the_verdict_line_gives_every_term_of_the_rule(effects, direction, smallest, line):
    judged = evaluate([_claim("k", lambda r: Measured(list(range(len(effects))), effects, "x"),
                              direction=direction, smallest=smallest)], {})
    assert judged[0]["verdict_line"] == line
    assert line.startswith(judged[0]["verdict"] + ":")


# ----------------------------------------------------------------------------- units


@pytest.mark.parametrize(("unit", "names", "shown"), [
    ("seeds", [1337, 1338, 1339], "seeds 1337/1338/1339"),
    ("slices", [0, 1, 2], "slices 0/1/2"),
    ("lengths", [64, 128, 256], "n = 64/128/256"),
    ("repeats", [0, 1, 2], "repeats 0/1/2"),
])
def test_units_are_named_truly(unit, names, shown):
    assert units_text(unit, names) == shown
    judged = evaluate([_claim("k", lambda r: Measured(names, [0.5, 0.6, 0.55], "x",
                                                      unit=unit))], {})[0]
    assert judged["units"] == shown and judged["seeds"] == names
    assert f"twice the spread over {unit}" in judged["verdict_line"]
    assert f"spread over {unit}" in judged["rule"]
    assert table([judged])[1][0][2] == f"{shown}: x"
    one = evaluate([_claim("k", lambda r: Measured(names[:1], [0.5], "x", unit=unit))], {})[0]
    assert f"(one {unit[:-1]}: no spread" in one["verdict_line"]


def test_a_unit_that_is_no_kind_of_unit_is_refused():
    with pytest.raises(ValueError, match="unit"):
        Measured([1], [0.5], "x", unit="runs")


# ----------------------------------------------------------------------------- preconditions


LEARNED = Precondition("the model learned the task", "final loss", lambda r: r["loss"],
                       lambda r: r["bigram"], below=True, why="a bigram table's loss")


def _gated(**kw):
    return _claim("gated", lambda r: Measured([1, 2], [0.5, 0.6], "heads read"),
                  precondition=LEARNED, **kw)


def test_an_unmet_precondition_makes_the_claim_undecided_with_why():
    # a model that did not learn: its heads' effect would be "held", and is not judged
    [judged] = evaluate([_gated()], {"loss": 4.16, "bigram": 2.47})
    assert judged["verdict"] == UNDECIDED
    assert judged["precondition"] == {
        "text": "the model learned the task (final loss 4.16, needs < 2.47: a bigram "
                "table's loss)", "value": 4.16, "threshold": 2.47, "met": False}
    assert judged["verdict_line"] == ("undecided: precondition not met: the model learned "
                                      "the task (final loss 4.16, needs < 2.47: a bigram "
                                      "table's loss)")
    assert judged["rule"].startswith("precondition not met: ")
    # the effect is still measured, for the record
    assert judged["effects"] == [0.5, 0.6] and judged["mean"] == pytest.approx(0.55)


def test_a_met_precondition_leaves_the_verdict_to_the_rule():
    [judged] = evaluate([_gated()], {"loss": 1.9, "bigram": 2.47})
    assert judged["verdict"] == HELD and judged["precondition"]["met"] is True
    assert judged["verdict_line"].startswith("held: +0.55 (needs > 0.2")
    header, rows = table([judged])
    assert header == ["the claim", "the paper", "this run", "precondition", "verdict"]
    assert rows[0][3].startswith("met: the model learned the task (final loss 1.9")


@pytest.mark.parametrize("results", [{"loss": 2.47, "bigram": 2.47},  # at the bar: not under
                                     {"loss": math.nan, "bigram": 2.47},
                                     {"loss": None, "bigram": 2.47},
                                     {"bigram": 2.47}])  # no number at all
def test_a_precondition_without_a_number_under_its_bar_is_unmet(results):
    [judged] = evaluate([_gated()], results)
    assert judged["verdict"] == UNDECIDED and judged["precondition"]["met"] is False


def test_an_accuracy_precondition_is_met_at_its_bar():
    solved = Precondition("it learned", "accuracy", lambda r: r["a"], lambda r: 0.75)
    assert solved.check({"a": 0.75})["met"] is True
    assert solved.check({"a": 0.74})["met"] is False
    assert "needs ≥ 0.75" in solved.check({"a": 0.5})["text"]


def test_a_claim_without_a_mechanism_has_no_precondition_column():
    judged = evaluate([_gated(), _claim("plain", lambda r: Measured([1, 2], [1.0, 1.1], "x"))],
                      {"loss": 1.0, "bigram": 2.0})
    header, rows = table(judged)
    assert "precondition" not in judged[1] and rows[1][3] == "—"


# ----------------------------------------------------------------------------- undecided line


def test_a_quick_run_that_decides_nothing_says_so_in_one_line():
    judged = evaluate([_gated(), _gated()], {"loss": 4.16, "bigram": 2.47})
    line = undecided_line(judged, quick=True)
    assert line == ("this --quick run is too small to decide anything: not met: the model "
                    "learned the task (final loss 4.16, needs < 2.47: a bigram table's loss); "
                    "run without --quick for verdicts")
    assert undecided_line(judged, quick=False).startswith(
        "this run decides none of its claims: not met: the model learned")


def test_one_seed_decides_nothing_either():
    judged = evaluate([_claim("one", lambda r: Measured([7], [0.4], "x"))], {})
    assert undecided_line(judged, quick=True) == (
        "this --quick run is too small to decide anything: seeds 7 only, so no spread; run "
        "without --quick for verdicts")


def test_a_run_that_decides_any_claim_has_no_undecided_line():
    judged = evaluate([_gated(), _claim("up", lambda r: Measured([1, 2], [1.0, 1.1], "x"))],
                      {"loss": 4.16, "bigram": 2.47})
    assert undecided_line(judged, quick=True) is None
    # "not seen" on a spread is a decision too
    judged = evaluate([_claim("no", lambda r: Measured([1, 2], [0.0, 0.01], "x"),
                              smallest=0.5)], {})
    assert judged[0]["verdict"] == NOT_SEEN and undecided_line(judged, quick=True) is None


# ----------------------------------------------------------------------------- the terminal


def test_the_terminal_claims_fit_100_columns():
    sentence = "a claim whose sentence is long enough to need wrapping " * 3
    judged = evaluate([Claim("k", sentence, "the paper's figure " * 8, "q",
                             lambda r: Measured([1337, 1338, 1339], [0.5, 0.6, 0.55],
                                                "what the run shows " * 10),
                             precondition=LEARNED)], {"loss": 1.0, "bigram": 2.0})
    printed = text(judged)
    assert max(len(line) for line in printed.splitlines()) <= 100
    flat = " ".join(printed.split())
    assert flat.startswith("- " + " ".join(sentence.split()))
    for word in ("the paper: the paper's figure", "this run: seeds 1337/1338/1339: what",
                 "precondition: met: the model learned", "verdict: held: +0.55"):
        assert word in flat
