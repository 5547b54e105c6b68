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
  mean exists; or the claim's precondition is not met.

A claim that reads a trained model's mechanism (its heads, its memories, how it uses
positions) states a `Precondition`: the model learned its task, by a number and a
threshold from the experiment's own baseline (the loss, or the accuracy, of a bigram table
of the same data: gptlab.experiments.baselines). A model that did not learn has no
mechanism to read, so where the precondition is unmet the claim is undecided, whatever its
effect, and says why.

The units a claim's effect runs over are seeds in most experiments; where they are slices
of text, lengths or timing repeats (`Measured.unit`), the verdict and the tables say so.

The effect of a claim comparing two arms (Post-LN against Pre-LN, ...) is their difference
taken seed by seed: every experiment gives every arm the same seeds, weights and batches, so
the paired difference's own spread is the seed-to-seed noise of the effect.

One seed has no spread: it is taken as unbounded, so a single seed's verdict is at most
"held weakly" and never "contradicted" (the `rule` field says "one seed: no spread").

Every judged claim carries a verdict line, the verdict in words with every term of the
rule ("not seen: +0.032 (needs > 0.03, twice the spread over seeds, and ≥ 0.04)"), and
a run none of whose claims can be decided says so in one line (`undecided_line`).
"""

from __future__ import annotations

import math
import textwrap
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
# What a claim's effects run over, plural: singular. "lengths" are written "n = 64/128".
UNITS = {"seeds": "seed", "slices": "slice", "lengths": "length", "repeats": "repeat"}


@dataclass(frozen=True)
class Measured:
    """A claim's quantity in one experiment's results: the effect per unit (None: that
    unit has no number, e.g. its run diverged), and a line saying what the run shows in
    the paper's terms (the claims table's "this run"). `seeds` names the units, which are
    `unit` (one of UNITS: seeds, or the text slices, lengths or timing repeats an
    experiment's spread is over)."""

    seeds: list[int]
    effects: list[float | None]
    shown: str
    unit: str = "seeds"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {self.unit!r}")


def units_text(unit: str, names: Sequence[Any]) -> str:
    """'seeds 1337/1338/1339', 'slices 0/1/2', 'n = 64/128/256'."""
    joined = "/".join(map(str, names))
    return f"n = {joined}" if unit == "lengths" else f"{unit} {joined}"


def _number(v: float) -> str:
    return f"{v:.3g}"


@dataclass(frozen=True)
class Precondition:
    """What must hold before a claim that reads a trained model's mechanism is judged: the
    model learned its task. `value(results)` is the number (a loss, an accuracy; the
    worst of the units', so that every model the effects come from learned),
    `threshold(results)` the bar from the experiment's own baseline, `below`: met when the
    value is under the threshold (a loss), else at or over it (an accuracy). `text` says
    what holds when it is met, `quantity` what the value is, `why` where the threshold
    comes from (words, or why(results) -> words with the baseline's number)."""

    text: str
    quantity: str
    value: Callable[[dict[str, Any]], float | None]
    threshold: Callable[[dict[str, Any]], float]
    below: bool = False
    why: str | Callable[[dict[str, Any]], str] = ""

    def check(self, results: dict[str, Any]) -> dict[str, Any]:
        """{"text", "value", "threshold", "met"} on an experiment's results; the text
        gives the numbers. A value that cannot be read (a diverged run, a NaN) is unmet."""
        try:
            value, threshold = self.value(results), float(self.threshold(results))
            why = self.why(results) if callable(self.why) else self.why
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
            return {"text": f"{self.text} (not measurable: {type(exc).__name__} {exc})",
                    "value": None, "threshold": None, "met": False}
        finite = _finite(value)
        met = finite and (value < threshold if self.below else value >= threshold)
        # four digits: a loss of 2.0016 against a bar of 2.473 reads "2.002", not "2"
        shown = f"{value:.4g}" if finite else "none"
        why = f": {why}" if why else ""
        return {"text": f"{self.text} ({self.quantity} {shown}, needs "
                        f"{'<' if self.below else '≥'} {threshold:.4g}{why})",
                "value": float(value) if finite else None, "threshold": threshold,
                "met": bool(met)}


@dataclass(frozen=True)
class Claim:
    """One claim: the chapter's sentence, the paper's figure, the quantity measured (in
    words, with its unit), `measure(results) -> Measured`, the direction the claim predicts
    (+1: the effect is positive; -1: negative), `smallest`, the size below which an
    effect counts as none (in the effect's unit; stated where the claim is declared, with
    why), and, for a claim that reads a trained model's mechanism, its precondition."""

    key: str
    sentence: str
    paper: str
    quantity: str
    measure: Callable[[dict[str, Any]], Measured]
    direction: int = 1
    smallest: float = 0.0
    precondition: Precondition | None = None

    def __post_init__(self) -> None:
        if self.direction not in (1, -1):
            raise ValueError(f"claim {self.key!r}: direction must be 1 or -1, not "
                             f"{self.direction!r}")
        if not (math.isfinite(self.smallest) and self.smallest >= 0):
            raise ValueError(f"claim {self.key!r}: smallest must be a finite number >= 0, "
                             f"not {self.smallest!r}")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def judge(effects: Sequence[float | None], direction: int = 1, smallest: float = 0.0,
          unit: str = "seeds") -> dict[str, Any]:
    """The verdict on the effects per unit (module docstring's rule), with the numbers
    that decided it: mean, spread (None for one unit), the margin the mean had to beat
    (twice the spread), and the rule in words."""
    values = list(effects)
    one = UNITS[unit]
    base = {"effects": values, "direction": direction, "smallest": smallest}
    if not values:
        return {**base, "verdict": UNDECIDED, "mean": None, "spread": None,
                "rule": f"no {unit}: nothing measured"}
    if not all(_finite(v) for v in values):
        return {**base, "verdict": UNDECIDED, "mean": None, "spread": None,
                "rule": f"a {one} has no finite number (NaN, inf, a diverged run, or a "
                        f"number the run could not measure: this run's column says which)"}
    mean = sum(values) / len(values)
    if abs(mean) <= ROUNDING * max(abs(v) for v in values):
        mean = 0.0
    signed = mean * direction  # > 0: in the claimed direction
    if len(values) == 1:
        rule = (f"one {one}: no spread, so at most {HELD_WEAKLY!r}; an effect counts from "
                f"{smallest:g}")
        if signed > 0 and abs(mean) >= smallest and mean != 0:
            verdict = HELD_WEAKLY
        else:
            verdict = NOT_SEEN
        return {**base, "verdict": verdict, "mean": mean, "spread": None, "margin": None,
                "rule": rule}
    spread = max(values) - min(values)
    margin = SPREADS * spread
    rule = (f"held / contradicted: |mean| > {SPREADS:g} x the spread over {unit} "
            f"({margin:.4g}) and >= {smallest:g}; held weakly: in the direction within it")
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
    "claims" (sentence, paper, quantity, this run, its units, the verdict with its numbers
    and its verdict line; a claim that reads a mechanism, its precondition checked). A
    claim whose quantity cannot be read (a run without a number) is undecided, with why;
    so is one whose precondition is not met."""
    out = []
    for claim in claims:
        try:
            measured = claim.measure(results)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
            measured = Measured([], [], f"not measurable: {type(exc).__name__} {exc}")
        judged = {"key": claim.key, "sentence": claim.sentence, "paper": claim.paper,
                  "quantity": claim.quantity, "this_run": measured.shown,
                  "seeds": measured.seeds, "units": units_text(measured.unit, measured.seeds),
                  **judge(measured.effects, claim.direction, claim.smallest, measured.unit)}
        if claim.precondition is not None:
            judged["precondition"] = claim.precondition.check(results)
            if not judged["precondition"]["met"]:
                judged["verdict"] = UNDECIDED
                judged["rule"] = f"precondition not met: {judged['precondition']['text']}"
        judged["verdict_line"] = verdict_line(judged, measured.unit)
        out.append(judged)
    return out


def _signed(direction: int, value: float) -> str:
    """A bound in the claimed direction: '0.029' going up, '-0.029' going down."""
    return _number(direction * value) if value else "0"


def verdict_line(c: dict[str, Any], unit: str = "seeds") -> str:
    """The verdict in words with every term of its rule: 'held: +0.283 (needs > 0.052,
    twice the spread over seeds, and ≥ 0.05)', 'held weakly: +0.4 (one seed: no spread,
    at most held weakly; needs ≥ 0.05)', 'undecided: precondition not met: ...'."""
    verdict, pre = c["verdict"], c.get("precondition")
    if pre is not None and not pre["met"]:
        return f"{verdict}: precondition not met: {pre['text']}"
    if c["mean"] is None:
        return f"{verdict}: {c['rule']}"
    d, smallest = c["direction"], c["smallest"]
    more, at_least = (">", "≥") if d > 0 else ("<", "≤")
    if c["spread"] is None:
        bound = f"{at_least} {_signed(d, smallest)}" if smallest else f"{more} 0"
        return (f"{verdict}: {c['mean']:+.3g} (one {UNITS[unit]}: no spread, at most "
                f"{HELD_WEAKLY}; needs {bound})")
    return (f"{verdict}: {c['mean']:+.3g} (needs {more} {_signed(d, c['margin'])}, twice "
            f"the spread over {unit}, and {at_least} {_signed(d, smallest)})")


def undecided_line(judged: Sequence[dict[str, Any]], quick: bool) -> str | None:
    """The one line a run that decides none of its claims prints instead of them: every
    verdict undecided, or judged on one unit (no spread: at most held weakly, which
    decides nothing), with the reasons; None where any claim is decided."""
    if not judged or any(c["verdict"] != UNDECIDED and c["spread"] is not None
                         for c in judged):
        return None
    reasons: list[str] = []
    for c in judged:
        pre = c.get("precondition")
        if pre is not None and not pre["met"]:
            reason = f"not met: {pre['text']}"
        elif c["mean"] is None:
            reason = c["rule"]
        else:
            reason = f"{c['units']} only, so no spread"
        if reason not in reasons:
            reasons.append(reason)
    if quick:
        return (f"this --quick run is too small to decide anything: {'; '.join(reasons)}; "
                f"run without --quick for verdicts")
    return f"this run decides none of its claims: {'; '.join(reasons)}"


def _gated(judged: Sequence[dict[str, Any]]) -> bool:
    return any("precondition" in c for c in judged)


def precondition_text(pre: dict[str, Any] | None) -> str:
    """'met: ...', 'not met: ...', or '—' for a claim that needs none."""
    return "—" if pre is None else f"{'met' if pre['met'] else 'not met'}: {pre['text']}"


def table(judged: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): the claims table, one row per judged claim: the claim, the paper,
    what this run shows over its units, the precondition (where any claim has one) and
    the verdict line."""
    gated = _gated(judged)
    header = ["the claim", "the paper", "this run", *(["precondition"] if gated else []),
              "verdict"]
    rows = []
    for c in judged:
        shown = f"{c['units']}: {c['this_run']}" if c.get("units") else c["this_run"]
        row = [c["sentence"], c["paper"], shown]
        if gated:
            row.append(precondition_text(c.get("precondition")))
        rows.append([*row, c.get("verdict_line") or verdict_text(c)])
    return header, rows


def text(judged: Sequence[dict[str, Any]], width: int = 100) -> str:
    """The claims for a terminal, within `width` columns: each claim's sentence, then its
    paper, this run, precondition (where met: an unmet one is the verdict line's) and
    verdict on lines of their own, wrapped."""
    header, rows = table(judged)
    lines = []
    for c, row in zip(judged, rows, strict=True):
        lines += textwrap.wrap(f"- {row[0]}", width, subsequent_indent="  ")
        for label, cell in zip(header[1:], row[1:], strict=True):
            if label == "precondition" and not (c.get("precondition") or {}).get("met", True):
                continue  # the verdict line says it, numbers and all
            lines += textwrap.wrap(f"{label}: {cell}", width, initial_indent="    ",
                                   subsequent_indent="      ")
    return "\n".join(lines)


def verdict_text(c: dict[str, Any]) -> str:
    """A claim judged before verdict lines were written: 'held (+0.648 vs 2 x spread
    0.031, seeds 1337, 1338)' and the like."""
    seeds = ", ".join(map(str, c["seeds"]))
    if c["mean"] is None:
        return f"{c['verdict']}: {c['rule']}"
    if c["spread"] is None:
        return f"{c['verdict']} ({c['mean']:+.3g}; one seed, {seeds}: no spread)"
    return (f"{c['verdict']} ({c['mean']:+.3g} vs {SPREADS:g} x spread {c['spread']:.3g}; "
            f"seeds {seeds})")
