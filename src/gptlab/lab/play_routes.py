"""The routes of the next-token and logit-lens views (views 8 and 10). Bodies and answers
are gptlab.lab.play_schemas (same conventions: JSON bodies checked by pydantic, 400 with
one line for bad input); create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab import lensview, nexttoken
from gptlab.lab import play_schemas as mp
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.post("/api/next_token", response_model=mp.NextTokenResponse, responses=BAD_INPUT)
def next_token(body: mp.NextTokenRequest, runs: RunsDep) -> JSONResponse:
    """A run's next-token distribution, filter by filter, and where its newest token
    looks (next-token view)."""
    return JSONResponse(nexttoken.next_token_view(runs, body))


@router.post("/api/next_token/append", response_model=mp.AppendResponse, responses=BAD_INPUT)
def append(body: mp.AppendRequest, runs: RunsDep) -> JSONResponse:
    """The text with one more token: greedy, or sampled with a seed."""
    return JSONResponse(nexttoken.append_view(runs, body))


@router.post("/api/lens", response_model=mp.LensResponse, responses=BAD_INPUT)
def logit_lens(body: mp.LensRequest, runs: RunsDep) -> JSONResponse:
    """The logit lens's grid (top tokens by depth and position) and the direct logit
    attribution of one next token (logit-lens view)."""
    return JSONResponse(lensview.lens_view(runs, body))
