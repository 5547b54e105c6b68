"""The context experiment's curves, for the longer-than-trained view (view 11): an experiment
of `gptlab experiment context` (its results.json), every encoding's and scaling's loss by
position in windows of one length, the training length marked. Where the runs folder holds
no full-size one, the results gptlab ships (gptlab.experiments.shipped_results, labelled
with the machine and date); a --quick run (from the page:
gptlab.lab.experiments.quickrun) is listed beside them, marked quick. The experiments are
found as the experiments view finds them (gptlab.lab.experiments.report)."""

from __future__ import annotations

from typing import Any

from gptlab.errors import UsageError
from gptlab.experiments import shipped_results
from gptlab.experiments.context import NAME as CONTEXT_EXPERIMENT
from gptlab.experiments.report import RESULTS_FILE
from gptlab.files.atomic import read_json_object
from gptlab.lab.context import schemas
from gptlab.lab.experiments.report import experiment_folder, experiment_folders, is_quick
from gptlab.lab.runs import Runs


def list_experiments(runs: Runs) -> list[dict[str, Any]]:
    """Folders of the runs folder (to MAX_DEPTH) holding a finished context experiment;
    then, unless one of them is full-size, the shipped results (no runs: none are shipped)
    beside a --quick run's."""
    found = []
    for name, folder in experiment_folders(runs, CONTEXT_EXPERIMENT):
        results = read_json_object(folder / RESULTS_FILE, "experiment results")
        found.append({"name": name, "trained_length": results["trained_length"],
                      "lengths": results["lengths"],
                      "runs": [f"{name}/{r['dir']}" for r in results["runs"].values()],
                      "shipped": None, "quick": is_quick(results)})
    full = any(not e["quick"] for e in found)
    shipped = None if full else shipped_results.load(CONTEXT_EXPERIMENT)
    if shipped is None:
        return found
    return found + [{"name": CONTEXT_EXPERIMENT, "trained_length": shipped["trained_length"],
                     "lengths": shipped["lengths"], "runs": [],
                     "shipped": shipped_results.label(shipped), "quick": False}]


def experiment_view(runs: Runs, body: schemas.ExperimentRequest) -> dict[str, Any]:
    results = _results(runs, body.experiment, body.shipped)
    if body.length not in results["lengths"]:
        raise UsageError(f"length {body.length} is not one of the experiment's: "
                         f"{', '.join(map(str, results['lengths']))}")
    at = results["lengths"].index(body.length)
    series = []
    for row in results["rows"]:
        cell = row["cells"][at]
        if cell is None:
            continue
        scored = cell.get(body.mode)
        series.append({"method": row["method"], "label": row["label"],
                       "refused": cell.get("refused"),
                       "loss": scored["loss"] if scored else None,
                       "buckets": scored["by_position"] if scored else []})
    return {"experiment": body.experiment, "trained_length": results["trained_length"],
            "length": body.length, "mode": body.mode, "series": series,
            "shipped": shipped_results.label(results) if body.shipped else None,
            "quick": is_quick(results),
            "undecided_line": results.get("undecided_line")}


def _results(runs: Runs, name: str, shipped: bool = False) -> dict[str, Any]:
    """A context experiment's results.json, the folder checked to lie inside the runs
    folder (as a run name is); or, shipped, the results gptlab ships."""
    if shipped:
        results = shipped_results.load(CONTEXT_EXPERIMENT) if name == CONTEXT_EXPERIMENT \
            else None
        if results is None:
            raise UsageError(f"no shipped results of a context experiment named "
                             f"{name[:60]!r} (the one shipped: {CONTEXT_EXPERIMENT!r})")
        return results
    folder = experiment_folder(runs, name, CONTEXT_EXPERIMENT)
    if folder is None:
        raise UsageError(f"no context experiment named {name!r} in the runs folder (one "
                         f"holds {RESULTS_FILE} from `gptlab experiment context`)")
    return read_json_object(folder / RESULTS_FILE, "experiment results")
