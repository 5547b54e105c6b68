"""What the lab's routes share, as FastAPI dependencies: the runs folder (gptlab.lab.runs.Runs)
and the live-training slot (gptlab.lab.live.LiveTrainer), both made once by
gptlab.lab.server.create_app and kept on app.state, so a route takes `runs: RunsDep`
instead of closing over a variable of create_app."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gptlab.lab.live import LiveTrainer
from gptlab.lab.runs import Runs


def runs_of(request: Request) -> Runs:
    return request.app.state.runs


def live_of(request: Request) -> LiveTrainer:
    return request.app.state.live


RunsDep = Annotated[Runs, Depends(runs_of)]
LiveDep = Annotated[LiveTrainer, Depends(live_of)]
