"""Every experiment gptlab has (each module's EXPERIMENT, gptlab.experiments.contract), and
what any reader (the CLI, the lab, the docs tools) needs to show one's results without
knowing which it is.

The experiments are imported here, not looked up by name on use: this module loads torch
already (gptlab.experiments.grid), and the nine add 0.1-0.3 s to its 1.5 s (medians on a
2-core machine at load 4). The CLI imports this module only once a command runs, never for
`--help`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gptlab.errors import UsageError
from gptlab.experiments import (
    brackets,
    context,
    features,
    heads,
    memory,
    norm,
    phase,
    recurrence,
    scale,
)
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import experiment_of
from gptlab.experiments.report import RESULTS_FILE, timing_line
from gptlab.files.atomic import read_json_object

# In the order the CLI's help, the lab and docs/experiments.md list them.
EXPERIMENTS: tuple[Experiment, ...] = (
    context.EXPERIMENT, norm.EXPERIMENT, scale.EXPERIMENT, heads.EXPERIMENT,
    phase.EXPERIMENT, memory.EXPERIMENT, brackets.EXPERIMENT, recurrence.EXPERIMENT,
    features.EXPERIMENT)
NAMES = tuple(e.name for e in EXPERIMENTS)
_BY_NAME = dict(zip(NAMES, EXPERIMENTS, strict=True))


def experiment(name: str) -> Experiment:
    """The experiment called `name`; any other name is refused, the known ones listed."""
    if name not in _BY_NAME:
        raise UsageError(f"unknown experiment {name!r}; experiments: {', '.join(NAMES)}")
    return _BY_NAME[name]


def has_results(folder: Path) -> bool:
    """Whether a folder holds a known experiment that has written its results."""
    return experiment_of(folder) in NAMES and (folder / RESULTS_FILE).is_file()


def summary(folder: str | Path) -> dict[str, Any]:
    """An experiment folder's results as its tables, its claims judged (results.json's
    "claims": [] where it was written before claims were), its figures' file names (those
    that exist) and its timing line."""
    folder = Path(folder)
    if not has_results(folder):
        raise UsageError(f"{folder} holds no experiment's {RESULTS_FILE} (one of "
                         f"`gptlab experiment {'|'.join(NAMES)}`)")
    name = experiment_of(folder)
    results = read_json_object(folder / RESULTS_FILE, "experiment results")
    return {**results_summary(name, results),
            "figures": [f for f in experiment(name).figures if (folder / f).is_file()]}


def results_summary(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """Experiment `name`'s results (a results.json's object, from a folder or shipped) as
    its title, tables, claims and timing line."""
    shown = experiment(name)
    return {"experiment": name, "title": shown.title,
            "tables": [{"title": title.rstrip(":"), "header": list(header),
                        "rows": [[str(c) for c in row] for row in rows]}
                       for title, (header, rows) in shown.tables(results)],
            "claims": results.get("claims") or [],
            "timing": timing_line(results["timing"], results["machine"])}
