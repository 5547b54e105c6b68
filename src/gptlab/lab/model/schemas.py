"""Request and answer models of the views that look into a run (gptlab.lab.model.routes):
its attention patterns and heads (gptlab.lab.model.heads), head scores and ablation
(gptlab.lab.model.scores), the whole model for one token (gptlab.lab.model.wholemodel,
layersteps), every head at a glance (gptlab.lab.model.allheads), a run's learned positions
(gptlab.lab.model.learnedpos) and the runs to pick from (gptlab.lab.model.picker). Same
conventions as gptlab.lab.fields (strict scalars, one-line errors, every limit in the
schema); the answers' shared start is gptlab.lab.responses.ModelOnTokens."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gptlab.lab.fields import (
    MAX_PROMPT_CHARS,
    Body,
    Ids,
    Integer,
    Prompt,
    RunName,
    Seed,
    _int,
    _text,
)
from gptlab.lab.responses import Matrix, ModelOnTokens

MAX_WALK_TOKENS = 64  # tokens of text the whole-model view takes
MAX_WALK_TOP = 20
MAX_GRID_TOKENS = 64  # tokens of prompt in the all-heads grid
MAX_POSITIONS = 256  # rows of a learned position table sent
MAX_NEIGHBOURS = 10

Vector = list[float]


# ----------------------------------------------------------------------------- heads, runs


class HeadsRequest(Body):
    run: RunName
    prompt: Prompt | None = Field(None, description="required unless ids are given")
    ids: Ids | None = None
    layer: Annotated[Integer, Field(ge=0, description="below the run's n_layer")] = 0


class HeadScoresRequest(Body):
    run: RunName
    prompt: Prompt | None = Field(None, description="empty: a random sequence, repeated")
    ids: Ids | None = None
    seed: Seed = 0


class AblateRequest(HeadScoresRequest):
    layer: Annotated[Integer, Field(ge=0, description="below the run's n_layer")]
    head: Annotated[Integer, Field(ge=0, description="below the run's n_head")]


class RunsEncodingRequest(Body):
    text: _text(MAX_PROMPT_CHARS, "a view's text, e.g. its default prompt", min_length=1)
    run: RunName | None = Field(None, description="a run to fit the text to (the answer's "
                                "`offer`): the text without the characters it cannot encode")


class RunsResponse(BaseModel):
    root: str
    runs: list[str]


class RunsEncodingResponse(BaseModel):
    text: str
    runs: list[str] = Field(description="the runs whose tokenizer encodes the text")
    offer: str | None = Field(None, description="with `run`: a text that run encodes")


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


# ----------------------------------------------------------------------------- whole model


class WalkRequest(Body):
    run: RunName
    text: _text(MAX_PROMPT_CHARS, "the text, as the run's tokenizer encodes it", min_length=1)
    position: _int(0, 10**6, "the token to walk through the model; null: the last") | None = None
    top: _int(1, MAX_WALK_TOP, "tokens listed by each logit lens and at the end") = 5


class TokenP(BaseModel):
    id: int
    token: str
    p: float


class Reading(BaseModel):
    name: str
    vector: Vector = Field(description="(n_embd,) the residual stream after this add")
    norm: float = Field(description="its L2 norm")
    lens: list[TokenP] = Field(description="the logit lens here: final norm, then W_U")


class NormStage(BaseModel):
    kind: str = Field(description="layernorm or rmsnorm")
    input: Vector
    mean: float | None = Field(description="removed first (layernorm; null for rmsnorm)")
    scale: float = Field(description="divided by: the std (rms for rmsnorm), eps included")
    normalized: Vector = Field(description="(input - mean) / scale, before the gain")
    weight: Vector = Field(description="the gain")
    bias: Vector | None
    output: Vector = Field(description="normalized * weight + bias, as the model computed it")


class FFNStage(BaseModel):
    kind: str = Field(description="gelu, gelu_tanh or swiglu")
    input: Vector
    expand: Vector = Field(description="(ffn_hidden,) fc(x); swiglu: gate(x)")
    up: Vector | None = Field(description="swiglu: up(x); null otherwise")
    activation: Vector = Field(description="gelu(fc(x)); swiglu: silu(gate(x)) * up(x)")
    fired: int = Field(description="units whose expand is above 0 (the gate opens)")
    units: int
    output: Vector = Field(description="(n_embd,) proj(activation)")


class BlockStage(BaseModel):
    layer: int
    input: Vector
    norm_1: NormStage
    attn_out: Vector
    attention: list[Vector] = Field(description="(n_head, T): this token's attention weights")
    add_1: Reading
    norm_2: NormStage
    ffn: FFNStage
    add_2: Reading
    output: Vector


class ParamShare(BaseModel):
    total: int
    embeddings: int = Field(description="token embeddings and learned positions")
    attention: int = Field(description="all blocks")
    ffn: int = Field(description="all blocks")
    norms: int = Field(description="the blocks' and the final one")
    lm_head: int = Field(description="0 when tied to the token embeddings")
    ffn_share_of_block: float
    ffn_share_of_total: float


class WalkResponse(ModelOnTokens):
    limit: int
    position: int
    token: str
    n_embd: int
    ffn_hidden: int
    vocab_size: int
    mlp: str
    norm: str
    norm_position: str
    pos_encoding: str
    tie_embeddings: bool
    embed: Vector = Field(description="the token's row of W_E")
    pos_embed: Vector | None = Field(description="its position's vector; null: RoPE or none")
    embedded: Reading
    blocks: list[BlockStage]
    final_norm: NormStage | None = Field(description="null in a post-norm model")
    top: list[TokenP] = Field(description="the likeliest next tokens, the model's own")
    logits: list[float] = Field(description="the logits of `top`, in its order")
    all_logits: Vector = Field(description="(vocab_size,) every logit, for a temperature")
    params: ParamShare


# ----------------------------------------------------------------------------- a block, by step


class LayerStepsRequest(Body):
    run: RunName
    text: _text(MAX_PROMPT_CHARS, "the text, as the run's tokenizer encodes it", min_length=1)
    position: _int(0, 10**6, "the token whose query is followed; null: the last") | None = None
    layer: _int(0, 10**4, "the block (below the run's n_layer)") = 0
    head: _int(0, 10**4, "the head (below the run's n_head)") = 0
    units: _int(1, MAX_WALK_TOP, "FFN units listed, largest coefficient first") = 8
    top: _int(1, MAX_WALK_TOP, "tokens listed for each unit's value") = 5


class ValueToken(BaseModel):
    id: int
    token: str
    logit: float


class FFNUnit(BaseModel):
    unit: int
    coef: float = Field(description="its coefficient for this token (what proj reads)")
    pre: float = Field(description="its pre-activation (fc, or SwiGLU's gate)")
    tokens: list[ValueToken] = Field(description="its value's top tokens through W_U")


class Curve(BaseModel):
    x: Vector
    y: Vector


class FFNUnits(BaseModel):
    kind: str
    units: int
    pre: Vector = Field(description="(ffn_hidden,) every unit's pre-activation")
    coef: Vector = Field(description="(ffn_hidden,) every unit's coefficient")
    top: list[FFNUnit]
    curve: Curve = Field(description="the activation over the pre-activations' range")


class AttentionMatrices(BaseModel):
    """The chosen head's (T, T) matrices, a row per query; row `position` is the row stages'."""
    raw: list[Vector] = Field(description="q_i . k_j")
    scaled: list[Vector] = Field(description="q_i . k_j * scale")
    masked: list[list[float | None]] = Field(description="null: -inf (j > i)")
    weights: list[Vector] = Field(description="softmax(masked), each row")
    weights_bidirectional: list[Vector] = Field(description="softmax(scaled): no mask")


class LayerStepsResponse(BaseModel):
    run: str
    tokens: list[str]
    position: int
    layer: int
    head: int
    n_head: int
    head_dim: int
    scale: float = Field(description="what q.k is multiplied by: 1/sqrt(d_k), or 1")
    sqrt_d_k: float
    x: Vector = Field(description="(n_embd,) what attention reads for this token")
    q: Vector = Field(description="(head_dim,) this token's query")
    keys: list[Vector] = Field(description="(T, head_dim) every token's key")
    values: list[Vector] = Field(description="(T, head_dim) every token's value")
    raw: Vector = Field(description="(T,) q . k_j")
    scaled: Vector = Field(description="(T,) q . k_j * scale")
    masked: list[float | None] = Field(description="(T,) null: -inf (a later token)")
    weights: Vector = Field(description="(T,) softmax(masked)")
    weights_bidirectional: Vector = Field(description="(T,) softmax(scaled): no mask")
    matrices: AttentionMatrices
    head_out: Vector = Field(description="(head_dim,) weights . V")
    head_out_bidirectional: Vector
    concat: Vector = Field(description="(n_head * head_dim,) every head's output")
    concat_bidirectional: Vector = Field(description="every head's output, no mask")
    w_o_norms: Vector = Field(description="(n_head,) Frobenius norm of each head's W_O block")
    written_norms: Vector = Field(description="(n_head,) norm of W_O_h . head_h")
    written_norms_bidirectional: Vector
    w_o_block: list[Vector] = Field(description="(n_embd, head_dim) this head's W_O block")
    b_o: Vector | None
    out: Vector = Field(description="(n_embd,) W_O . concat + b: attention's output")
    out_bidirectional: Vector = Field(description="(n_embd,) attention's output, no mask")
    stream: Vector = Field(description="(n_embd,) the block's input: the residual stream")
    added: Vector = Field(description="(n_embd,) stream + out: the stream after the add")
    added_bidirectional: Vector = Field(description="(n_embd,) stream + out, no mask")
    ffn: FFNUnits | None = Field(description="null: the model has no FFN")


# ----------------------------------------------------------------------------- all heads


class AllHeadsRequest(Body):
    run: RunName
    prompt: _text(MAX_PROMPT_CHARS, "text the run's tokenizer encodes", min_length=1)


class AllHeadsResponse(ModelOnTokens):
    limit: int
    attention: list[list[list[Vector]]] = Field(description="(n_layer, n_head, T, T)")


# ----------------------------------------------------------------------------- learned positions


class LearnedPositionsRequest(Body):
    run: RunName
    positions: _int(2, MAX_POSITIONS, "rows of the table to show; null: all, up to "
                                      f"{MAX_POSITIONS}") | None = None
    neighbours: _int(1, MAX_NEIGHBOURS, "nearest positions listed for each") = 3


class Neighbour(BaseModel):
    position: int
    cosine: float


class LearnedPositionsResponse(BaseModel):
    run: str
    block_size: int
    n_embd: int
    positions: int
    table: list[Vector] = Field(description="(positions, n_embd): the run's wpe rows")
    similarity: list[Vector] = Field(description="(positions, positions): PE . PE^T")
    cosine: list[Vector] = Field(description="(positions, positions): cosine similarity")
    neighbours: list[list[Neighbour]] = Field(
        description="per position, the nearest others by cosine, nearest first")
    adjacent_cosine: float = Field(description="mean cosine of positions p and p + 1")
    distant_cosine: float | None = Field(
        description="mean cosine of positions at least 8 apart; null: fewer positions")

