"""Request and answer models of the longer-than-trained view (view 11): a run at a context
past its training length (gptlab.lab.context.window) and the context experiment's curves
(gptlab.lab.context.results), whose routes are gptlab.lab.context.routes. Same conventions
as gptlab.lab.fields (strict scalars, one-line errors, every limit in the schema) and
gptlab.lab.responses."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gptlab.experiments.context import MODES
from gptlab.lab.fields import MAX_PROMPT_CHARS, SHIPPED, Body, RunName, _int, _text
from gptlab.lab.responses import QUICK

MAX_CONTEXT = 1024  # the longest window the view runs a model at
MAX_BUCKETS = 64
SCALINGS = ("linear", "ntk", "yarn", "dynamic")


class ContextRequest(Body):
    run: RunName
    context: _int(2, MAX_CONTEXT, "window length; past the run's block_size for every "
                                  "encoding but learned positions (default: twice its "
                                  "block_size, or block_size for learned positions)") | None \
        = None
    rope_scaling: Literal[SCALINGS] | None = Field(
        None, description="stretch RoPE by context / block_size (at least 1) with this rule")
    text: _text(MAX_PROMPT_CHARS * 8, "text to score (default: the experiment's eval.txt "
                                      "when the run is one of an experiment's, else the "
                                      "embedded Shakespeare's validation tenth)") | None = None
    buckets: _int(1, MAX_BUCKETS, "position buckets") = 16
    layer: _int(0, 1000) = 0
    head: _int(0, 1000) = 0
    position: _int(0, MAX_CONTEXT - 1, "query position of the attention row (default: the "
                                       "window's last)") | None = None


class ExperimentRequest(Body):
    experiment: _text(500, "an experiment's folder inside the runs folder", min_length=1)
    length: _int(1, 10**6, "one of the experiment's evaluation lengths") = 256
    mode: Literal[MODES] = "non-overlapping"
    shipped: bool = SHIPPED


class Bucket(BaseModel):
    first: int
    last: int
    tokens: int
    loss: float | None = Field(description="mean loss (nats/token); null: none scored")


class AttentionRow(BaseModel):
    layer: int
    head: int
    position: int = Field(description="the query position")
    weights: list[float] = Field(description="its weight on each key 0..position")
    tokens: list[str] = Field(description="the window's tokens 0..position")


class ContextResponse(BaseModel):
    run: str
    block_size: int
    pos_encoding: str
    context: int
    rope_scaling: str | None = Field(description="KIND:FACTOR applied, or null")
    warning: str | None = Field(description="the model never saw some of these positions")
    source: str = Field(description="what was scored")
    loss: float
    tokens_scored: int
    buckets: list[Bucket]
    attention: AttentionRow


class Experiment(BaseModel):
    name: str
    trained_length: int
    lengths: list[int]
    runs: list[str] = Field(description="its runs, as the lab names them")
    shipped: str | None = Field(None, description="shipped results: their label; null: the "
                                                  "runs folder's")
    quick: bool = QUICK


class ExperimentsResponse(BaseModel):
    experiments: list[Experiment]


class Series(BaseModel):
    method: str
    label: str
    refused: str | None = Field(description="why this method has no loss at this length")
    loss: float | None
    buckets: list[Bucket]


class ExperimentResponse(BaseModel):
    experiment: str
    trained_length: int
    length: int
    mode: str
    series: list[Series]
    shipped: str | None = Field(None, description="shipped results: their label")
    quick: bool = QUICK
    undecided_line: str | None = Field(None, description="a run too small to decide anything "
                                                         "says so here")
