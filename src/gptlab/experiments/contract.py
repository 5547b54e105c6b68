"""What an experiment is: the one definition each experiment module gives as its
`EXPERIMENT`, and all that the catalog, the CLI, the lab and the docs tools read of it.

An experiment trains (or reads) models at a size, measures them over its units (seeds, text
slices, lengths, timing repeats: gptlab.experiments.units), writes results.json, report.md
and its figures into a folder, and judges its claims on those results
(gptlab.experiments.claims). Adding one is a module with its `Size`, `run`, `tables`
(and `notes`) and `CLAIMS`, ending in `EXPERIMENT = Experiment(...)`, and its entry in
gptlab.experiments.catalog.EXPERIMENTS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gptlab.experiments.claims import UNITS, Claim

# [(title, (header, rows))]: the tables an experiment prints, its report and the lab show
Tables = list[tuple[str, tuple[list[str], list[list[str]]]]]
SIZE_NAMES = ("quick", "default")  # --quick, and the size without it


def no_notes(results: dict[str, Any]) -> list[str]:
    """An experiment that prints nothing after its tables."""
    return []


@dataclass(frozen=True)
class Experiment:
    """One experiment.

    name: `gptlab experiment NAME`, its folder's experiment.json and results["experiment"];
    title: its report's heading; figures: the files it draws in its folder; sizes: its
    `Size` per SIZE_NAMES (a frozen dataclass each, its own fields); units: what its
    claims' effects run over, in the order its claims use them (claims.UNITS' keys: seeds,
    slices, lengths, repeats); run(out, data=None, quick=False, seed=1337, steps=None,
    progress=False, log=print) -> results (memory and features also take model=, the
    model they read); tables(results): what it prints; notes(results): lines printed after
    them; claims: judged on its results (gptlab.experiments.report.finish)."""

    name: str
    title: str
    figures: tuple[str, ...]
    sizes: Mapping[str, Any]
    units: tuple[str, ...]
    run: Callable[..., dict[str, Any]]
    tables: Callable[[dict[str, Any]], Tables]
    claims: Sequence[Claim]
    notes: Callable[[dict[str, Any]], list[str]] = no_notes

    def __post_init__(self) -> None:
        if sorted(self.sizes) != sorted(SIZE_NAMES):
            raise ValueError(f"experiment {self.name!r}: sizes must be {SIZE_NAMES}, not "
                             f"{tuple(self.sizes)}")
        unknown = [u for u in self.units if u not in UNITS]
        if not self.units or unknown:
            raise ValueError(f"experiment {self.name!r}: units must be some of "
                             f"{', '.join(UNITS)}, not {self.units!r}")
