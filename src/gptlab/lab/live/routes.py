"""The routes of the watch-it-learn view (view 9): one training at a time in the background,
its events streamed. Bodies and answers are gptlab.lab.live.schemas; 400 with one line for
bad input, 409 when the training slot is taken or empty. The slot
(gptlab.lab.live.training.LiveTrainer) is made by create_app, kept on app.state and reached
through LiveDep; create_app includes `router`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from gptlab.lab.live import estimate, schemas
from gptlab.lab.live.training import MAX_FOLLOWERS, LiveTrainer, sse
from gptlab.lab.responses import BAD_INPUT, BUSY, EVENTS, Error, Followed
from gptlab.web.body import area_router


def live_of(request: Request) -> LiveTrainer:
    return request.app.state.live


LiveDep = Annotated[LiveTrainer, Depends(live_of)]

router = area_router()


@router.post("/api/live/start", response_model=schemas.LiveStatus,
             responses={**BAD_INPUT, **BUSY})
def live_start(body: schemas.LiveStartRequest, trainer: LiveDep) -> JSONResponse:
    """Start a training in the background (one at a time); follow /api/live/events."""
    return JSONResponse(trainer.start(body.task, body.steps, body.every, body.seed))


@router.post("/api/live/estimate", response_model=schemas.LiveEstimate, responses=BAD_INPUT)
def live_estimate_route(body: schemas.LiveEstimateRequest) -> JSONResponse:
    """How long a training would take here, estimated from a short probe (the first call
    per task takes about a second)."""
    return JSONResponse(estimate.estimate(body.task, body.steps, body.every))


@router.post("/api/live/stop", response_model=schemas.LiveStatus,
             responses={**BAD_INPUT, **BUSY})
def live_stop(trainer: LiveDep) -> JSONResponse:
    """Ask the running training to checkpoint and stop at its next step."""
    return JSONResponse(trainer.stop())


@router.get("/api/live/status", response_model=schemas.LiveStatus)
def live_status(trainer: LiveDep) -> JSONResponse:
    """Whether a training runs, which, and how far it is."""
    return JSONResponse(trainer.status())


@router.get("/api/live/events", response_class=StreamingResponse,
            responses={**EVENTS, 404: {"model": Error,
                                       "description": "No training has started yet"},
                       429: {"model": Error, "description": f"{MAX_FOLLOWERS} event "
                                                            f"streams are open already"}})
def live_events(trainer: LiveDep) -> Any:
    """The latest training's events from its start, streamed until it ends."""
    session = trainer.session
    if session is None:
        return JSONResponse({"error": "no training has started yet: POST /api/live/start"},
                            status_code=404)
    return Followed(sse(session.follow()), trainer.follower())
