"""The routes: OpenAI's GET /v1/models, POST /v1/completions and POST /v1/chat/completions,
and vLLM's /tokenize, /detokenize and /tokenizer_info (what lm-evaluation-harness's
`local-completions` asks a server for to split a prompt into tokens as the model does).

A request is checked whole (gptlab.serve.served) before its jobs are queued, one job per
prompt with its n choices. Without `stream` the answer is one JSON object once every choice
has finished; with it, server-sent events: a chunk per token whose text became safe to show
(or whose log-probability was asked for), a chunk per finished choice with its
finish_reason, the usage (on the last chunk; in a chunk of its own, with no choices, when
stream_options.include_usage asks, as OpenAI sends it), then `data: [DONE]`. A failure
after the stream began arrives as `data: {"error": ...}` before [DONE].
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from gptlab.serve import answers, errors
from gptlab.serve.answers import Gathered, Tokens, Usage
from gptlab.serve.bridge import ClientGone, Run, notifier_of
from gptlab.serve.errors import ApiError
from gptlab.serve.scheduler import Failed, Finished, Job, Prompt, Token
from gptlab.serve.schemas import (
    ChatRequest,
    CompletionRequest,
    DetokenizeRequest,
    TokenizeRequest,
)
from gptlab.serve.served import DEFAULT_COMPLETION_TOKENS, Served
from gptlab.web.body import area_router

router = area_router()  # bodies small, on time, JSON (gptlab.web.body.CheckedBody)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def served_of(request: Request) -> Served:
    return request.app.state.served


@router.get("/v1/models")
def models(request: Request) -> dict[str, Any]:
    served = served_of(request)
    return {"object": "list", "data": [_model_card(served)]}


@router.get("/v1/models/{name:path}")
def model(name: str, request: Request) -> dict[str, Any]:
    served = served_of(request)
    served.check_model(name)
    return _model_card(served)


def _model_card(served: Served) -> dict[str, Any]:
    return {"id": served.name, "object": "model", "created": served.created,
            "owned_by": "gptlab", "max_model_len": served.context}


@router.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


# ------------------------------------------------------------------------- tokenizer


@router.post("/tokenize")
def tokenize(body: TokenizeRequest, request: Request) -> dict[str, Any]:
    served = served_of(request)
    ids = served.encode(body.prompt) if body.prompt else []
    return {"tokens": ids, "count": len(ids), "max_model_len": served.context}


@router.post("/detokenize")
def detokenize(body: DetokenizeRequest, request: Request) -> dict[str, Any]:
    served = served_of(request)
    served.encode(body.tokens, "tokens") if body.tokens else None  # ids within the vocabulary
    return {"prompt": served.tokenizer.decode(body.tokens)}


@router.get("/tokenizer_info")
def tokenizer_info(request: Request) -> dict[str, Any]:
    served = served_of(request)
    eos = served.eos
    return {"eos_token": None if eos is None else served.token_text(eos), "bos_token": None,
            "pad_token": None, "chat_template": served.chat.source if served.chat else None,
            "model_max_length": served.context,
            "tokenizer_class": type(served.tokenizer).__name__}


# ------------------------------------------------------------------------- completions


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request
                      ) -> JSONResponse | StreamingResponse:
    served = served_of(request)
    served.check_model(body.model)
    served.check_choices(body.n)
    prompts = [served.encode(p) for p in body.prompts()]
    limits = [served.room(len(ids), body.max_tokens, DEFAULT_COMPLETION_TOKENS)
              for ids in prompts]
    settings = served.settings(body)
    served.check_busy(len(prompts))
    run = Run(notifier_of(request.app.state), len(prompts), body.n)
    for number, (ids, limit) in enumerate(zip(prompts, limits, strict=True)):
        run.jobs.append(Job(ids, limit, settings, run.emitter(number), n=body.n,
                            stop=tuple(body.stops), seeds=served.seeds(body.seed, body.n),
                            logprobs=body.logprobs,
                            echo_logprobs=body.echo and body.logprobs is not None,
                            eos=served.eos))
    for job in run.jobs:
        served.scheduler.submit(job)
    shape = _CompletionShape(served, body, prompts)
    if body.stream:
        return _stream(run, request, shape)
    return await _whole(run, request, shape)


class _CompletionShape:
    """How a completion's events become choices: index = prompt * n + choice; with echo,
    the prompt's text (and log-probabilities) comes first."""

    object_prefix = "cmpl"

    def __init__(self, served: Served, body: CompletionRequest, prompts: list[list[int]]
                 ) -> None:
        self.served, self.body, self.prompts = served, body, prompts
        self.tokens = Tokens(served.token_text)
        self.id, self.created = answers.new_id(self.object_prefix), answers.now()
        self.usage = Usage(prompt_tokens=sum(len(p) for p in prompts))
        self.echoed = {}  # choice index: the prompt's text, until its first chunk has gone

    def index(self, prompt: int, choice: int) -> int:
        return prompt * self.body.n + choice

    def start(self, gathered: Gathered, prompt: int) -> None:
        if self.body.echo:
            text = self.served.tokenizer.decode(self.prompts[prompt])
            gathered.text = text
            self.echoed[gathered.index] = text

    def whole(self, gathered: list[Gathered]) -> dict[str, Any]:
        choices = []
        for g in gathered:
            logprobs = None
            if self.body.logprobs is not None:
                logprobs = self.tokens.completion_logprobs(g.ids, g.logprobs)
            choices.append({"index": g.index, "text": g.text, "logprobs": logprobs,
                            "finish_reason": g.finish_reason})
        return answers.completion(self.id, self.created, self.body.model, choices, self.usage)

    def chunk(self, g: Gathered, text: str, ids: list[int], alts: list, reason: str | None,
              offset: int) -> dict[str, Any]:
        logprobs = None
        if self.body.logprobs is not None and ids:
            logprobs = self.tokens.completion_logprobs(ids, alts, offset)
        return answers.completion(self.id, self.created, self.body.model,
                                  [{"index": g.index, "text": text, "logprobs": logprobs,
                                    "finish_reason": reason}], None)

    def first_chunk(self, g: Gathered) -> dict[str, Any] | None:
        text = self.echoed.pop(g.index, None)
        if text is None:
            return None
        return self.chunk(g, text, [], [], None, 0)

    def usage_chunk(self) -> dict[str, Any]:
        return answers.completion(self.id, self.created, self.body.model, [], self.usage)


# ------------------------------------------------------------------------- chat


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatRequest, request: Request
                           ) -> JSONResponse | StreamingResponse:
    served = served_of(request)
    served.check_model(body.model)
    if served.chat is None:
        raise ApiError(400, f"the model {served.name!r} has no chat template (its tokenizer "
                            f"config names none), so it cannot take chat messages: send its "
                            f"text to POST /v1/completions instead", "messages",
                       "no_chat_template")
    served.check_choices(body.n)
    messages = [{**m.model_dump(exclude_none=True), "content": m.text()}
                for m in body.messages]
    prompt = served.chat.render(messages)
    ids = served.encode(prompt, "messages")
    limit = served.room(len(ids), body.limit, None)
    settings = served.settings(body)
    served.check_busy(1)
    run = Run(notifier_of(request.app.state), 1, body.n)
    top = (body.top_logprobs or 0) if body.logprobs else None
    run.jobs.append(Job(ids, limit, settings, run.emitter(0), n=body.n,
                        stop=tuple(body.stops), seeds=served.seeds(body.seed, body.n),
                        logprobs=top, eos=served.eos))
    served.scheduler.submit(run.jobs[0])
    shape = _ChatShape(served, body, len(ids))
    if body.stream:
        return _stream(run, request, shape)
    return await _whole(run, request, shape)


class _ChatShape:
    """How a chat completion's events become choices: a message per choice; streamed,
    deltas (the first with the role)."""

    def __init__(self, served: Served, body: ChatRequest, prompt_tokens: int) -> None:
        self.served, self.body = served, body
        self.tokens = Tokens(served.token_text)
        self.id, self.created = answers.new_id("chatcmpl"), answers.now()
        self.usage = Usage(prompt_tokens=prompt_tokens)

    def index(self, prompt: int, choice: int) -> int:
        return choice

    def start(self, gathered: Gathered, prompt: int) -> None:
        pass

    def _logprobs(self, ids: list[int], alts: list) -> dict[str, Any] | None:
        if not self.body.logprobs or not ids:
            return None
        return self.tokens.chat_logprobs(ids, alts)

    def whole(self, gathered: list[Gathered]) -> dict[str, Any]:
        choices = [{"index": g.index, "message": {"role": "assistant", "content": g.text},
                    "logprobs": self._logprobs(g.ids, g.logprobs),
                    "finish_reason": g.finish_reason} for g in gathered]
        return answers.chat_completion(self.id, self.created, self.body.model, choices,
                                       self.usage)

    def chunk(self, g: Gathered, text: str, ids: list[int], alts: list, reason: str | None,
              offset: int) -> dict[str, Any]:
        delta = {"content": text} if text or reason is None else {}
        return answers.chat_completion(
            self.id, self.created, self.body.model,
            [{"index": g.index, "delta": delta, "logprobs": self._logprobs(ids, alts),
              "finish_reason": reason}], None, chunk=True)

    def first_chunk(self, g: Gathered) -> dict[str, Any]:
        return answers.chat_completion(
            self.id, self.created, self.body.model,
            [{"index": g.index, "delta": {"role": "assistant", "content": ""},
              "logprobs": None, "finish_reason": None}], None, chunk=True)

    def usage_chunk(self) -> dict[str, Any]:
        return answers.chat_completion(self.id, self.created, self.body.model, [],
                                       self.usage, chunk=True)


# ------------------------------------------------------------------------- answering


def _gathered(shape: Any, prompts: int, n: int) -> dict[int, Gathered]:
    out = {}
    for prompt in range(prompts):
        for choice in range(n):
            g = Gathered(shape.index(prompt, choice))
            shape.start(g, prompt)
            out[g.index] = g
    return out


def _apply(shape: Any, gathered: dict[int, Gathered], prompt: int, event: Any
           ) -> tuple[Gathered | None, str, list[int], list]:
    """Fold one event into its choices; (the choice it touched, new text, new token ids,
    their log-probabilities) for a stream."""
    if isinstance(event, Prompt):  # with echo: the prompt's tokens lead every choice
        for choice in range(shape.body.n):
            g = gathered[shape.index(prompt, choice)]
            g.ids, g.logprobs = list(event.ids), list(event.logprobs)
        return None, "", [], []
    g = gathered[shape.index(prompt, event.choice)]
    if isinstance(event, Token):
        shape.usage.completion_tokens += 1
        g.text += event.text
        g.ids.append(event.id)
        g.logprobs.append(event.logprob)
        alts = [event.logprob] if event.logprob is not None else []
        return g, event.text, [event.id] if alts else [], alts
    g.text += event.text  # Finished: the text held back
    g.finish_reason = event.reason
    return g, event.text, [], []


async def _whole(run: Run, request: Request, shape: Any) -> JSONResponse:
    gathered = _gathered(shape, len(run.jobs), shape.body.n)
    try:
        async for batch in run.batches(request):
            for prompt, event in batch:
                if isinstance(event, Failed):
                    return errors.response(500, event.message)
                _apply(shape, gathered, prompt, event)
    except ClientGone:
        return errors.response(499, "the client closed the connection")
    return JSONResponse(shape.whole([gathered[i] for i in sorted(gathered)]))


def _stream(run: Run, request: Request, shape: Any) -> StreamingResponse:
    return StreamingResponse(_events(run, request, shape), media_type="text/event-stream",
                             headers=SSE_HEADERS)


def _sse(data: dict[str, Any] | str) -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n"


async def _events(run: Run, request: Request, shape: Any) -> AsyncIterator[str]:
    """The stream's lines, all of one batch of events written at once."""
    gathered = _gathered(shape, len(run.jobs), shape.body.n)
    stream = _Stream(shape, gathered)
    try:
        async for batch in run.batches(request):
            lines = []
            for prompt, event in batch:
                if isinstance(event, Failed):
                    lines.append(_sse(errors.body(500, event.message)))
                    stream.failed = True
                    break
                lines.extend(stream.lines(prompt, event))
            yield "".join(lines)
            if stream.failed:
                break
        if shape.body.include_usage and not stream.failed:
            yield _sse(shape.usage_chunk())
        yield _sse("[DONE]")
    except ClientGone:
        return


class _Stream:
    """A stream's chunks, event by event: each choice's first chunk (a chat's role, a
    completion's echoed prompt), then its text and log-probabilities as they come, its
    finish_reason, and the usage on the last chunk unless a chunk of its own was asked."""

    def __init__(self, shape: Any, gathered: dict[int, Gathered]) -> None:
        self.shape, self.gathered = shape, gathered
        self.offsets = {i: 0 for i in gathered}  # text_offset of each choice's next token
        self.started: set[int] = set()
        self.left = len(gathered)
        self.failed = False

    def lines(self, prompt: int, event: Any) -> list[str]:
        shape = self.shape
        if isinstance(event, Prompt):  # echo with logprobs: the prompt leads each choice
            _apply(shape, self.gathered, prompt, event)
            out = []
            for choice in range(shape.body.n):
                g = self.gathered[shape.index(prompt, choice)]
                self.started.add(g.index)
                text = shape.echoed.pop(g.index, "")
                out.append(_sse(shape.chunk(g, text, list(event.ids), list(event.logprobs),
                                            None, 0)))
                self.offsets[g.index] = len(text)
            return out
        g, text, ids, alts = _apply(shape, self.gathered, prompt, event)
        out = self._first(g)
        reason = event.reason if isinstance(event, Finished) else None
        if not text and not ids and reason is None:
            return out
        if reason is not None:
            self.left -= 1
        chunk = shape.chunk(g, text, ids, alts, reason, self.offsets[g.index])
        self.offsets[g.index] += len(text)
        if self.left == 0 and not shape.body.include_usage:
            chunk["usage"] = shape.usage.to_dict()
        out.append(_sse(chunk))
        return out

    def _first(self, g: Gathered) -> list[str]:
        if g.index in self.started:
            return []
        self.started.add(g.index)
        chunk = self.shape.first_chunk(g)
        if chunk is None:
            return []
        self.offsets[g.index] = len(chunk["choices"][0].get("text", ""))
        return [_sse(chunk)]
