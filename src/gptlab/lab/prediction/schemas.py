"""Request and answer models of the next-token and logit-lens views
(gptlab.lab.prediction.nexttoken, gptlab.lab.prediction.lens), whose routes are
gptlab.lab.prediction.routes. Same conventions as gptlab.lab.fields (strict scalars,
one-line errors, every limit in the schema) and gptlab.lab.responses."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from gptlab.lab.fields import (
    MAX_PROMPT_CHARS,
    Body,
    RunName,
    Seed,
    _float,
    _int,
    _text,
)
from gptlab.lab.responses import ModelOnTokens

MAX_NEXT_TOKENS = 256  # tokens of text the next-token view takes (and the model's context)
MAX_SHOW = 100  # bars
MAX_TEMPERATURE = 10.0


# ----------------------------------------------------------------------------- next token


class NextTokenRequest(Body):
    run: RunName
    text: _text(MAX_PROMPT_CHARS, "the text so far, as the run's tokenizer encodes it",
                min_length=1)
    temperature: _float(0.0, MAX_TEMPERATURE, "0: greedy") = 1.0
    top_k: _int(1, 10**6, "keep the k likeliest tokens; null: no cut") | None = None
    top_p: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False,
                                  description="keep the likeliest tokens up to this mass; "
                                              "null: no cut")] | None = None
    show: _int(1, MAX_SHOW, "how many of the likeliest tokens to list") = 20


class AppendRequest(NextTokenRequest):
    mode: Literal["greedy", "sample"] = "greedy"
    seed: Seed = 0


class Candidate(BaseModel):
    id: int
    token: str
    p: float = Field(description="probability at this temperature (at 0: at 1), before the "
                                 "cuts")
    top_k: bool = Field(description="kept by top-k")
    top_p: bool = Field(description="kept by every cut: top-k, then top-p (at temperature 0, "
                                    "greedy keeps only the argmax)")
    cut: Literal["greedy", "top_k", "top_p"] | None = Field(
        description="what cut it: greedy (temperature 0), top-k or top-p; null: kept")
    final: float = Field(description="probability sampled from: renormalised over survivors")


class Settings(BaseModel):
    temperature: float
    top_k: int | None
    top_p: float | None
    greedy: bool


class NextTokenResponse(ModelOnTokens):
    limit: int = Field(description="the most tokens of text this run takes here")
    settings: Settings
    candidates: list[Candidate] = Field(description="the `show` likeliest, likeliest first")
    survivors: int = Field(description="tokens left after every filter")
    after_top_k: int
    after_top_p: int = Field(description="tokens top-k and then top-p keep (before greedy)")
    vocab_size: int
    greedy_id: int
    newest_attention: list[list[list[float]]] = Field(
        description="(n_layer, n_head, T): the newest token's attention weights")


class AppendResponse(BaseModel):
    run: str
    mode: Literal["greedy", "sample"]
    seed: int | None
    id: int
    token: str
    text: str


# ----------------------------------------------------------------------------- logit lens

MAX_LENS_TOP = 20  # tokens per cell


class LensRequest(Body):
    run: RunName
    text: _text(MAX_PROMPT_CHARS, "the text, as the run's tokenizer encodes it", min_length=1)
    top: _int(1, MAX_LENS_TOP, "how many of the likeliest tokens each cell lists") = 5
    target: _int(0, 10**9, "the token id whose logit to attribute at the last position; "
                           "null: the model's likeliest next token") | None = None


class Choice(BaseModel):
    id: int
    token: str
    p: float = Field(description="the model's own probability of it next")


class LogitAttribution(BaseModel):
    target: int
    token: str
    position: int
    labels: list[str] = Field(description="embed, pos_embed, L{l}H{h}, L{l} mlp, biases")
    values: list[float] = Field(description="each part's direct share of the logit")
    sum: float = Field(description="the parts' sum")
    logit: float = Field(description="the model's own logit of the target")


class LensResponse(ModelOnTokens):
    limit: int = Field(description="the most tokens of text this run takes here")
    vocab_size: int
    tie_embeddings: bool = Field(description="the unembedding is the token embedding: the "
                                             "embed row then favours the current token")
    rows: list[str] = Field(description="embed, then the stream after each block")
    top_ids: list[list[list[int]]] = Field(description="(rows, T, top) likeliest first")
    top_probs: list[list[list[float]]] = Field(description="(rows, T, top)")
    top_tokens: list[list[list[str]]] = Field(description="(rows, T, top)")
    choices: list[Choice] = Field(description="the model's likeliest next tokens")
    attribution: LogitAttribution
