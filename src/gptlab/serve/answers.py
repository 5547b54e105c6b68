"""The answers' JSON, as OpenAI's API shapes it: a completion's or a chat completion's
choices, their log-probabilities, the usage counts, and the chunks of a stream.

Log-probabilities are the model's own: log-softmax of its logits in float32, before
temperature, top-k or top-p (vLLM's default, "raw"), so they equal `gptlab eval`'s whatever
the sampling. A completion's top_logprobs holds the `logprobs` likeliest tokens and the
chosen one (OpenAI's legacy format: up to logprobs + 1 entries); a chat's top_logprobs
exactly the `top_logprobs` likeliest. text_offset counts characters from the start of the
choice's text (the prompt's, with echo).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from gptlab.serve.scheduler import Alternatives


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass
class Gathered:
    """One choice's answer as its events arrive: text, tokens, their log-probabilities."""

    index: int
    text: str = ""
    ids: list[int] = field(default_factory=list)
    logprobs: list[Alternatives | None] = field(default_factory=list)
    finish_reason: str | None = None


class Tokens:
    """Token ids as the text each stands for (the tokenizer's decode of it alone)."""

    def __init__(self, decode_one: Any) -> None:
        self.decode_one = decode_one

    def completion_logprobs(self, ids: list[int], alternatives: list[Alternatives | None],
                            offset: int = 0) -> dict[str, Any]:
        """OpenAI's legacy logprobs object for these tokens, text_offset counted from
        `offset`."""
        tokens = [self.decode_one(i) for i in ids]
        offsets = []
        for token in tokens:
            offsets.append(offset)
            offset += len(token)
        top = []
        for token, alt in zip(tokens, alternatives, strict=True):
            if alt is None:
                top.append(None)
                continue
            best = {self.decode_one(i): lp for i, lp in alt.top}
            best.setdefault(token, alt.logprob)
            top.append(best)
        return {"tokens": tokens,
                "token_logprobs": [None if a is None else a.logprob for a in alternatives],
                "top_logprobs": top, "text_offset": offsets}

    def chat_logprobs(self, ids: list[int], alternatives: list[Alternatives | None]
                      ) -> dict[str, Any]:
        """OpenAI's chat logprobs object: {"content": [{token, logprob, bytes,
        top_logprobs}]}."""
        content = []
        for token_id, alt in zip(ids, alternatives, strict=True):
            if alt is None:
                continue
            content.append({**self._entry(token_id, alt.logprob),
                            "top_logprobs": [self._entry(i, lp) for i, lp in alt.top]})
        return {"content": content}

    def _entry(self, token_id: int, logprob: float) -> dict[str, Any]:
        text = self.decode_one(token_id)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def completion(answer_id: str, created: int, model: str, choices: list[dict[str, Any]],
               usage: Usage | None) -> dict[str, Any]:
    out = {"id": answer_id, "object": "text_completion", "created": created, "model": model,
           "choices": choices}
    if usage is not None:
        out["usage"] = usage.to_dict()
    return out


def chat_completion(answer_id: str, created: int, model: str, choices: list[dict[str, Any]],
                    usage: Usage | None, chunk: bool = False) -> dict[str, Any]:
    out = {"id": answer_id, "object": "chat.completion.chunk" if chunk else "chat.completion",
           "created": created, "model": model, "choices": choices}
    if usage is not None:
        out["usage"] = usage.to_dict()
    return out
