"""Every experiment gptlab has, by name, and what any reader (the CLI, the lab) needs to show
one's results without knowing which it is.

Each experiment is the module gptlab.experiments.<name>, which gives `run(out, data=, quick=,
seed=, steps=, progress=)`, `TITLE`, `FIGURES` (the files it draws in its folder) and
`tables(results)` ([(title, (header, rows))], the tables it prints and its report holds),
and may give `notes(results)`, lines the command prints after them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from gptlab.errors import UsageError
from gptlab.experiments.grid import experiment_of
from gptlab.experiments.report import RESULTS_FILE, timing_line
from gptlab.files.atomic import read_json_object

NAMES = ("context", "norm", "scale", "heads", "phase", "memory", "brackets", "recurrence",
         "features")


def module(name: str) -> ModuleType:
    """The experiment's module (imported now: it loads torch)."""
    if name not in NAMES:
        raise UsageError(f"unknown experiment {name!r}; experiments: {', '.join(NAMES)}")
    return importlib.import_module(f"gptlab.experiments.{name}")


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
            "figures": [f for f in module(name).FIGURES if (folder / f).is_file()]}


def results_summary(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """Experiment `name`'s results (a results.json's object, from a folder or shipped) as
    its title, tables, claims and timing line."""
    experiment = module(name)
    return {"experiment": name, "title": experiment.TITLE,
            "tables": [{"title": title.rstrip(":"), "header": list(header),
                        "rows": [[str(c) for c in row] for row in rows]}
                       for title, (header, rows) in experiment.tables(results)],
            "claims": results.get("claims") or [],
            "timing": timing_line(results["timing"], results["machine"])}
