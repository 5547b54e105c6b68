"""The request bodies, as OpenAI's API defines them (the fields gptlab serves).

Fields OpenAI has and a gptlab model cannot honour (penalties, logit_bias, best_of,
suffix, tools) are refused by name when set to anything but their neutral value, rather
than ignored; fields no API has are ignored, as OpenAI-compatible servers do (clients such
as lm-evaluation-harness send a few of their own). top_k is an extension (vLLM and
llama.cpp take it too); the openai client sends it through extra_body.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_STOP = 4  # stop strings per request, as OpenAI allows
MAX_TOP_LOGPROBS = 20  # alternatives per token (OpenAI: 5 for completions, 20 for chat)
MAX_N = 128  # choices per prompt (OpenAI's limit); the server's --max-batch bounds it too
MAX_PROMPTS = 256  # prompts in one completions request
MAX_SEED = 2**63 - 1

TokenIds = list[Annotated[int, Field(ge=0)]]
Stop = str | Annotated[list[str], Field(max_length=MAX_STOP)] | None
NEUTRAL = {"presence_penalty": 0, "frequency_penalty": 0, "logit_bias": None, "best_of": 1,
           "suffix": None, "tools": None, "functions": None, "tool_choice": None,
           "response_format": None}


class Sampling(BaseModel):
    """What completions and chat share: how many tokens, how they are drawn, when to stop."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="the served model's name (GET /v1/models)")
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 1.0
    top_k: int | None = Field(None, description="extension: sample from the k likeliest "
                                                "tokens; -1, 0 or null for all")
    n: Annotated[int, Field(ge=1, le=MAX_N)] = 1
    stop: Stop = None
    seed: Annotated[int, Field(ge=-MAX_SEED - 1, le=MAX_SEED)] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None

    @model_validator(mode="after")
    def _honoured(self) -> Sampling:
        for name, neutral in NEUTRAL.items():
            value = (self.model_extra or {}).get(name)
            if value is not None and value != neutral:
                raise ValueError(f"{name} is not supported by gptlab serve (leave it out)")
        if self.top_k is not None and self.top_k < -1:
            raise ValueError(f"top_k must be >= 1, or -1, 0 or null for no cut, got {self.top_k}")
        for text in self.stops:
            if not text:
                raise ValueError("a stop string must not be empty")
        return self

    @property
    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class CompletionRequest(Sampling):
    """POST /v1/completions."""

    prompt: (str | Annotated[list[str], Field(min_length=1, max_length=MAX_PROMPTS)]
             | Annotated[TokenIds, Field(min_length=1)]
             | Annotated[list[Annotated[TokenIds, Field(min_length=1)]],
                         Field(min_length=1, max_length=MAX_PROMPTS)])
    logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    echo: bool = False

    def prompts(self) -> list[str | list[int]]:
        """Each prompt: a text, or token ids."""
        prompt = self.prompt
        if isinstance(prompt, str):
            return [prompt]
        if prompt and isinstance(prompt[0], int):
            return [list(prompt)]
        return list(prompt)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_call_id...: the template's to read

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "".join(part.text for part in self.content)


class ChatRequest(Sampling):
    """POST /v1/chat/completions."""

    messages: Annotated[list[Message], Field(min_length=1, max_length=1024)]
    max_completion_tokens: Annotated[int, Field(ge=0)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None

    @property
    def limit(self) -> int | None:
        """max_completion_tokens, OpenAI's newer name, else max_tokens."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens
        return self.max_tokens


class TokenizeRequest(BaseModel):
    """POST /tokenize (vLLM's shape, which lm-evaluation-harness's remote tokenizer reads)."""

    model_config = ConfigDict(extra="allow")

    prompt: str
    add_special_tokens: bool = True


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    tokens: TokenIds
