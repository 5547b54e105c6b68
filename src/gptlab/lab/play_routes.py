"""The HTTP routes of the next-token, logit-lens and watch-it-learn views, added to the lab's app by
gptlab.lab.server.create_app (same conventions: JSON bodies checked by pydantic, 400 with
one line for bad input; 409 with one line when the training slot is taken or empty)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse

from gptlab.lab import lensview, live, nexttoken
from gptlab.lab import play_schemas as mp
from gptlab.lab import responses as res
from gptlab.lab.runs import Runs

BUSY = {409: {"model": res.Error, "description": "A training is running (start), or none "
                                                 "is (stop, events)"}}
EVENTS = {200: {"description": "Server-Sent Events, one `data: <LiveEvent JSON>` each, "
                               "until the `end` event",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


def register(app: FastAPI, runs: Runs, bad_input: dict[int, Any]) -> live.LiveTrainer:
    trainer = live.LiveTrainer(runs.root)

    @app.post("/api/next_token", response_model=mp.NextTokenResponse, responses=bad_input)
    def next_token(body: mp.NextTokenRequest) -> JSONResponse:
        """A run's next-token distribution, filter by filter, and where its newest token
        looks (next-token view)."""
        return JSONResponse(nexttoken.next_token_view(runs, body))

    @app.post("/api/next_token/append", response_model=mp.AppendResponse, responses=bad_input)
    def append(body: mp.AppendRequest) -> JSONResponse:
        """The text with one more token: greedy, or sampled with a seed."""
        return JSONResponse(nexttoken.append_view(runs, body))

    @app.post("/api/lens", response_model=mp.LensResponse, responses=bad_input)
    def logit_lens(body: mp.LensRequest) -> JSONResponse:
        """The logit lens's grid (top tokens by depth and position) and the direct logit
        attribution of one next token (logit-lens view)."""
        return JSONResponse(lensview.lens_view(runs, body))

    @app.post("/api/live/start", response_model=mp.LiveStatus,
              responses={**bad_input, **BUSY})
    def live_start(body: mp.LiveStartRequest) -> JSONResponse:
        """Start a training in the background (one at a time); follow /api/live/events."""
        return JSONResponse(trainer.start(body.task, body.steps, body.every, body.seed))

    @app.post("/api/live/stop", response_model=mp.LiveStatus, responses={**bad_input, **BUSY})
    def live_stop() -> JSONResponse:
        """Ask the running training to checkpoint and stop at its next step."""
        return JSONResponse(trainer.stop())

    @app.get("/api/live/status", response_model=mp.LiveStatus)
    def live_status() -> JSONResponse:
        """Whether a training runs, which, and how far it is."""
        return JSONResponse(trainer.status())

    @app.get("/api/live/events", response_class=StreamingResponse,
             responses={**EVENTS, 404: {"model": res.Error,
                                        "description": "No training has started yet"},
                        429: {"model": res.Error, "description": f"{live.MAX_FOLLOWERS} event "
                                                                 f"streams are open already"}})
    def live_events() -> Any:
        """The latest training's events from its start, streamed until it ends."""
        session = trainer.session
        if session is None:
            return JSONResponse({"error": "no training has started yet: POST /api/live/start"},
                                status_code=404)
        return Followed(live.sse(session.follow()), trainer.follower())

    return trainer


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
