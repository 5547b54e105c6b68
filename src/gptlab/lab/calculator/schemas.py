"""Request and answer models of the views that need no run (gptlab.lab.calculator.routes):
the attention calculator, scaling, positions, parameters, presets and the quiz. Same
conventions as gptlab.lab.fields (strict scalars, one-line errors, every limit in the
schema); the views (the other modules of gptlab.lab.calculator) build the answers as plain
dicts and these models document them (response_model), as tests/lab/test_fuzz.py checks.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from gptlab.fields import is_number
from gptlab.lab.fields import (
    MAX_ANSWER_CHARS,
    MAX_CONFIG_INT,
    MAX_DIM,
    MAX_TOKEN_CHARS,
    MAX_TOKENS,
    Body,
    Closed,
    InMatrix,
    Seed,
    Token,
    _float,
    _int,
    _unicode,
    fmt_num,
)
from gptlab.lab.responses import Choice, MaskedMatrix, Matrix
from gptlab.model import presets
from gptlab.model.config import MLPS, NORM_POSITIONS, NORMS, POS_ENCODINGS, ROPE_SCALINGS

QUIZ_KINDS = ("params", "masked_row", "row0", "rope_offset", "sqrt_dk")

# ----------------------------------------------------------------------------- requests


def _tokens(value: object) -> object:
    """A whitespace-separated string or a list of strings -> 1..MAX_TOKENS tokens."""
    if isinstance(value, str):
        if len(value) > MAX_TOKENS * (MAX_TOKEN_CHARS + 1):
            raise ValueError(f"tokens: at most {MAX_TOKENS} tokens are allowed")
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ValueError("tokens must be a string or a list of strings")
    too_long = [t for t in value if len(t) > MAX_TOKEN_CHARS]
    if too_long:
        raise ValueError(f"token {too_long[0][:40]!r} is longer than {MAX_TOKEN_CHARS} characters")
    value = [_unicode("tokens", t).strip() for t in value]
    if not value or any(not t for t in value):
        raise ValueError("tokens: give at least one token, none of them empty")
    if len(value) > MAX_TOKENS:
        raise ValueError(f"tokens: {len(value)} given; at most {MAX_TOKENS} are allowed")
    return value


class AttentionRequest(Body):
    tokens: Annotated[
        Annotated[str, Field(max_length=MAX_TOKENS * (MAX_TOKEN_CHARS + 1))]
        | Annotated[list[Token], Field(min_length=1, max_length=MAX_TOKENS)],
        BeforeValidator(_tokens),
        Field(description="whitespace-separated, or a list; 1 to 64 tokens",
              validate_default=True),
    ] = "cat sat on the mat"
    d: _int(1, MAX_DIM, "d_model = d_k of the head") = 4
    seed: Seed = 0
    causal: bool = True
    x: InMatrix | None = Field(None, description="edited embeddings, tokens x d")
    w_q: InMatrix | None = Field(None, description="edited W_Q, d x d")
    w_k: InMatrix | None = Field(None, description="edited W_K, d x d")
    w_v: InMatrix | None = Field(None, description="edited W_V, d x d")

    @model_validator(mode="after")
    def _shapes(self) -> "AttentionRequest":
        for name in ("x", "w_q", "w_k", "w_v"):
            m = getattr(self, name)
            rows = len(self.tokens) if name == "x" else self.d
            if m is not None and (len(m) != rows or any(len(r) != self.d for r in m)):
                raise ValueError(f"{name} must be a {rows} x {self.d} matrix "
                                 f"(a list of {rows} rows)")
        return self


class ScalingRequest(Body):
    d_k: _int(1, 4096) = 64
    n_keys: _int(2, MAX_TOKENS) = 16
    seed: Seed = 0


class SinusoidalRequest(Body):
    positions: _int(1, 256) = 64
    d_model: _int(2, 256) = 64


class RopeRequest(Body):
    head_dim: _int(2, 128, "even: RoPE rotates pairs", even=True) = 8
    base: _float(2.0, 1e7) = 10000.0
    positions: _int(2, MAX_TOKENS) = 16
    offset: _int(0, MAX_TOKENS - 1, "n - m; below positions (default min(3, positions - 1))"
                 ) | None = None
    seed: Seed = 0

    @model_validator(mode="after")
    def _offset(self) -> "RopeRequest":
        if self.offset is None:
            self.offset = min(3, self.positions - 1)
        elif self.offset >= self.positions:
            raise ValueError(f"offset must be between 0 and {self.positions - 1}, "
                             f"got {self.offset}")
        return self


class RopeScaling(Closed):
    type: Literal[ROPE_SCALINGS]
    factor: _float(1.0, 1e6)
    original_max_position_embeddings: _int(1, MAX_CONFIG_INT) | None = None
    beta_fast: _float(-1e6, 1e6) | None = None
    beta_slow: _float(-1e6, 1e6) | None = None
    attention_factor: _float(-1e6, 1e6) | None = None
    mscale: _float(-1e6, 1e6) | None = None
    mscale_all_dim: _float(-1e6, 1e6) | None = None
    low_freq_factor: _float(-1e6, 1e6) | None = None
    high_freq_factor: _float(-1e6, 1e6) | None = None
    truncate: bool | None = None


ConfigInt = _int(1, MAX_CONFIG_INT)


def _no_null_default(schema: dict[str, Any]) -> None:
    """An omitted field keeps the preset's value: drop pydantic's `default: null`."""
    for prop in schema.get("properties", {}).values():
        if prop.get("default", 0) is None:
            del prop["default"]


class ConfigFields(Closed):
    """GPTConfig fields to override (gptlab.model.config checks how they fit together)."""

    model_config = ConfigDict(json_schema_extra=_no_null_default)
    vocab_size: ConfigInt = None
    block_size: ConfigInt = None
    n_layer: ConfigInt = None
    n_head: ConfigInt = None
    n_kv_head: ConfigInt | None = Field(None, description="null: n_head")
    n_embd: ConfigInt = None
    ffn_hidden: ConfigInt | None = Field(None, description="null: 4 * n_embd")
    pos_encoding: Literal[POS_ENCODINGS] = None
    rope_base: Annotated[float, Field(gt=1, le=1e12, allow_inf_nan=False)] = None
    rope_scaling: RopeScaling | None = None
    norm: Literal[NORMS] = None
    norm_eps: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = None
    norm_position: Literal[NORM_POSITIONS] = None
    mlp: Literal[MLPS] = None
    bias: bool = None
    tie_embeddings: bool = None
    dropout: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = None
    # The options of later work (gptlab.model.config): the parameters they add are counted.
    attn_scale: bool = None
    qk_norm: bool = None
    zero_init_proj: bool = None
    value_residual: bool = None


class ParamsRequest(Body):
    preset: Literal[tuple(presets.PRESETS)] | None = None
    config: ConfigFields | None = Field(None, description="overrides the preset's fields")
    seq_len: _int(1, MAX_CONFIG_INT, "context for FLOPs and KV cache; default block_size"
                  ) | None = None


class QuizRequest(Body):
    kind: Literal[QUIZ_KINDS] | None = Field(None, description="null: chosen by the seed")
    seed: Seed = 0


def _answer(value: object) -> object:
    if isinstance(value, str):
        if len(value) > MAX_ANSWER_CHARS:
            raise ValueError(f"answer is {len(value)} characters long; "
                             f"the limit is {MAX_ANSWER_CHARS}")
        return _unicode("answer", value)
    if not is_number(value):
        raise ValueError("answer must be a string or a finite number")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float
        raise ValueError(f"answer {fmt_num(value)} is too large a number") from None


class QuizCheckRequest(QuizRequest):
    answer: Annotated[Annotated[str, Field(max_length=MAX_ANSWER_CHARS)] | float,
                      BeforeValidator(_answer)]


# ----------------------------------------------------------------------------- answers


class OtherMask(BaseModel):
    masked: MaskedMatrix
    weights: Matrix
    out: Matrix


class AttentionResponse(BaseModel):
    tokens: list[str]
    d: int
    d_k: int
    seed: int
    causal: bool
    sqrt_d_k: float
    x: Matrix
    w_q: Matrix
    w_k: Matrix
    w_v: Matrix
    q: Matrix
    k: Matrix
    v: Matrix
    scores: Matrix
    masked: MaskedMatrix
    weights: Matrix
    out: Matrix
    other: OtherMask = Field(description="masked, weights, out with the mask switched over")


class SoftmaxStats(BaseModel):
    max_weight: float
    entropy: float


class SweepRow(BaseModel):
    d_k: int
    unscaled: SoftmaxStats
    scaled: SoftmaxStats
    std_raw: float


class ScalingResponse(BaseModel):
    d_k: int
    n_keys: int
    n_queries: int
    seed: int
    std_raw: float
    std_scaled: float
    expected_std_raw: float
    hist_range: Annotated[list[float], Field(min_length=2, max_length=2)]
    bins: int
    hist_raw: list[int]
    hist_scaled: list[int]
    unscaled: SoftmaxStats
    scaled: SoftmaxStats
    max_entropy: float
    example_row_unscaled: list[float]
    example_row_scaled: list[float]
    sweep: list[SweepRow]


class SinusoidalResponse(BaseModel):
    positions: int
    d_model: int
    table: Matrix
    similarity: Matrix


class SameOffset(BaseModel):
    m: int
    n: int
    score: float


class RopeResponse(BaseModel):
    head_dim: int
    base: float
    positions: int
    offset: int
    seed: int
    inv_freq: list[float]
    q: list[float]
    k: list[float]
    unrotated_score: float
    scores: Matrix
    same_offset: list[SameOffset]
    q_pair0: Matrix
    k_pair0: Matrix


class ConfigOut(BaseModel):
    """A whole GPTConfig, as GPTConfig.to_dict() writes it."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_kv_head: int
    n_embd: int
    ffn_hidden: int
    pos_encoding: str
    rope_base: float
    rope_scaling: dict[str, Any] | None
    norm: str
    norm_eps: float
    norm_position: str
    mlp: str
    bias: bool
    tie_embeddings: bool
    dropout: float
    attn_scale: bool
    qk_norm: bool
    zero_init_proj: bool
    value_residual: bool


class PresetsResponse(BaseModel):
    presets: dict[str, ConfigOut]
    choices: dict[str, list[str]] = Field(
        description="each config field that takes one of a few strings, and those strings")


class ParamsRow(BaseModel):
    name: str
    params: int
    note: str
    count: int


class Flops(BaseModel):
    n_matmul: int
    forward_per_token: int
    train_per_token: int
    attention_term_per_token: int
    seq_len: int
    formula: str


class Memory(BaseModel):
    units: Literal["bytes"]
    weights_fp32: int
    weights_bf16: int
    training_adamw_fp32: int
    training_note: str
    kv_cache_per_token_fp32: int
    kv_cache_per_token_bf16: int
    kv_cache_full_context_fp32: int
    kv_cache_full_context_bf16: int
    kv_cache_note: str


class ParamsResponse(BaseModel):
    """gptlab.model.params.Accounting.to_dict()."""

    name: str | None
    config: ConfigOut
    seq_len: int
    rows: list[ParamsRow]
    total: int
    per_block: int
    blocks: int
    estimate_12Ld2: int  # noqa: N815 (the formula's own name)
    estimate_error: float
    estimate_error_blocks: float
    flops: Flops
    memory: Memory


class QuizResponse(BaseModel):
    kind: Literal[QUIZ_KINDS]
    seed: int
    question: str
    format: Literal["integer", "list", "choice", "number"]
    choices: list[Choice] | None


class QuizCheckResponse(BaseModel):
    kind: Literal[QUIZ_KINDS]
    seed: int
    correct: bool
    expected: int | float | str | list[float]
    expected_text: str = Field(description="the answer as the page shows it")
    worked: str
