"""The routes of the watch-it-learn view (view 9): one training at a time in the background,
its events streamed. Bodies and answers are gptlab.lab.live_schemas; 400 with one line for
bad input, 409 when the training slot is taken or empty. The slot
(gptlab.lab.live.LiveTrainer) is made by create_app and reached through
gptlab.lab.state.LiveDep; create_app includes `router`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from gptlab.lab import live, live_estimate
from gptlab.lab import live_schemas as ml
from gptlab.lab.responses import BAD_INPUT, Error
from gptlab.lab.state import LiveDep
from gptlab.web.body import area_router

BUSY = {409: {"model": Error, "description": "A training is running (start), or none "
                                             "is (stop, events)"}}
EVENTS = {200: {"description": "Server-Sent Events, one `data: <LiveEvent JSON>` each, "
                               "until the `end` event",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}}

router = area_router()


@router.post("/api/live/start", response_model=ml.LiveStatus, responses={**BAD_INPUT, **BUSY})
def live_start(body: ml.LiveStartRequest, trainer: LiveDep) -> JSONResponse:
    """Start a training in the background (one at a time); follow /api/live/events."""
    return JSONResponse(trainer.start(body.task, body.steps, body.every, body.seed))


@router.post("/api/live/estimate", response_model=ml.LiveEstimate, responses=BAD_INPUT)
def live_estimate_route(body: ml.LiveEstimateRequest) -> JSONResponse:
    """How long a training would take here, estimated from a short probe (the first call
    per task takes about a second)."""
    return JSONResponse(live_estimate.estimate(body.task, body.steps, body.every))


@router.post("/api/live/stop", response_model=ml.LiveStatus, responses={**BAD_INPUT, **BUSY})
def live_stop(trainer: LiveDep) -> JSONResponse:
    """Ask the running training to checkpoint and stop at its next step."""
    return JSONResponse(trainer.stop())


@router.get("/api/live/status", response_model=ml.LiveStatus)
def live_status(trainer: LiveDep) -> JSONResponse:
    """Whether a training runs, which, and how far it is."""
    return JSONResponse(trainer.status())


@router.get("/api/live/events", response_class=StreamingResponse,
            responses={**EVENTS, 404: {"model": Error,
                                       "description": "No training has started yet"},
                       429: {"model": Error, "description": f"{live.MAX_FOLLOWERS} event "
                                                            f"streams are open already"}})
def live_events(trainer: LiveDep) -> Any:
    """The latest training's events from its start, streamed until it ends."""
    session = trainer.session
    if session is None:
        return JSONResponse({"error": "no training has started yet: POST /api/live/start"},
                            status_code=404)
    return Followed(live.sse(session.follow()), trainer.follower())


class Followed(StreamingResponse):
    """An event stream that gives its follower slot back when it ends, however it ends
    (the training's end, the client gone, an error)."""

    def __init__(self, events: Iterator[str], release: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache"})
        self.release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()
