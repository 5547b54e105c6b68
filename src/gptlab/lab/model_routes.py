"""The HTTP routes of the views that look at a whole run (the whole model for one token,
every head at a glance, a run's learned positions), added to the lab's app by
gptlab.lab.server.create_app (same conventions: JSON bodies checked by pydantic, 400 with
one line for bad input)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from gptlab.lab import allheads, learnedpos, wholemodel
from gptlab.lab import model_schemas as ms
from gptlab.lab.runs import Runs


def register(app: FastAPI, runs: Runs, bad_input: dict[int, Any]) -> None:
    @app.post("/api/walk", response_model=ms.WalkResponse, responses=bad_input)
    def walk(body: ms.WalkRequest) -> JSONResponse:
        """One token through the whole model: embeddings, every block's norms, attention,
        adds and FFN, the final norm and the logits, with the stream's norm and logit lens
        after every add, and the run's parameters by part (whole-model view)."""
        return JSONResponse(wholemodel.walk_view(runs, body))

    @app.post("/api/all_heads", response_model=ms.AllHeadsResponse, responses=bad_input)
    def all_heads(body: ms.AllHeadsRequest) -> JSONResponse:
        """Every layer's and head's attention pattern for a prompt (all-heads view)."""
        return JSONResponse(allheads.all_heads_view(runs, body))

    @app.post("/api/learned_positions", response_model=ms.LearnedPositionsResponse,
              responses=bad_input)
    def learned_positions(body: ms.LearnedPositionsRequest) -> JSONResponse:
        """A run's learned position table, PE . PE^T and nearest neighbours (positions
        view)."""
        return JSONResponse(learnedpos.learned_positions_view(runs, body))
