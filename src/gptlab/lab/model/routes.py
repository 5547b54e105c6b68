"""The routes of the views that look into a run: its attention patterns and heads (view 3),
head scores and ablation (view 6), the whole model for one token, every head at a glance,
its learned positions, and the runs to pick from. Bodies and answers are
gptlab.lab.model.schemas (bodies checked by pydantic, 400 with one line for bad input);
create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab.model import schemas
from gptlab.lab.model.allheads import all_heads_view
from gptlab.lab.model.heads import heads_view
from gptlab.lab.model.layersteps import layer_steps_view
from gptlab.lab.model.learnedpos import learned_positions_view
from gptlab.lab.model.picker import runs_encoding_view, runs_view
from gptlab.lab.model.scores import ablate_view, head_scores_view
from gptlab.lab.model.wholemodel import walk_view
from gptlab.lab.responses import BAD_INPUT
from gptlab.lab.state import RunsDep
from gptlab.web.body import area_router

router = area_router()


@router.post("/api/heads", response_model=schemas.HeadsResponse, responses=BAD_INPUT)
def heads(body: schemas.HeadsRequest, runs: RunsDep) -> JSONResponse:
    """A run's attention patterns and one layer's heads, concat and W_O (view 3)."""
    return JSONResponse(heads_view(runs, body))


@router.post("/api/head_scores", response_model=schemas.HeadScoresResponse, responses=BAD_INPUT)
def head_scores(body: schemas.HeadScoresRequest, runs: RunsDep) -> JSONResponse:
    """Previous-token, duplicate and induction scores of every head (view 6)."""
    return JSONResponse(head_scores_view(runs, body))


@router.post("/api/ablate", response_model=schemas.AblateResponse, responses=BAD_INPUT)
def ablate(body: schemas.AblateRequest, runs: RunsDep) -> JSONResponse:
    """The loss with one head switched off (view 6)."""
    return JSONResponse(ablate_view(runs, body))


@router.get("/api/runs", response_model=schemas.RunsResponse)
def list_runs(runs: RunsDep) -> JSONResponse:
    """The runs in the runs folder."""
    return JSONResponse(runs_view(runs))


@router.post("/api/runs/encoding", response_model=schemas.RunsEncodingResponse, responses=BAD_INPUT)
def runs_encoding(body: schemas.RunsEncodingRequest, runs: RunsDep) -> JSONResponse:
    """The runs whose tokenizer encodes a text: a view's run picker defaults to one."""
    return JSONResponse(runs_encoding_view(runs, body))


@router.post("/api/walk", response_model=schemas.WalkResponse, responses=BAD_INPUT)
def walk(body: schemas.WalkRequest, runs: RunsDep) -> JSONResponse:
    """One token through the whole model: embeddings, every block's norms, attention,
    adds and FFN, the final norm and the logits, with the stream's norm and logit lens
    after every add, and the run's parameters by part (whole-model view)."""
    return JSONResponse(walk_view(runs, body))


@router.post("/api/walk/layer", response_model=schemas.LayerStepsResponse, responses=BAD_INPUT)
def walk_layer(body: schemas.LayerStepsRequest, runs: RunsDep) -> JSONResponse:
    """One block of the walk step by step: view 1's attention stages on the run's model for
    one token, layer and head (q, keys, q.k, /sqrt(d_k), mask, softmax, weights . V, concat,
    W_O), and the FFN's top units with their values' tokens."""
    return JSONResponse(layer_steps_view(runs, body))


@router.post("/api/all_heads", response_model=schemas.AllHeadsResponse, responses=BAD_INPUT)
def all_heads(body: schemas.AllHeadsRequest, runs: RunsDep) -> JSONResponse:
    """Every layer's and head's attention pattern for a prompt (all-heads view)."""
    return JSONResponse(all_heads_view(runs, body))


@router.post("/api/learned_positions", response_model=schemas.LearnedPositionsResponse,
             responses=BAD_INPUT)
def learned_positions(body: schemas.LearnedPositionsRequest, runs: RunsDep) -> JSONResponse:
    """A run's learned position table, PE . PE^T and nearest neighbours (positions
    view)."""
    return JSONResponse(learned_positions_view(runs, body))
