"""The routes of the longer-than-trained view (view 11): a run's loss by position at a
context past its training length with one head's attention row, and the context
experiment's curves. Bodies and answers are gptlab.lab.context.schemas (bodies checked by
pydantic, 400 with one line for bad input); create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab.context import schemas
from gptlab.lab.context.results import experiment_view, list_experiments
from gptlab.lab.context.window import context_view
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.post("/api/context", response_model=schemas.ContextResponse, responses=BAD_INPUT)
def context(body: schemas.ContextRequest, runs: RunsDep) -> JSONResponse:
    """A run's loss by position in windows of `context` tokens, and one head's
    attention at a query position (longer-than-trained view)."""
    return JSONResponse(context_view(runs, body))


@router.get("/api/context/experiments", response_model=schemas.ExperimentsResponse)
def experiments(runs: RunsDep) -> JSONResponse:
    """The context experiments in the runs folder, and the shipped one unless one of them
    is full-size."""
    return JSONResponse({"experiments": list_experiments(runs)})


@router.post("/api/context/experiment", response_model=schemas.ExperimentResponse,
             responses=BAD_INPUT)
def experiment(body: schemas.ExperimentRequest, runs: RunsDep) -> JSONResponse:
    """Every method's loss by position at one length, from an experiment's
    results.json (longer-than-trained view)."""
    return JSONResponse(experiment_view(runs, body))
