"""The chapter's claims as data, and the rule that turns an experiment's numbers into a
verdict: computed, never typed.

Each experiment declares its claims (`CLAIMS`, a tuple of `Claim`) before it runs: the
chapter's sentence, the paper's figure beside it, the quantity measured and how to read it
off the experiment's results (one value per seed: the effect), the direction the claim
predicts, and the smallest effect that counts as one. `judge` applies the rule:

- **held**: the seeds' mean effect is in the claimed direction, at least the claim's
  smallest effect, and larger than twice the seed spread (max - min of the per-seed
  effects);
- **held weakly**: in the direction and at least the smallest effect, but within twice the
  spread;
- **not seen**: no effect (the mean is zero, or smaller than the claim's smallest effect),
  or the opposite direction within twice the spread;
- **contradicted**: the opposite direction, at least the smallest effect and beyond twice
  the spread;
- **undecided**: a number is missing (a run diverged, a NaN or infinite value), so no
  mean exists.

The effect of a claim comparing two arms (Post-LN against Pre-LN, ...) is their difference
taken seed by seed: every experiment gives every arm the same seeds, weights and batches, so
the paired difference's own spread is the seed-to-seed noise of the effect.

One seed has no spread: it is taken as unbounded, so a single seed's verdict is at most
"held weakly" and never "contradicted" (the `rule` field says "one seed: no spread").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

HELD = "held"
HELD_WEAKLY = "held weakly"
NOT_SEEN = "not seen"
CONTRADICTED = "contradicted"
UNDECIDED = "undecided"
VERDICTS = (HELD, HELD_WEAKLY, NOT_SEEN, CONTRADICTED, UNDECIDED)
SPREADS = 2.0  # "larger than twice the seed spread": held, or contradicted, beyond it
# Equal means: a mean this small against the effects themselves is rounding (0.2 - 0.15
# and 0.1 - 0.15 do not sum to 0.0 in floating point), no effect.
ROUNDING = 1e-9


@dataclass(frozen=True)
class Measured:
    """A claim's quantity in one experiment's results: the effect per seed (None: that
    seed's run has no number, e.g. it diverged), and a line saying what the run shows in
    the paper's terms (the claims table's "this run")."""

    seeds: list[int]
    effects: list[float | None]
    shown: str


@dataclass(frozen=True)
class Claim:
    """One claim: the chapter's sentence, the paper's figure, the quantity measured (in
    words, with its unit), `measure(results) -> Measured`, the direction the claim predicts
    (+1: the effect is positive; -1: negative) and `smallest`, the size below which an
    effect counts as none (in the effect's unit; stated where the claim is declared, with
    why)."""

    key: str
    sentence: str
    paper: str
    quantity: str
    measure: Callable[[dict[str, Any]], Measured]
    direction: int = 1
    smallest: float = 0.0

    def __post_init__(self) -> None:
        if self.direction not in (1, -1):
            raise ValueError(f"claim {self.key!r}: direction must be 1 or -1, not "
                             f"{self.direction!r}")
        if not (math.isfinite(self.smallest) and self.smallest >= 0):
            raise ValueError(f"claim {self.key!r}: smallest must be a finite number >= 0, "
                             f"not {self.smallest!r}")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def judge(effects: Sequence[float | None], direction: int = 1,
          smallest: float = 0.0) -> dict[str, Any]:
    """The verdict on per-seed effects (module docstring's rule), with the numbers that
    decided it: mean, spread (None for one seed), the margin the mean had to beat (twice
    the spread, or `smallest` where larger), and the rule in words."""
    values = list(effects)
    base = {"effects": values, "direction": direction, "smallest": smallest}
    if not values:
        return {**base, "verdict": UNDECIDED, "mean": None, "spread": None,
                "rule": "no seeds: nothing measured"}
    if not all(_finite(v) for v in values):
        return {**base, "verdict": UNDECIDED, "mean": None, "spread": None,
                "rule": "a seed has no finite number (NaN, inf, a diverged run, or a "
                         "precondition of the claim not met: this run's column says which)"}
    mean = sum(values) / len(values)
    if abs(mean) <= ROUNDING * max(abs(v) for v in values):
        mean = 0.0
    signed = mean * direction  # > 0: in the claimed direction
    if len(values) == 1:
        spread = None
        rule = (f"one seed: no spread, so at most {HELD_WEAKLY!r}; an effect counts from "
                f"{smallest:g}")
        if signed > 0 and abs(mean) >= smallest and mean != 0:
            verdict = HELD_WEAKLY
        else:
            verdict = NOT_SEEN
        return {**base, "verdict": verdict, "mean": mean, "spread": spread, "margin": None,
                "rule": rule}
    spread = max(values) - min(values)
    margin = SPREADS * spread
    rule = (f"held / contradicted: |mean| > {SPREADS:g} x seed spread ({margin:.4g}) "
            f"and >= {smallest:g}; held weakly: in the direction within it")
    if mean == 0 or abs(mean) < smallest:
        verdict = NOT_SEEN
    elif signed > 0:
        verdict = HELD if abs(mean) > margin else HELD_WEAKLY
    else:
        verdict = CONTRADICTED if abs(mean) > margin else NOT_SEEN
    return {**base, "verdict": verdict, "mean": mean, "spread": spread, "margin": margin,
            "rule": rule}


def evaluate(claims: Sequence[Claim], results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every claim judged on an experiment's results: what results.json carries under
    "claims" (sentence, paper, quantity, this run, the seeds, the verdict and its
    numbers). A claim whose quantity cannot be read (a run without a number) is
    undecided, with why."""
    out = []
    for claim in claims:
        try:
            measured = claim.measure(results)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
            measured = Measured([], [], f"not measurable: {type(exc).__name__} {exc}")
        out.append({"key": claim.key, "sentence": claim.sentence, "paper": claim.paper,
                    "quantity": claim.quantity, "this_run": measured.shown,
                    "seeds": measured.seeds,
                    **judge(measured.effects, claim.direction, claim.smallest)})
    return out


CLAIMS_HEADER = ("the claim", "the paper", "this run", "verdict")


def table(judged: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): the claims table, one row per judged claim; the verdict cell gives
    the mean effect against the margin it had to beat."""
    rows = []
    for c in judged:
        rows.append([c["sentence"], c["paper"], c["this_run"], verdict_text(c)])
    return list(CLAIMS_HEADER), rows


def verdict_text(c: dict[str, Any]) -> str:
    """'held (+0.648 vs 2 x spread 0.031, seeds 1337, 1338)' and the like."""
    seeds = ", ".join(map(str, c["seeds"]))
    if c["mean"] is None:
        return f"{c['verdict']}: {c['rule']}"
    if c["spread"] is None:
        return f"{c['verdict']} ({c['mean']:+.3g}; one seed, {seeds}: no spread)"
    return (f"{c['verdict']} ({c['mean']:+.3g} vs {SPREADS:g} x spread {c['spread']:.3g}; "
            f"seeds {seeds})")


def per_seed(values: dict[int, float | None]) -> tuple[list[int], list[float | None]]:
    """(seeds, values) in seed order, from {seed: value}."""
    seeds = sorted(values)
    return seeds, [values[s] for s in seeds]
