"""One number per unit of an experiment, the units its repeats are: seeds (a model trained
per seed), text slices, lengths or timing repeats (gptlab.experiments.claims.UNITS).

Every experiment reads its claims' effects and its tables' cells the same way: the seeds
it trains, a value taken from each unit's record, the values listed in a claim's "this
run", their mean, and a table cell of their mean ± half their range. This module is that
one way; each experiment says only which records are its units and what it reads off one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from gptlab.experiments.claims import Measured

Unit = TypeVar("Unit")


def seed_list(seed: int, count: int) -> list[int]:
    """The seeds an experiment trains: seed, seed + 1, ..., count of them."""
    return list(range(seed, seed + count))


def by_seed(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records (one per trained model, each with its "seed") in seed order."""
    return sorted(records, key=lambda r: r["seed"])


def mean(values: Sequence[float]) -> float:
    """sum / len, as every experiment's results have always been computed (statistics.fmean
    rounds differently in the last bits, and the shipped numbers would move)."""
    return sum(values) / len(values)


def effects_text(effects: Sequence[float | None], digits: str = "+.3f") -> str:
    """'+0.123, —, -0.045': the effects in `digits` format, a dash for a unit without one."""
    return ", ".join("—" if e is None else format(e, digits) for e in effects)


def per_unit(units: Sequence[Unit], value: Callable[[Unit], float | None],
             shown: str | Callable[[Unit], str], *, name: str | Callable[[Unit], Any] = "seed",
             unit: str = "seeds", digits: str = "+.3f") -> Measured:
    """A claim's effect per unit: value(u) of each of `units` (in the order the claims table
    lists them), each named by u[name] (or name(u)).

    shown: a template whose {} takes the effects listed (effects_text in `digits`:
    "closing accuracy - 0.95: +0.012, -0.004"), or shown(u), the words for one unit, the
    units' joined by " / " ("62% (48% held out) / 71% (50% held out)")."""
    units = list(units)
    effects = [value(u) for u in units]
    names = [name(u) if callable(name) else u[name] for u in units]  # type: ignore[index]
    if isinstance(shown, str):
        text = shown.format(effects_text(effects, digits))
    else:
        text = " / ".join(shown(u) for u in units)
    return Measured(names, effects, text, unit)


def measured_over(select: Callable[[dict[str, Any]], Sequence[Unit]],
                  value: Callable[[Unit], float | None], shown: str | Callable[[Unit], str],
                  **how: Any) -> Callable[[dict[str, Any]], Measured]:
    """A claim's measure (results -> Measured): per_unit over select(results), the units'
    records in the experiment's results; `how`: per_unit's name, unit and digits."""
    return lambda results: per_unit(select(results), value, shown, **how)


def per_slice(results: dict[str, Any], value: Callable[[dict[str, Any]], float | None],
              shown: Callable[[dict[str, Any]], str]) -> Measured:
    """A claim's effect per text slice, for an experiment that reads one model on several
    disjoint slices of text (results["samples"], each with its index "sample"): per_unit
    over them, shown(sample) the words for one."""
    return per_unit(results["samples"], value, shown, name="sample", unit="slices")


def mean_range(values: Sequence[float | None], digits: int = 3, percent: bool = False) -> str:
    """A table cell over the units: their mean ± half their range ('0.412 ± 0.031', or in
    percent '3.2% ± 0.4'), a dash where a unit has no finite number."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return "—"
    scale, sign = (100, "%") if percent else (1, "")
    m = scale * mean(values)  # type: ignore[arg-type]
    half = scale * (max(values) - min(values)) / 2  # type: ignore[type-var,operator]
    return f"{m:.{digits}f}{sign} ± {half:.{digits}f}"
