"""The model a server serves, with what every route checks against it: its name, its
context, its tokenizer, its chat template and the scheduler that runs it.

A request is refused here, before any job is queued: a model name that is not this one
(404), a prompt the tokenizer cannot encode or whose ids are outside the vocabulary, a
prompt plus max_tokens longer than the context, more choices than the batch has rows (all
400), a queue already full (429).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gptlab.errors import UsageError
from gptlab.model.decoding import SamplingSettings
from gptlab.serve.chat import ChatTemplate
from gptlab.serve.errors import ApiError
from gptlab.serve.scheduler import Scheduler
from gptlab.serve.schemas import Sampling

DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
END_OF_TEXT = ("<|endoftext|>", "<|end_of_text|>")  # GPT-2's and Llama 3's


@dataclass
class Served:
    """name: what clients pass as `model`; context: the longest text (prompt + generated
    tokens) a request may ask for; max_tokens: the most tokens one choice may ask for
    (None: the context bounds it alone); max_waiting: jobs queued beyond the running ones
    before new requests get a 429."""

    name: str
    model: Any
    tokenizer: Any
    scheduler: Scheduler
    context: int
    chat: ChatTemplate | None = None
    max_tokens: int | None = None
    max_waiting: int = 256
    created: int = 0

    @property
    def eos(self) -> int | None:
        """The end-of-text token's id (a choice stops there), if the tokenizer has one."""
        names = ((self.chat.eos_token,) if self.chat and self.chat.eos_token else ()) + END_OF_TEXT
        inner = getattr(self.tokenizer, "tokenizer", None)
        for name in names:
            found = inner.token_to_id(name) if hasattr(inner, "token_to_id") else None
            if found is not None:
                return found
        return None

    def check_model(self, name: str) -> None:
        if name != self.name:
            raise ApiError(404, f"the model {name!r} does not exist: this server serves "
                                f"{self.name!r} (GET /v1/models)", "model", "model_not_found")

    def check_busy(self, jobs: int) -> None:
        if self.scheduler.queued + jobs > self.max_waiting:
            raise ApiError(429, f"the server is busy: {self.scheduler.queued} requests are "
                                f"waiting for a row; try again shortly")

    def encode(self, prompt: str | list[int], what: str = "prompt") -> list[int]:
        """Token ids of a prompt given as text or as ids, checked against the vocabulary."""
        if isinstance(prompt, str):
            if not prompt:
                raise ApiError(400, f"the {what} is empty: give at least one character", what)
            try:
                ids = self.tokenizer.encode(prompt)
            except UsageError as exc:
                raise ApiError(400, f"the {what} cannot be encoded: {exc}", what) from None
            if not ids:
                raise ApiError(400, f"the {what} encodes to no tokens", what)
            return ids
        vocab = self.model.config.vocab_size
        bad = [i for i in prompt if i >= vocab]
        if bad:
            raise ApiError(400, f"token id {bad[0]} in the {what} is outside the vocabulary "
                                f"(0..{vocab - 1})", what)
        return list(prompt)

    def room(self, prompt_tokens: int, asked: int | None, default: int | None) -> int:
        """max_tokens for a prompt of prompt_tokens: as asked (else `default`, else the rest
        of the context), refused past the context or the server's --max-tokens."""
        left = self.context - prompt_tokens
        if left < 0:
            raise ApiError(400, f"the prompt is {prompt_tokens} tokens, longer than the "
                                f"model's context of {self.context}", "prompt")
        if left == 0 and asked != 0:
            raise ApiError(400, f"the prompt is {prompt_tokens} tokens; the model's context is "
                                f"{self.context}, so no token can follow it", "prompt")
        if asked is None:
            asked = min(default, left) if default is not None else left
            if self.max_tokens is not None:
                asked = min(asked, self.max_tokens)
        if self.max_tokens is not None and asked > self.max_tokens:
            raise ApiError(400, f"max_tokens is {asked}; this server allows at most "
                                f"{self.max_tokens} (--max-tokens)", "max_tokens")
        if prompt_tokens + asked > self.context:
            raise ApiError(400, f"the prompt ({prompt_tokens} tokens) and max_tokens ({asked}) "
                                f"make {prompt_tokens + asked} tokens, more than the model's "
                                f"context of {self.context}: ask for at most {max(left, 0)}",
                           "max_tokens")
        return asked

    def settings(self, body: Sampling) -> SamplingSettings:
        top_k = body.top_k if body.top_k is not None and body.top_k > 0 else None
        top_p = body.top_p if body.top_p < 1 else None
        return SamplingSettings(body.temperature, top_k, top_p)

    def check_choices(self, n: int) -> None:
        if n > self.scheduler.slots:
            raise ApiError(400, f"n is {n}, but this server decodes at most "
                                f"{self.scheduler.slots} texts at once (--max-batch)", "n")

    def seeds(self, seed: int | None, n: int) -> tuple[int | None, ...]:
        """One seed per choice: choice 0 takes the request's own (as `gptlab sample --seed`
        would), choice i > 0 one derived from (seed, i) by numpy's SeedSequence."""
        if seed is None:
            return (None,) * n
        import numpy as np  # start-up time: only a seeded request needs it

        seed %= 2**64
        derived = np.random.SeedSequence(seed).spawn(n)
        return (seed,) + tuple(int(s.generate_state(1, np.uint64)[0]) for s in derived[1:])

    def token_text(self, token: int) -> str:
        return self.tokenizer.decode([token])
