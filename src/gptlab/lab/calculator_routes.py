"""The routes of the views that need no run: the attention calculator (view 1), the scaling,
positions and parameters views (2, 4, 5), the presets they start from and the quiz (view 7).
Bodies and answers are gptlab.lab.calculator_schemas (bodies checked by pydantic, 400 with
one line for bad input); create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab import api, quiz
from gptlab.lab import calculator_schemas as cs
from gptlab.lab.responses import BAD_INPUT
from gptlab.web.body import area_router

router = area_router()

# Views are plain (sync) functions: FastAPI runs them in its thread pool. They return
# JSONResponse themselves, so response_model documents the answer (and the fuzz test
# checks it) without a second pass over large float matrices.


@router.post("/api/attention", response_model=cs.AttentionResponse, responses=BAD_INPUT)
def attention(body: cs.AttentionRequest) -> JSONResponse:
    """One attention head, stage by stage, on seeded or edited inputs (view 1)."""
    return JSONResponse(api.attention_view(body))


@router.post("/api/scaling", response_model=cs.ScalingResponse, responses=BAD_INPUT)
def scaling(body: cs.ScalingRequest) -> JSONResponse:
    """Why scores are divided by sqrt(d_k) (view 2)."""
    return JSONResponse(api.scaling_view(body))


@router.post("/api/sinusoidal", response_model=cs.SinusoidalResponse, responses=BAD_INPUT)
def sinusoidal(body: cs.SinusoidalRequest) -> JSONResponse:
    """The sinusoidal position table and its dot products (view 4)."""
    return JSONResponse(api.sinusoidal_view(body))


@router.post("/api/rope", response_model=cs.RopeResponse, responses=BAD_INPUT)
def rope(body: cs.RopeRequest) -> JSONResponse:
    """RoPE: scores depend on the offset n - m only (view 4)."""
    return JSONResponse(api.rope_view(body))


@router.post("/api/params", response_model=cs.ParamsResponse, responses=BAD_INPUT)
def params(body: cs.ParamsRequest) -> JSONResponse:
    """Parameters, FLOPs and memory of a preset or config (view 5)."""
    return JSONResponse(api.params_view(body))


@router.get("/api/presets", response_model=cs.PresetsResponse)
def list_presets() -> JSONResponse:
    """Every preset's config, and the choices of the config's string fields."""
    return JSONResponse(api.presets_view())


@router.post("/api/quiz", response_model=cs.QuizResponse, responses=BAD_INPUT)
def quiz_question(body: cs.QuizRequest) -> JSONResponse:
    """A question made from the library; its answer stays on the server (view 7)."""
    return JSONResponse(quiz.question_view(body))


@router.post("/api/quiz/check", response_model=cs.QuizCheckResponse, responses=BAD_INPUT)
def quiz_check(body: cs.QuizCheckRequest) -> JSONResponse:
    """Checks an answer to the question (kind, seed) against the computed one."""
    return JSONResponse(quiz.check_view(body))
