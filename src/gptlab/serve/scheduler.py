"""Continuous batching: one thread runs the model for every request, one token per step.

Each step (Scheduler.step):
1. drops what was cancelled (a client gone): waiting jobs, and active choices' rows;
2. admits waiting jobs while their choices fit the free rows, up to PREFILL_TOKENS of
   prompt per step (so that a crowd arriving at once does not stall the streams already
   running): one prefill per job (B = 1, the prompt through a plain KVCache, as `gptlab
   sample` does it), whose last logits give each choice its first token, and whose keys
   and values each choice's row starts from;
3. runs one batched decode for every active row (gptlab.serve.slots.SlotCache) and hands
   each choice its next token;
4. frees the rows of finished choices.

A job's answer comes back as events through its `emit` callback, called on this thread
(the HTTP side hands them to its event loop): Prompt (the prompt's log-probabilities, for
echo), Token (one per token: its text as far as it is safe to show, its log-probability and
top alternatives), Finished (per choice), Failed (the job cannot go on). A choice ends at
max_tokens ("length"), at a stop string or the end-of-text token ("stop").

Why prefill alone: its logits and cache are then those of `gptlab sample`, and a long
prompt never pads a batch. The cost is one forward per admitted job; decode, where a request
spends most of its steps, is what batching pays for.
"""

from __future__ import annotations

import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gptlab.inference.sampling import TextStream
from gptlab.model.decoding import SamplingSettings, filter_logits
from gptlab.model.kv_cache import new_kv_cache
from gptlab.serve.slots import SlotCache

# Prompt tokens prefilled per step at most (past the first job): 64 requests arriving at
# once would otherwise all be prefilled before any active row decodes its next token (on
# 2 cores, the GPT-2-small shape's 64 x 30-token prompts held every stream for 13 s).
PREFILL_TOKENS = 256


@dataclass(frozen=True)
class Alternatives:
    """A token's log-probability under the model (log-softmax of its logits, float32,
    before temperature or any cut) and the `top` likeliest tokens' (id, logprob)."""

    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Prompt:
    """The prompt's tokens with their log-probabilities (None for the first, which nothing
    predicts)."""

    ids: list[int]
    logprobs: list[Alternatives | None]


@dataclass(frozen=True)
class Token:
    choice: int
    id: int
    text: str  # the text that became safe to show with this token (may be empty)
    logprob: Alternatives | None  # None unless the job asked for logprobs


@dataclass(frozen=True)
class Finished:
    choice: int
    reason: str  # "length" or "stop"
    text: str  # the rest of the text held back (see TextStream.finish)


@dataclass(frozen=True)
class Failed:
    message: str


Event = Prompt | Token | Finished | Failed


@dataclass
class Job:
    """One prompt with its n choices. ids: the prompt's token ids (at least one);
    logprobs: how many top alternatives each token's log-probability comes with (None: no
    log-probabilities); echo_logprobs: the prompt's too (a Prompt event first); seeds:
    one per choice (None, or none given: drawn at random); eos: the end-of-text token's id,
    if any."""

    ids: list[int]
    max_tokens: int
    settings: SamplingSettings
    emit: Callable[[Event], None]
    n: int = 1
    stop: tuple[str, ...] = ()
    seeds: tuple[int | None, ...] = (None,)
    logprobs: int | None = None
    echo_logprobs: bool = False
    eos: int | None = None
    cancelled: bool = False

    def cancel(self) -> None:
        """The client is gone: the scheduler frees its rows at its next step."""
        self.cancelled = True


@dataclass
class Choice:
    """One choice being decoded: its job, its index, its text so far and its row."""

    job: Job
    index: int
    stream: TextStream
    generator: torch.Generator | None
    last: int = 0  # the token to feed next
    made: int = 0  # tokens generated
    row: int = -1
    done: bool = field(default=False)


class Scheduler:
    """The pool of `slots` rows over `model` and the thread that steps it.

    submit(job) queues a job (from any thread); the thread admits it when its n choices fit
    the free rows. decode: the tokenizer's decode, for the choices' text."""

    def __init__(self, model: torch.nn.Module, decode: Callable[[list[int]], str],
                 slots: int = 32) -> None:
        self.model, self.decode, self.slots = model, decode, slots
        weight = model.wte.weight
        self.device = weight.device
        self.cache = SlotCache(model.config, slots, weight.device, weight.dtype)
        self.rows: list[Choice] = []  # rows[r]: the choice in row r of the cache
        self.waiting: deque[Job] = deque()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._users = 0  # apps serving it (start/close)
        self.steps = 0  # decode steps run (tests read it)

    # ------------------------------------------------------------------ threads

    def start(self) -> None:
        """Start the thread, for one more app serving this scheduler (one thread for all)."""
        with self._lock:
            self._users += 1
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="gptlab-serve-scheduler",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        """One app fewer; the last one's close stops the thread."""
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._thread is None:
                return
            self._stopping = True
            self._lock.notify_all()
            thread, self._thread = self._thread, None
        thread.join(timeout=10)

    def submit(self, job: Job) -> None:
        with self._lock:
            self.waiting.append(job)
            self._lock.notify_all()

    @property
    def queued(self) -> int:
        return len(self.waiting)

    def _run(self) -> None:
        # Grad mode is per thread: this one never builds a graph.
        with torch.inference_mode():
            while True:
                with self._lock:
                    while not (self.waiting or self.rows or self._stopping):
                        self._lock.wait()
                    if self._stopping:
                        return
                try:
                    self.step()
                except Exception as exc:  # noqa: BLE001 - every client hears, then go on
                    traceback.print_exc()
                    self._fail_all(f"the server failed while decoding: "
                                   f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ one step

    def step(self) -> None:
        """Drop the cancelled, admit what fits (up to PREFILL_TOKENS of prompt, at least one
        job), decode one token for every active row."""
        for choice in [c for c in self.rows if c.job.cancelled]:
            self._free(choice)
        prefilled = 0
        while prefilled < PREFILL_TOKENS:
            with self._lock:
                while self.waiting and self.waiting[0].cancelled:
                    self.waiting.popleft()
                if not self.waiting or self.waiting[0].n > self.slots - len(self.rows):
                    break
                job = self.waiting.popleft()
            prefilled += len(job.ids)
            try:
                self._admit(job)
            except Exception as exc:  # noqa: BLE001 - this job's client hears, others go on
                traceback.print_exc()
                job.emit(Failed(f"the server failed on this prompt: {type(exc).__name__}: "
                                f"{exc}"))
                job.cancel()
        if self.rows:
            self._decode()

    def _admit(self, job: Job) -> None:
        model = self.model
        ids = torch.tensor([job.ids], device=self.device)
        kv = new_kv_cache(model, 1, len(job.ids))
        logits, _ = model(ids, cache=kv)  # (1, T, V)
        logits = logits[0]
        if job.echo_logprobs:
            job.emit(Prompt(job.ids, self._prompt_logprobs(logits, job)))
        keys = [k[0] for k in kv.keys]
        values = [v[0] for v in kv.values]
        for index in range(job.n):
            seed = job.seeds[index] if index < len(job.seeds) else None
            generator = None
            if not job.settings.greedy:
                generator = torch.Generator(device=self.device)
                if seed is None:
                    generator.seed()
                else:
                    generator.manual_seed(seed)
            choice = Choice(job, index, TextStream(self.decode, job.stop), generator)
            if job.max_tokens == 0:
                self._finish(choice, "length")
                continue
            token = self._choose(logits[-1:], [choice])[0]
            self._take(choice, token, logits[-1:] if job.logprobs is not None else None)
            if not choice.done:
                choice.row = self.cache.add(keys, values)
                self.rows.append(choice)

    def _decode(self) -> None:
        cache = self.cache
        cache.reserve()
        mask = cache.key_mask()
        tokens = torch.tensor([[c.last] for c in self.rows], device=self.device)
        logits, _ = self.model(tokens, cache=cache, attention_mask=mask)
        logits = logits[:, -1]  # (rows, V)
        self.steps += 1
        chosen = self._choose(logits, self.rows)
        for choice, token in zip(list(self.rows), chosen, strict=True):
            wanted = choice.job.logprobs is not None
            self._take(choice, token, logits[choice.row:choice.row + 1] if wanted else None)
        for choice in [c for c in self.rows if c.done]:
            self._free(choice)

    # ------------------------------------------------------------------ choices

    def _choose(self, logits: Tensor, choices: list[Choice]) -> list[int]:
        """The next token of each choice from its row of logits (rows, V): the greedy ones
        in one argmax; the others by settings, each group's filtered distribution in one
        pass (filter_logits and softmax work row by row, so a row's numbers do not depend
        on its neighbours), then one draw per row from its own generator."""
        chosen = [0] * len(choices)
        groups: dict[SamplingSettings, list[int]] = {}
        for i, c in enumerate(choices):
            groups.setdefault(c.job.settings, []).append(i)
        for settings, rows in groups.items():
            if settings.greedy:
                picked = logits[rows].float().argmax(dim=-1).tolist()
            else:
                probs = torch.softmax(filter_logits(logits[rows], settings), dim=-1)
                picked = [int(torch.multinomial(probs[k:k + 1], 1,
                                                generator=choices[i].generator))
                          for k, i in enumerate(rows)]
            for i, token in zip(rows, picked, strict=True):
                chosen[i] = token
        return chosen

    def _take(self, choice: Choice, token: int, logits: Tensor | None) -> None:
        """Hand `token` to its choice (logits (1, V): its log-probability is wanted)."""
        job = choice.job
        choice.last, choice.made = token, choice.made + 1
        alternatives = None
        if logits is not None:
            alternatives = _alternatives(torch.log_softmax(logits.float(), dim=-1)[0], token,
                                         job.logprobs or 0)
        if token == job.eos:
            job.emit(Token(choice.index, token, "", alternatives))
            self._finish(choice, "stop")
            return
        text = choice.stream.push([token])
        job.emit(Token(choice.index, token, text, alternatives))
        if choice.stream.stopped:
            self._finish(choice, "stop")
        elif choice.made >= job.max_tokens:
            self._finish(choice, "length")

    def _finish(self, choice: Choice, reason: str) -> None:
        choice.done = True
        choice.job.emit(Finished(choice.index, reason, choice.stream.finish()))

    def _free(self, choice: Choice) -> None:
        moved = self.cache.remove(choice.row)
        last = self.rows.pop()
        if moved is not None:  # the last row's choice now sits in the freed row
            last.row = choice.row
            self.rows[choice.row] = last
        choice.row = -1

    def _prompt_logprobs(self, logits: Tensor, job: Job) -> list[Alternatives | None]:
        """Each prompt token's log-probability given the tokens before it, from the
        prefill's logits (T, V)."""
        logprobs = torch.log_softmax(logits.float(), dim=-1)  # (T, V)
        out: list[Alternatives | None] = [None]
        for t in range(1, len(job.ids)):
            out.append(_alternatives(logprobs[t - 1], job.ids[t], job.logprobs or 0))
        return out

    def _fail_all(self, message: str) -> None:
        for choice in list(self.rows):
            choice.job.emit(Failed(message))
            choice.job.cancel()
        with self._lock:
            jobs = list(self.waiting)
            self.waiting.clear()
        for job in jobs:
            job.emit(Failed(message))
        self.rows.clear()
        self.cache = SlotCache(self.model.config, self.slots, self.device,
                               self.model.wte.weight.dtype)


def _alternatives(logprobs: Tensor, token: int, top: int) -> Alternatives:
    """The log-probability of `token` and the `top` likeliest tokens', from one row of
    log-probabilities (V,)."""
    best = ()
    if top > 0:
        values, ids = torch.topk(logprobs, min(top, logprobs.numel()))
        best = tuple(zip(ids.tolist(), values.tolist(), strict=True))
    return Alternatives(float(logprobs[token]), best)
