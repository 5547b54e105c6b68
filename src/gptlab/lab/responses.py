"""The lab's answers as pydantic models: what each view returns, field by field.

The views (gptlab.lab.api) build plain dicts and the server sends them as they are; these
models are the answers' half of the OpenAPI schema (response_model), against which
tests/lab/test_fuzz.py checks every answer. Shapes use the lab's names: T tokens, n_head
heads of head_dim, n_embd channels.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from gptlab.lab.schemas import QUIZ_KINDS

Matrix = list[list[float]]
MaskedMatrix = list[list[float | None]]  # null: a masked score, -inf


class Error(BaseModel):
    error: str = Field(description="what was wrong, in one line that names the field")


# The 400 every route with a body documents.
BAD_INPUT = {400: {"model": Error, "description": "Bad input: one line naming the field"}}


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
    logit_softcap: float | None
    zero_init_proj: bool
    value_residual: bool
    unet_skips: bool


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


class RunsResponse(BaseModel):
    root: str
    runs: list[str]


class RunsEncodingResponse(BaseModel):
    text: str
    runs: list[str] = Field(description="the runs whose tokenizer encodes the text")


class ModelOnTokens(BaseModel):
    """The start of an answer about a run's model on some tokens (views 3 and 6)."""

    run: str
    tokens: list[str]
    ids: list[int]
    n_layer: int
    n_head: int


class HeadsResponse(ModelOnTokens):
    head_dim: int
    n_embd: int
    layer: int
    attention: list[list[Matrix]] = Field(description="(n_layer, n_head, T, T)")
    heads: list[Matrix] = Field(description="(n_head, T, head_dim): weights @ V per head")
    concat: Matrix = Field(description="(T, n_head * head_dim)")
    w_o: Matrix = Field(description="(n_head * head_dim, n_embd): out = concat @ w_o + b_o")
    b_o: list[float] | None
    out: Matrix = Field(description="(T, n_embd)")


class HeadScores(BaseModel):
    previous_token: Matrix
    duplicate_token: Matrix
    induction: Matrix


class ChanceScores(BaseModel):
    previous_token: float
    duplicate_token: float
    induction: float


class HeadScoresResponse(ModelOnTokens):
    scores: HeadScores = Field(description="each (n_layer, n_head)")
    chance: ChanceScores = Field(description="each score of a head attending evenly, on this input")
    ablation_deltas: Matrix = Field(description="(n_layer, n_head): loss change")
    loss: float


class AblateResponse(BaseModel):
    run: str
    layer: int
    head: int
    loss: float
    ablated_loss: float
    delta: float


class Choice(BaseModel):
    id: str
    text: str


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
