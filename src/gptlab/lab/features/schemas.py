"""The Features view's requests and answers (gptlab.lab.features.routes): the dictionaries
the lab can open, a search of their features by token, and one feature read on the
reference text and on a typed one."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gptlab.lab.fields import MAX_PROMPT_CHARS, Body, _int, _text

MAX_LISTED = 50  # features a search returns
MAX_CONTEXTS = 20  # top contexts of one feature

DictionaryName = _text(600, "'shipped', or an experiment folder's dictionary: "
                            "'FOLDER/sae' or 'FOLDER/transcoder'", min_length=1)


class SearchRequest(Body):
    dictionary: DictionaryName
    token: _text(32, "one token of the model's vocabulary, e.g. 'e' or '\\n'", min_length=1)
    by: Literal["promotes", "fires"] = "promotes"
    count: _int(1, MAX_LISTED, "features listed") = 12


class FeatureRequest(Body):
    dictionary: DictionaryName
    feature: _int(0, 10**7, "a feature of the dictionary")
    text: _text(MAX_PROMPT_CHARS, "a text to read the feature along (may be empty)") = ""
    contexts: _int(1, MAX_CONTEXTS, "top contexts shown") = 8


class Dictionary(BaseModel):
    name: str
    model: str = Field(description="the run or shipped model it reads")
    site: str = Field(description="mlp_out, resid_post or transcoder")
    hook_name: str
    layer: int
    d_sae: int
    k: int | None = Field(description="TopK's features per token; null for ReLU")
    architecture: str = Field(description="SAELens' name")
    label: str | None = Field(description="shipped: where and when it was trained")


class DictionariesResponse(BaseModel):
    dictionaries: list[Dictionary]
    text: str = Field(description="what the top contexts are found in")


class Listed(BaseModel):
    feature: int
    score: float = Field(description="the logit it adds to the token (promotes), or its "
                                     "mean activation where the text has the token (fires)")
    density: float = Field(description="the share of the reference text's tokens it fires on")
    promotes: str = Field(description="the token its decoder row promotes most")


class SearchResponse(BaseModel):
    dictionary: str
    token: str
    by: str
    features: list[Listed]


class Context(BaseModel):
    position: int
    start: int = Field(description="where its context starts in the reference text")
    activation: float
    ids: list[int]
    text: str = Field(description="the context's end; the last character is where it fires")
    token: str


class Logit(BaseModel):
    id: int
    text: str
    logit: float


class Histogram(BaseModel):
    edges: list[float]
    counts: list[int]


class Along(BaseModel):
    token: str
    activation: float


class FeatureResponse(BaseModel):
    dictionary: str
    feature: int
    d_sae: int
    density: float
    max_activation: float
    contexts: list[Context]
    promoted: list[Logit]
    suppressed: list[Logit]
    histogram: Histogram
    along: list[Along] = Field(description="the feature's activation at each token of the "
                                           "typed text")
