"""What a sequence of n tokens costs a model, measured: the seconds of one forward and
backward pass, the bytes autograd keeps for the backward pass, and the seconds to decode one
more token with gptlab's KV cache (gptlab.model.decoding.generate_tokens) and without it
(the whole text run again, as a model without a cache must).

The memory is counted, not sampled: every tensor autograd saves during the forward pass
(torch.autograd.graph.saved_tensors_hooks), each storage once. It is what the backward pass
needs on any device, where a CPU allocator's peak is not observable from torch; it leaves
out the weights, their gradients and the transient buffers of a kernel.

Timings are measurements on whatever machine runs them (a shared machine's are
indicative); nothing here asserts a speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from gptlab.experiments.lstm import LSTMModel
from gptlab.model.decoding import SamplingSettings, generate_tokens


def saved_bytes(forward: Callable[[], Tensor]) -> int:
    """Bytes of the distinct storages autograd saves while forward() runs."""
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(seen.values())


BEST_OF = 5  # calls per repeat: a shared machine's other jobs only ever add time


def seconds_of(work: Callable[[], object], repeats: int, best_of: int = BEST_OF) -> list[float]:
    """Seconds of work() for each of `repeats` repeats, after one warm-up call: each the
    fastest of `best_of` calls (the least disturbed by whatever else the machine runs)."""
    work()
    out = []
    for _ in range(repeats):
        calls = []
        for _ in range(best_of):
            t0 = time.perf_counter()
            work()
            calls.append(time.perf_counter() - t0)
        out.append(min(calls))
    return out


def train_step(model: nn.Module, logits_of: Callable[[Tensor], Tensor],
               idx: Tensor) -> Callable[[], None]:
    """One forward and backward pass of the next-token loss on idx (1, n): a callable."""
    def step() -> None:
        model.zero_grad(set_to_none=True)
        logits = logits_of(idx)
        loss = nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:])
        loss.backward()
    return step


def decode_seconds_cached(model: nn.Module, prompt: Tensor, new: int) -> list[float]:
    """Seconds between consecutive greedy tokens after `prompt` (1, n) with the KV cache:
    `new` tokens, the first (which pays for the prompt's prefill) left out."""
    stamps = []
    for _ in generate_tokens(model, prompt, new, SamplingSettings(temperature=0.0)):
        stamps.append(time.perf_counter())
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


@torch.inference_mode()
def decode_seconds_uncached(model: nn.Module, prompt: Tensor, repeats: int) -> list[float]:
    """Seconds to choose the next token after `prompt` (1, n) by running the whole text
    again: one uncached decoding step at that length."""
    return seconds_of(lambda: model(prompt)[0][:, -1].argmax(-1), repeats)


@torch.inference_mode()
def uncached_greedy(model: nn.Module, prompt: Tensor, new: int) -> Tensor:
    """`new` greedy tokens after prompt, each by running the whole text again (the
    reference the cached loop must equal)."""
    idx = prompt
    for _ in range(new):
        idx = torch.cat([idx, model(idx)[0][:, -1:].argmax(-1)], dim=1)
    return idx[:, prompt.shape[1]:]


@torch.inference_mode()
def lstm_step_seconds(model: LSTMModel, repeats: int) -> list[float]:
    """Seconds of one LSTM decoding step (embedding, one step from a carried state, head):
    its cost per token at any length, the state being all it carries."""
    lstm, token = model.lstm, torch.zeros(1, 1, dtype=torch.long)
    state = (torch.zeros(lstm.num_layers, 1, lstm.hidden_size),
             torch.zeros(lstm.num_layers, 1, lstm.hidden_size))
    return seconds_of(lambda: model.head(lstm(model.embedding(token), state)[0]), repeats)
