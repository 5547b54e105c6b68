"""The "Longer than trained" view: a model past its training length.

- an experiment of `gptlab experiment context` (its results.json): every encoding's and
  scaling's loss by position in windows of one length, the training length marked; where
  the runs folder holds no full-size one, the results gptlab ships
  (gptlab.experiments.shipped_results, labelled with the machine and date); a --quick run
  (from the page: gptlab.lab.quickrun) is listed beside them, marked quick;
- a run, live: its loss by position in non-overlapping windows of any context (RoPE
  stretched by a scaling if asked), and one head's attention at a query position, which
  may be one the model never saw. Its defaults work for any run, the shipped model on a
  fresh install included: the context is twice the run's training length (its training
  length where positions are a learned table, which has no row past it), and the text the
  experiment's eval.txt, else the embedded Shakespeare's validation tenth (the part of the
  corpus the shipped model did not train on).

Its schemas, routes and computations live here, in one module: `router` holds the routes,
which server.create_app includes. The numbers are the library's own (gptlab.inference.evaluate's
score_positions, the attention weights of gptlab.interp.hooks), as `gptlab eval
--by-position` and `gptlab heads` compute them.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Literal

import torch
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from gptlab.data.corpus import shakespeare_text
from gptlab.data.text import split_text
from gptlab.data.tokenizer import encode_checked
from gptlab.errors import UsageError
from gptlab.experiments import shipped_results
from gptlab.experiments.context import EVAL_TEXT, MODES
from gptlab.experiments.context import NAME as CONTEXT_EXPERIMENT
from gptlab.experiments.grid import experiment_of
from gptlab.experiments.report import RESULTS_FILE
from gptlab.files.atomic import read_json_object
from gptlab.inference.evaluate import score_positions
from gptlab.interp.hooks import eval_mode, recording_attention
from gptlab.lab.experimentsview import (
    QUICK,
    SHIPPED,
    experiment_folder,
    experiment_folders,
    is_quick,
)
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.runs import Runs
from gptlab.lab.schemas import MAX_PROMPT_CHARS, Body, RunName, _int, _text
from gptlab.lab.state import RunsDep
from gptlab.loading import with_config
from gptlab.model.config import with_rope_scaling
from gptlab.model.positional import ContextWarning, check_context
from gptlab.web.body import area_router

MAX_CONTEXT = 1024  # the longest window the view runs a model at
MAX_SCORED = 4096  # tokens of text scored (the first ones)
MAX_BUCKETS = 64
SCALINGS = ("linear", "ntk", "yarn", "dynamic")


# ----------------------------------------------------------------------------- schemas


class ContextRequest(Body):
    run: RunName
    context: _int(2, MAX_CONTEXT, "window length; past the run's block_size for every "
                                  "encoding but learned positions (default: twice its "
                                  "block_size, or block_size for learned positions)") | None \
        = None
    rope_scaling: Literal[SCALINGS] | None = Field(
        None, description="stretch RoPE by context / block_size (at least 1) with this rule")
    text: _text(MAX_PROMPT_CHARS * 8, "text to score (default: the experiment's eval.txt "
                                      "when the run is one of an experiment's, else the "
                                      "embedded Shakespeare's validation tenth)") | None = None
    buckets: _int(1, MAX_BUCKETS, "position buckets") = 16
    layer: _int(0, 1000) = 0
    head: _int(0, 1000) = 0
    position: _int(0, MAX_CONTEXT - 1, "query position of the attention row (default: the "
                                       "window's last)") | None = None


class ExperimentRequest(Body):
    experiment: _text(500, "an experiment's folder inside the runs folder", min_length=1)
    length: _int(1, 10**6, "one of the experiment's evaluation lengths") = 256
    mode: Literal[MODES] = "non-overlapping"
    shipped: bool = SHIPPED


class Bucket(BaseModel):
    first: int
    last: int
    tokens: int
    loss: float | None = Field(description="mean loss (nats/token); null: none scored")


class AttentionRow(BaseModel):
    layer: int
    head: int
    position: int = Field(description="the query position")
    weights: list[float] = Field(description="its weight on each key 0..position")
    tokens: list[str] = Field(description="the window's tokens 0..position")


class ContextResponse(BaseModel):
    run: str
    block_size: int
    pos_encoding: str
    context: int
    rope_scaling: str | None = Field(description="KIND:FACTOR applied, or null")
    warning: str | None = Field(description="the model never saw some of these positions")
    source: str = Field(description="what was scored")
    loss: float
    tokens_scored: int
    buckets: list[Bucket]
    attention: AttentionRow


class Experiment(BaseModel):
    name: str
    trained_length: int
    lengths: list[int]
    runs: list[str] = Field(description="its runs, as the lab names them")
    shipped: str | None = Field(None, description="shipped results: their label; null: the "
                                                  "runs folder's")
    quick: bool = QUICK


class ExperimentsResponse(BaseModel):
    experiments: list[Experiment]


class Series(BaseModel):
    method: str
    label: str
    refused: str | None = Field(description="why this method has no loss at this length")
    loss: float | None
    buckets: list[Bucket]


class ExperimentResponse(BaseModel):
    experiment: str
    trained_length: int
    length: int
    mode: str
    series: list[Series]
    shipped: str | None = Field(None, description="shipped results: their label")
    quick: bool = QUICK
    undecided_line: str | None = Field(None, description="a run too small to decide anything "
                                                         "says so here")


# ----------------------------------------------------------------------------- routes


router = area_router()


@router.post("/api/context", response_model=ContextResponse, responses=BAD_INPUT)
def context(body: ContextRequest, runs: RunsDep) -> JSONResponse:
    """A run's loss by position in windows of `context` tokens, and one head's
    attention at a query position (longer-than-trained view)."""
    return JSONResponse(context_view(runs, body))


@router.get("/api/context/experiments", response_model=ExperimentsResponse)
def experiments(runs: RunsDep) -> JSONResponse:
    """The context experiments in the runs folder, and the shipped one unless one of them
    is full-size."""
    return JSONResponse({"experiments": list_experiments(runs)})


@router.post("/api/context/experiment", response_model=ExperimentResponse,
             responses=BAD_INPUT)
def experiment(body: ExperimentRequest, runs: RunsDep) -> JSONResponse:
    """Every method's loss by position at one length, from an experiment's
    results.json (longer-than-trained view)."""
    return JSONResponse(experiment_view(runs, body))


# ----------------------------------------------------------------------------- views


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


def experiment_view(runs: Runs, body: ExperimentRequest) -> dict[str, Any]:
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


def default_context(config) -> int:
    """Twice the training length, past what the model saw; a learned table has no row past
    its block_size, so there the training length itself."""
    if config.pos_encoding == "learned":
        return config.block_size
    return min(MAX_CONTEXT, 2 * config.block_size)


def context_view(runs: Runs, body: ContextRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    config = run.model.config
    context = default_context(config) if body.context is None else body.context
    warning = check_context(config, context)  # learned positions refuse, by name
    if not (body.layer < config.n_layer and body.head < config.n_head):
        raise UsageError(f"layer {body.layer}, head {body.head}: the run has {config.n_layer} "
                         f"layers of {config.n_head} heads")
    position = context - 1 if body.position is None else body.position
    if position >= context:
        raise UsageError(f"position {position} is outside the window of {context}")
    text, source = _text_of(runs, body, run.tokenizer)
    ids = encode_checked(run.tokenizer, text, "the text", 10**9, min_tokens=2)[:MAX_SCORED]
    ids = torch.tensor(ids)
    if position >= len(ids):
        raise UsageError(f"position {position}: the text has only {len(ids)} tokens")
    spec = None
    if body.rope_scaling is not None:
        factor = max(1.0, context / config.block_size)
        spec = f"{body.rope_scaling}:{factor:g}"
    with runs.model_lock, torch.no_grad():
        model = run.model if spec is None else with_config(
            run.model, with_rope_scaling(config, spec))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ContextWarning)  # answered as `warning`
            scores = score_positions(model, ids, context=context, stride=context)
        window = ids[: position + 1][None]
        with eval_mode(model), recording_attention(model) as modules:
            model(window)
            row = modules[body.layer].weights[0, body.head, -1]
    decode = run.tokenizer.decode
    return {
        "run": run.name, "block_size": config.block_size, "pos_encoding": config.pos_encoding,
        "context": context, "rope_scaling": spec, "warning": warning, "source": source,
        "loss": scores.loss, "tokens_scored": sum(scores.scored),
        "buckets": scores.buckets(body.buckets),
        "attention": {"layer": body.layer, "head": body.head, "position": position,
                      "weights": [float(w) for w in row.double()],
                      "tokens": [decode([i]) for i in window[0].tolist()]},
    }


SHAKESPEARE_VAL = "the embedded Shakespeare's validation tenth"


@functools.lru_cache(maxsize=1)
def shakespeare_val() -> str:
    """The start of the embedded Shakespeare's validation split (its last tenth, as `gptlab
    prepare shakespeare` splits it): enough characters for MAX_SCORED tokens of any
    tokenizer that encodes it."""
    return split_text(shakespeare_text(), 0.1)[1][: 8 * MAX_SCORED]


def _text_of(runs: Runs, body: ContextRequest, tokenizer) -> tuple[str, str]:
    """The text to score: the request's; the eval.txt of the experiment the run is in; else
    the embedded Shakespeare's validation tenth, where the run's tokenizer encodes it."""
    if body.text:
        return body.text, "the text given"
    folder = runs.resolve(body.run).parent.parent  # EXPERIMENT/runs/NAME
    if experiment_of(folder) == CONTEXT_EXPERIMENT and (folder / EVAL_TEXT).is_file():
        return (folder / EVAL_TEXT).read_text(encoding="utf-8"), \
            f"{folder.relative_to(runs.root).as_posix()}/{EVAL_TEXT}"
    text = shakespeare_val()
    try:
        encode_checked(tokenizer, text, SHAKESPEARE_VAL, 10**9)
    except UsageError:
        raise UsageError(f"text is empty, the run is not one of a context experiment's and "
                         f"its vocabulary does not hold {SHAKESPEARE_VAL}: give a text to "
                         f"score") from None
    return text, SHAKESPEARE_VAL


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
