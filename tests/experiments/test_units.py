"""The per-unit helpers every experiment reads its claims and cells with
(gptlab.experiments.units): the effects per unit in the claims table's words, the units
named and ordered, the mean as the shipped numbers were computed, the mean ± half-range
cell and its dash."""

from __future__ import annotations

import math
import statistics

import pytest

from gptlab.experiments.claims import Claim, Measured, evaluate
from gptlab.experiments.units import (
    by_seed,
    effects_text,
    mean,
    mean_range,
    measured_over,
    per_slice,
    per_unit,
    seed_list,
)

RUNS = [{"seed": 1339, "x": 0.5}, {"seed": 1337, "x": -0.25}, {"seed": 1338, "x": None}]


def test_seed_list_and_seed_order():
    assert seed_list(1337, 3) == [1337, 1338, 1339] and seed_list(5, 1) == [5]
    assert [r["seed"] for r in by_seed(RUNS)] == [1337, 1338, 1339]
    assert [r["seed"] for r in by_seed({"b": RUNS[0], "a": RUNS[1]}.values())] == [1337, 1339]


def test_a_template_lists_the_effects_with_a_dash_for_a_unit_without_one():
    m = per_unit(by_seed(RUNS), lambda r: r["x"], "x: {}")
    assert m == Measured([1337, 1338, 1339], [-0.25, None, 0.5], "x: -0.250, —, +0.500")
    assert per_unit(by_seed(RUNS), lambda r: r["x"], "{}", digits="+.2f").shown == \
        "-0.25, —, +0.50"
    assert effects_text([0.1234, None], ".1f") == "0.1, —"


def test_words_per_unit_are_joined_and_units_named_by_key_or_function():
    m = per_unit([{"sample": 0, "v": 1.0}, {"sample": 1, "v": 3.0}], lambda s: s["v"],
                 lambda s: f"{s['v']:.0f} apples", name="sample", unit="slices")
    assert (m.seeds, m.effects, m.shown, m.unit) == ([0, 1], [1.0, 3.0],
                                                     "1 apples / 3 apples", "slices")
    repeats = per_unit(range(3), lambda r: r / 2, "{}", name=lambda r: r, unit="repeats")
    assert repeats.seeds == [0, 1, 2] and repeats.effects == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="unit must be one of"):
        per_unit([1], float, "{}", name=lambda r: r, unit="epochs")


def test_a_claims_measure_reads_its_units_off_the_results():
    measure = measured_over(lambda r: by_seed(r["runs"].values()), lambda run: run["x"],
                            "x: {}")
    results = {"runs": {"a": RUNS[0], "b": RUNS[1]}}
    assert measure(results) == Measured([1337, 1339], [-0.25, 0.5], "x: -0.250, +0.500")
    slices = {"samples": [{"sample": 0, "v": 0.25}, {"sample": 1, "v": 0.75}]}
    m = per_slice(slices, lambda s: s["v"], lambda s: f"{s['v']:.2f}")
    assert (m.seeds, m.unit, m.shown) == ([0, 1], "slices", "0.25 / 0.75")
    # judged as any claim is: the units named in the claims table's words
    claim = Claim("k", "s", "p", "q", lambda r: per_slice(r, lambda s: s["v"], str))
    [judged] = evaluate([claim], slices)
    assert judged["units"] == "slices 0/1" and judged["mean"] == 0.5


def test_the_mean_is_sum_over_count_as_the_shipped_numbers_were():
    values = [0.1] * 10
    assert mean(values) == sum(values) / 10 == 0.9999999999999999 / 10
    assert mean(values) != statistics.fmean(values)  # fmean would move the last digits


def test_a_cell_is_the_mean_and_half_the_range_or_a_dash():
    assert mean_range([0.4, 0.5, 0.3]) == "0.400 ± 0.100"
    assert mean_range([12, 14], 0) == "13 ± 1"
    assert mean_range([0.031, 0.037], 1, percent=True) == "3.4% ± 0.3"
    for missing in ([], [0.1, None], [0.1, math.nan], [math.inf]):
        assert mean_range(missing) == "—"
