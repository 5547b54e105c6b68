"""The routes of the views that look into a run: its attention patterns and heads (view 3),
head scores and ablation (view 6), the whole model for one token, every head at a glance,
its learned positions, and the runs to pick from. Bodies and answers are
gptlab.lab.model_schemas (bodies checked by pydantic, 400 with one line for bad input);
create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab import allheads, api, layersteps, learnedpos, wholemodel
from gptlab.lab import model_schemas as ms
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.post("/api/heads", response_model=ms.HeadsResponse, responses=BAD_INPUT)
def heads(body: ms.HeadsRequest, runs: RunsDep) -> JSONResponse:
    """A run's attention patterns and one layer's heads, concat and W_O (view 3)."""
    return JSONResponse(api.heads_view(runs, body))


@router.post("/api/head_scores", response_model=ms.HeadScoresResponse, responses=BAD_INPUT)
def head_scores(body: ms.HeadScoresRequest, runs: RunsDep) -> JSONResponse:
    """Previous-token, duplicate and induction scores of every head (view 6)."""
    return JSONResponse(api.head_scores_view(runs, body))


@router.post("/api/ablate", response_model=ms.AblateResponse, responses=BAD_INPUT)
def ablate(body: ms.AblateRequest, runs: RunsDep) -> JSONResponse:
    """The loss with one head switched off (view 6)."""
    return JSONResponse(api.ablate_view(runs, body))


@router.get("/api/runs", response_model=ms.RunsResponse)
def list_runs(runs: RunsDep) -> JSONResponse:
    """The runs in the runs folder."""
    return JSONResponse(api.runs_view(runs))


@router.post("/api/runs/encoding", response_model=ms.RunsEncodingResponse, responses=BAD_INPUT)
def runs_encoding(body: ms.RunsEncodingRequest, runs: RunsDep) -> JSONResponse:
    """The runs whose tokenizer encodes a text: a view's run picker defaults to one."""
    return JSONResponse(api.runs_encoding_view(runs, body))


@router.post("/api/walk", response_model=ms.WalkResponse, responses=BAD_INPUT)
def walk(body: ms.WalkRequest, runs: RunsDep) -> JSONResponse:
    """One token through the whole model: embeddings, every block's norms, attention,
    adds and FFN, the final norm and the logits, with the stream's norm and logit lens
    after every add, and the run's parameters by part (whole-model view)."""
    return JSONResponse(wholemodel.walk_view(runs, body))


@router.post("/api/walk/layer", response_model=ms.LayerStepsResponse, responses=BAD_INPUT)
def walk_layer(body: ms.LayerStepsRequest, runs: RunsDep) -> JSONResponse:
    """One block of the walk step by step: view 1's attention stages on the run's model for
    one token, layer and head (q, keys, q.k, /sqrt(d_k), mask, softmax, weights . V, concat,
    W_O), and the FFN's top units with their values' tokens."""
    return JSONResponse(layersteps.layer_steps_view(runs, body))


@router.post("/api/all_heads", response_model=ms.AllHeadsResponse, responses=BAD_INPUT)
def all_heads(body: ms.AllHeadsRequest, runs: RunsDep) -> JSONResponse:
    """Every layer's and head's attention pattern for a prompt (all-heads view)."""
    return JSONResponse(allheads.all_heads_view(runs, body))


@router.post("/api/learned_positions", response_model=ms.LearnedPositionsResponse,
             responses=BAD_INPUT)
def learned_positions(body: ms.LearnedPositionsRequest, runs: RunsDep) -> JSONResponse:
    """A run's learned position table, PE . PE^T and nearest neighbours (positions
    view)."""
    return JSONResponse(learnedpos.learned_positions_view(runs, body))
