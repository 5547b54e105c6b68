"""The price's measurements (gptlab.experiments.price): the saved bytes are the storages
autograd keeps, each once; the cached decoding loop chooses the tokens the uncached one
does; every timing gives one number per repeat (no speed is asserted)."""

from __future__ import annotations

import torch

from gptlab.experiments import price
from gptlab.experiments.lstm import LSTMModel
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


def test_saved_bytes_are_what_autograd_keeps_each_storage_once():
    a = torch.randn(10, requires_grad=True)
    b = torch.randn(10, requires_grad=True)
    assert price.saved_bytes(lambda: (a * b).sum()) == 2 * 10 * 4  # mul saves both
    assert price.saved_bytes(lambda: (a * a).sum()) == 10 * 4  # one storage, counted once
    assert price.saved_bytes(lambda: (a + b).sum()) == 0  # add keeps nothing


def tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=9, n_layer=1, n_head=1, n_embd=8, block_size=16,
                         dropout=0.0, bias=False, pos_encoding="rope")).eval()


def test_the_cached_loop_decodes_what_running_the_whole_text_does():
    model = tiny_gpt()
    prompt = torch.randint(9, (1, 5), generator=torch.Generator().manual_seed(1))
    cached = model.generate(prompt, 6, temperature=0.0)[:, 5:]
    assert torch.equal(cached, price.uncached_greedy(model, prompt, 6))


def test_each_timing_gives_one_number_per_repeat():
    model, lstm = tiny_gpt(), LSTMModel(9, 4, 5)
    prompt = torch.randint(9, (1, 6))
    assert len(price.decode_seconds_cached(model, prompt, 4)) == 3  # the first left out
    assert len(price.decode_seconds_uncached(model, prompt, 2)) == 2
    assert len(price.lstm_step_seconds(lstm, 3)) == 3
    step = price.train_step(model, lambda i: model(i)[0], prompt)
    assert len(price.seconds_of(step, 2)) == 2
    assert all(p.grad is not None for p in model.parameters())  # it ran backward
