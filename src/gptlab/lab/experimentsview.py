"""The "Experiments" view: any experiment's report (`gptlab experiment NAME`) from its
results.json, as the tables it prints and the figures it drew, with the runs of its grid
(ordinary runs: every other view opens them).

An experiment the runs folder holds no full-size results of is listed with the results
gptlab ships (gptlab.experiments.shipped_results: its default size, run once, labelled with
the machine and the date), so a fresh install shows real numbers; the user's own results of
that experiment at its default size (`gptlab experiment NAME`) replace them. A `--quick` run
(from the page: gptlab.lab.quickrun) is one small seed, too small to decide a claim: it is
listed beside the shipped results, marked quick, and replaces nothing.

Its schemas, routes and computations live here, in one module: `router` holds the routes,
which server.create_app includes. The tables are the experiment module's own (gptlab.experiments.
catalog.summary), the same `gptlab experiment` prints.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from gptlab.errors import UsageError
from gptlab.experiments import catalog, shipped_results
from gptlab.experiments.grid import RUNS_DIR, experiment_of
from gptlab.experiments.report import RESULTS_FILE
from gptlab.files.atomic import read_json_object
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.runs import MAX_DEPTH, Runs, is_run
from gptlab.lab.schemas import Body, _text
from gptlab.lab.state import RunsDep
from gptlab.training.runs import find_folders
from gptlab.web.body import area_router

# ----------------------------------------------------------------------------- schemas


SHIPPED = Field(False, description="experiment names an experiment (context, norm, ...) "
                                   "whose shipped results are read, not a folder")
QUICK = Field(False, description="a --quick run's results (one small seed): listed beside "
                                 "the shipped results, not instead of them")


class ReportRequest(Body):
    experiment: _text(500, "an experiment's folder inside the runs folder", min_length=1)
    shipped: bool = SHIPPED


class ExperimentEntry(BaseModel):
    name: str = Field(description="its folder, relative to the runs folder; for shipped "
                                  "results, the experiment's name")
    experiment: str = Field(description="which experiment (context, norm, scale, ...)")
    shipped: str | None = Field(None, description="shipped results: what they are and where "
                                                  "and when they were measured; null: the "
                                                  "runs folder's")
    quick: bool = QUICK


class ExperimentList(BaseModel):
    experiments: list[ExperimentEntry]


class Table(BaseModel):
    title: str
    header: list[str]
    rows: list[list[str]]


class Precondition(BaseModel):
    """What must hold before a claim can be judged at all (a model that learned its task):
    unmet, the claim is undecided."""

    text: str
    value: float | None
    threshold: float
    met: bool


class ClaimVerdict(BaseModel):
    """One claim judged (gptlab.experiments.claims.evaluate), as results.json holds it; the
    last three fields are absent from results written before they were."""

    key: str
    sentence: str = Field(description="the chapter's claim")
    paper: str = Field(description="the paper's figure beside it")
    quantity: str = Field(description="what was measured")
    this_run: str = Field(description="what this run shows")
    verdict: str = Field(description="held, held weakly, not seen, contradicted or undecided")
    rule: str
    seeds: list[int]
    effects: list[float | None] = Field(description="the effect, per seed")
    mean: float | None
    spread: float | None = Field(description="max - min of the effects; None for one seed")
    precondition: Precondition | None = None
    units: str | None = Field(None, description="what the effects run over: 'seeds "
                                                "1337/1338/1339', 'slices 0/1/2'")
    verdict_line: str | None = Field(None, description="the whole verdict in words, with its "
                                                       "numbers and why")


class Figure(BaseModel):
    file: str
    png: str = Field(description="the figure as a data: URL (image/png, base64)")


class ReportResponse(BaseModel):
    name: str
    experiment: str
    title: str
    tables: list[Table]
    claims: list[ClaimVerdict] = Field(description="its claims, judged on its numbers")
    figures: list[Figure]
    timing: str
    runs: list[str] = Field(description="its runs, as the lab names them")
    shipped: str | None = Field(None, description="shipped results: their label; null: the "
                                                  "runs folder's")
    quick: bool = QUICK
    undecided_line: str | None = Field(None, description="a run too small to decide anything "
                                                         "says so here")
    threads: int | None = Field(None, description="the torch threads its models trained at, "
                                                  "where results.json records them")


# ----------------------------------------------------------------------------- routes


router = area_router()


@router.get("/api/experiments", response_model=ExperimentList)
def experiments(runs: RunsDep) -> JSONResponse:
    """Every experiment in the runs folder that has written its results, then the shipped
    results of every experiment the runs folder has none of."""
    return JSONResponse({"experiments": list_experiments(runs)})


@router.post("/api/experiments/report", response_model=ReportResponse, responses=BAD_INPUT)
def report(body: ReportRequest, runs: RunsDep) -> JSONResponse:
    """One experiment's tables and figures, from its results.json (experiments view)."""
    if body.shipped:
        return JSONResponse(shipped_report(body.experiment))
    return JSONResponse(report_view(runs, body.experiment))


# ----------------------------------------------------------------------------- views


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
