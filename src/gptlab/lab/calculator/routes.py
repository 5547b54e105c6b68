"""The routes of the views that need no run: the attention calculator (view 1), the scaling,
positions and parameters views (2, 4, 5), the presets they start from and the quiz (view 7).
Bodies and answers are gptlab.lab.calculator.schemas (bodies checked by pydantic, 400 with
one line for bad input); create_app includes `router`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gptlab.lab.calculator import schemas
from gptlab.lab.calculator.attention import attention_view
from gptlab.lab.calculator.params import params_view, presets_view
from gptlab.lab.calculator.positions import rope_view, sinusoidal_view
from gptlab.lab.calculator.quiz import check_view, question_view
from gptlab.lab.calculator.scaling import scaling_view
from gptlab.lab.responses import BAD_INPUT
from gptlab.web.body import area_router

router = area_router()

# Views are plain (sync) functions: FastAPI runs them in its thread pool. They return
# JSONResponse themselves, so response_model documents the answer (and the fuzz test
# checks it) without a second pass over large float matrices.


@router.post("/api/attention", response_model=schemas.AttentionResponse, responses=BAD_INPUT)
def attention(body: schemas.AttentionRequest) -> JSONResponse:
    """One attention head, stage by stage, on seeded or edited inputs (view 1)."""
    return JSONResponse(attention_view(body))


@router.post("/api/scaling", response_model=schemas.ScalingResponse, responses=BAD_INPUT)
def scaling(body: schemas.ScalingRequest) -> JSONResponse:
    """Why scores are divided by sqrt(d_k) (view 2)."""
    return JSONResponse(scaling_view(body))


@router.post("/api/sinusoidal", response_model=schemas.SinusoidalResponse, responses=BAD_INPUT)
def sinusoidal(body: schemas.SinusoidalRequest) -> JSONResponse:
    """The sinusoidal position table and its dot products (view 4)."""
    return JSONResponse(sinusoidal_view(body))


@router.post("/api/rope", response_model=schemas.RopeResponse, responses=BAD_INPUT)
def rope(body: schemas.RopeRequest) -> JSONResponse:
    """RoPE: scores depend on the offset n - m only (view 4)."""
    return JSONResponse(rope_view(body))


@router.post("/api/params", response_model=schemas.ParamsResponse, responses=BAD_INPUT)
def params(body: schemas.ParamsRequest) -> JSONResponse:
    """Parameters, FLOPs and memory of a preset or config (view 5)."""
    return JSONResponse(params_view(body))


@router.get("/api/presets", response_model=schemas.PresetsResponse)
def list_presets() -> JSONResponse:
    """Every preset's config, and the choices of the config's string fields."""
    return JSONResponse(presets_view())


@router.post("/api/quiz", response_model=schemas.QuizResponse, responses=BAD_INPUT)
def quiz_question(body: schemas.QuizRequest) -> JSONResponse:
    """A question made from the library; its answer stays on the server (view 7)."""
    return JSONResponse(question_view(body))


@router.post("/api/quiz/check", response_model=schemas.QuizCheckResponse, responses=BAD_INPUT)
def quiz_check(body: schemas.QuizCheckRequest) -> JSONResponse:
    """Checks an answer to the question (kind, seed) against the computed one."""
    return JSONResponse(check_view(body))
