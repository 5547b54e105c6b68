"""The routes of the next-token and logit-lens views (views 8 and 10): what a run predicts.
Bodies and answers are gptlab.lab.prediction.schemas (same conventions: JSON bodies checked
by pydantic, 400 with one line for bad input); create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab.prediction import schemas
from gptlab.lab.prediction.lens import lens_view
from gptlab.lab.prediction.nexttoken import append_view, next_token_view
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.post("/api/next_token", response_model=schemas.NextTokenResponse, responses=BAD_INPUT)
def next_token(body: schemas.NextTokenRequest, runs: RunsDep) -> JSONResponse:
    """A run's next-token distribution, filter by filter, and where its newest token
    looks (next-token view)."""
    return JSONResponse(next_token_view(runs, body))


@router.post("/api/next_token/append", response_model=schemas.AppendResponse, responses=BAD_INPUT)
def append(body: schemas.AppendRequest, runs: RunsDep) -> JSONResponse:
    """The text with one more token: greedy, or sampled with a seed."""
    return JSONResponse(append_view(runs, body))


@router.post("/api/lens", response_model=schemas.LensResponse, responses=BAD_INPUT)
def logit_lens(body: schemas.LensRequest, runs: RunsDep) -> JSONResponse:
    """The logit lens's grid (top tokens by depth and position) and the direct logit
    attribution of one next token (logit-lens view)."""
    return JSONResponse(lens_view(runs, body))
