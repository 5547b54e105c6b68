"""The routes of the experiments view (view 14) and of an experiment's --quick form run
from the page (views 11 and 14): the experiments in the runs folder and those gptlab ships,
one's report, and the one quick-run slot with its events streamed. Bodies and answers are
gptlab.lab.experiments.schemas (400 with one line for bad input, 409 when the slot is taken);
the slot (gptlab.lab.experiments.quickrun.QuickRunner) is made by create_app, kept on
app.state and reached through QuickDep; create_app includes `router`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from gptlab.lab.experiments import schemas
from gptlab.lab.experiments.quickrun import QuickRunner
from gptlab.lab.experiments.report import list_experiments, report_view, shipped_report
from gptlab.lab.live.training import sse
from gptlab.lab.responses import BAD_INPUT, BUSY, EVENTS, Error, Followed
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router


def runner_of(request: Request) -> QuickRunner:
    return request.app.state.quick


QuickDep = Annotated[QuickRunner, Depends(runner_of)]


router = area_router()


@router.get("/api/experiments", response_model=schemas.ExperimentList)
def experiments(runs: RunsDep) -> JSONResponse:
    """Every experiment in the runs folder that has written its results, then the shipped
    results of every experiment the runs folder has none of."""
    return JSONResponse({"experiments": list_experiments(runs)})


@router.post("/api/experiments/report", response_model=schemas.ReportResponse,
             responses=BAD_INPUT)
def report(body: schemas.ReportRequest, runs: RunsDep) -> JSONResponse:
    """One experiment's tables and figures, from its results.json (experiments view)."""
    if body.shipped:
        return JSONResponse(shipped_report(body.experiment))
    return JSONResponse(report_view(runs, body.experiment))


@router.post("/api/experiments/quick", response_model=schemas.QuickStatus,
             responses={**BAD_INPUT, **BUSY})
def quick_start(body: schemas.QuickRequest, runner: QuickDep) -> JSONResponse:
    """Run an experiment's --quick form into RUNS/NAME-quick in the background (one at a
    time); follow /api/experiments/quick/events."""
    return JSONResponse(runner.start(body.experiment, body.seed))


@router.get("/api/experiments/quick/status", response_model=schemas.QuickStatus)
def quick_status(runner: QuickDep) -> JSONResponse:
    """Whether an experiment runs, which, and into which folder."""
    return JSONResponse(runner.status())


@router.get("/api/experiments/quick/events",
            responses={**EVENTS, 404: {"model": Error, "description": "None has started"},
                       429: {"model": Error, "description": "Too many event streams"}})
def quick_events(runner: QuickDep) -> Any:
    """The latest experiment run's events from its start, streamed until it ends."""
    session = runner.session
    if session is None:
        return JSONResponse({"error": "no experiment has started yet: POST "
                                      "/api/experiments/quick"}, status_code=404)
    return Followed(sse(session.follow()), runner.follower())
