"""The "Experiments" view: any experiment's report (`gptlab experiment NAME`) from its
results.json, as the tables it prints and the figures it drew, with the runs of its grid
(ordinary runs: every other view opens them).

An experiment the runs folder holds no full-size results of is listed with the results
gptlab ships (gptlab.experiments.shipped_results: its default size, run once, labelled with
the machine and the date), so a fresh install shows real numbers; the user's own results of
that experiment at its default size (`gptlab experiment NAME`) replace them. A `--quick` run
(from the page: gptlab.lab.experiments.quickrun) is small, too small to decide most
claims (each says whether it could): it is listed beside the shipped results, marked
quick, and replaces nothing.

The folders found here (experiment_folders, experiment_folder) are the longer-than-trained
view's too (gptlab.lab.context). The tables are the experiment module's own
(gptlab.experiments.catalog.summary), the same `gptlab experiment` prints; the routes are
gptlab.lab.experiments.routes, the bodies and answers gptlab.lab.experiments.schemas.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path, PurePosixPath
from typing import Any

from gptlab.errors import UsageError
from gptlab.experiments import catalog, shipped_results
from gptlab.experiments.grid import RUNS_DIR, experiment_of
from gptlab.experiments.report import RESULTS_FILE
from gptlab.files.atomic import read_json_object
from gptlab.lab.runs import MAX_DEPTH, Runs, is_run
from gptlab.training.runs import find_folders


def list_experiments(runs: Runs) -> list[dict[str, Any]]:
    own = [{"name": name, "experiment": experiment_of(folder), "shipped": None,
            "quick": is_quick(read_json_object(folder / RESULTS_FILE, "experiment results"))}
           for name, folder in experiment_folders(runs)]
    full = {e["experiment"] for e in own if not e["quick"]}
    return own + [{"name": name, "experiment": name, "shipped": shipped_results.label(results),
                   "quick": False} for name, results in shipped_instead(full)]


def is_quick(results: dict[str, Any]) -> bool:
    """Whether an experiment's results are a --quick run's (results.json's size)."""
    return results.get("size") == "quick"


def shipped_instead(full: set[str]) -> list[tuple[str, dict]]:
    """(name, results) of the shipped results of every experiment not in `full`, those the
    runs folder holds full-size results of (a --quick run's do not replace them)."""
    return [(name, results) for name in catalog.NAMES if name not in full
            for results in [shipped_results.load(name)] if results is not None]


def shipped_report(name: str) -> dict[str, Any]:
    """Experiment `name`'s shipped results as report_view answers them (no runs: none are
    shipped)."""
    results = shipped_results.load(name) if name in catalog.NAMES else None
    if results is None:
        raise UsageError(f"no shipped results of an experiment named {name[:60]!r} "
                         f"(experiments: {', '.join(catalog.NAMES)})")
    return {"name": name, **_folder_names(catalog.results_summary(name, results)),
            "figures": [_figure(path) for path in shipped_results.figures(name)],
            "runs": [], "shipped": shipped_results.label(results), **_about(results)}


# An absolute path ("/tmp/quiet/phase/data", "~/runs/data", "C:\\runs\\data"): where the
# numbers were built, which says nothing on another machine; its last name says which data
# it was.
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(?:~?/|[A-Za-z]:\\)(?:[^\s/\\()]+[/\\])+([^\s/\\()]+)")


def folder_name(text: str) -> str:
    """text with every absolute path cut to its last name: 'text (/tmp/quiet/phase/data)'
    -> 'text (data)'."""
    return ABSOLUTE_PATH.sub(r"\1", text)


def _folder_names(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary whose tables name folders, not the paths they had where they were built
    (results.json from before it recorded the data's name)."""
    tables = [{"title": folder_name(t["title"]), "header": [folder_name(h) for h in t["header"]],
               "rows": [[folder_name(c) for c in row] for row in t["rows"]]}
              for t in summary["tables"]]
    return {**summary, "tables": tables}


def _about(results: dict[str, Any]) -> dict[str, Any]:
    """A report's quick mark, undecided line and threads (null where results.json has
    none)."""
    return {"quick": is_quick(results), "undecided_line": results.get("undecided_line"),
            "threads": results.get("threads")}


def _figure(path: Path) -> dict[str, str]:
    return {"file": path.name, "png": "data:image/png;base64,"
            + base64.b64encode(path.read_bytes()).decode("ascii")}


def experiment_folders(runs: Runs, kind: str | None = None) -> list[tuple[str, Path]]:
    """(name, folder) of every folder of the runs folder (to MAX_DEPTH) holding a known
    experiment's results, of `kind` if given; an experiment's own folder is not searched."""
    return [(folder.relative_to(runs.root).as_posix(), folder)
            for folder in find_folders(runs.root, catalog.has_results, MAX_DEPTH)
            if kind is None or experiment_of(folder) == kind]


def experiment_folder(runs: Runs, name: str, kind: str | None = None) -> Path | None:
    """The folder of experiment `name` (of `kind` if given), or None; a name that is not a
    path inside the runs folder is refused."""
    pure = PurePosixPath(name)
    if len(name) > 500 or "\x00" in name or "\\" in name or pure.is_absolute() \
            or ".." in pure.parts:
        raise UsageError(f"experiment {name[:60]!r} must be a path inside the runs folder")
    try:
        folder = (runs.root / pure).resolve()
    except (OSError, RuntimeError):  # a name too long, a symlink loop
        return None
    if not runs.inside(folder) or not catalog.has_results(folder):
        return None
    return folder if kind is None or experiment_of(folder) == kind else None


def report_view(runs: Runs, name: str) -> dict[str, Any]:
    folder = experiment_folder(runs, name)
    if folder is None:
        raise UsageError(f"no experiment named {name!r} in the runs folder (one holds "
                         f"results.json from `gptlab experiment NAME`)")
    summary = catalog.summary(folder)
    grid = folder / RUNS_DIR
    members = sorted(p for p in grid.iterdir() if is_run(p)) if grid.is_dir() else []
    results = read_json_object(folder / RESULTS_FILE, "experiment results")
    return {"name": name, **_folder_names(summary),
            "figures": [_figure(folder / f) for f in summary["figures"]],
            "runs": [f"{name}/{RUNS_DIR}/{p.name}" for p in members], "shipped": None,
            **_about(results)}
