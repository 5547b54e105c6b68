"""What the lab's areas share, as a FastAPI dependency: the runs folder
(gptlab.lab.runs.Runs), made once by gptlab.lab.server.create_app and kept on app.state, so
a route takes `runs: RunsDep` instead of closing over a variable of create_app. A slot only
one area uses is reached through that area's own dependency, beside its routes
(gptlab.lab.live.routes.LiveDep, gptlab.lab.experiments.routes.QuickDep), so this module
imports no area."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gptlab.lab.runs import Runs


def runs_of(request: Request) -> Runs:
    return request.app.state.runs


RunsDep = Annotated[Runs, Depends(runs_of)]
