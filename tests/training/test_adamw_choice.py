"""The AdamW implementation per device (gptlab.training.optim): what is chosen reaches
torch, and the three implementations compute the same update (the choice is speed only;
bench/adamw_startup.py measures it)."""

from __future__ import annotations

import copy

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.training.config import TrainConfig
from gptlab.training.optim import ADAMW_IMPLEMENTATIONS, adamw_implementation, make_optimizer

CPU = torch.device("cpu")


def test_a_cpu_run_gets_fused_adamw():
    assert adamw_implementation(CPU) == "fused"
    opt = make_optimizer(GPT(GPTConfig.from_preset("tiny-gpt2")), TrainConfig(), CPU)
    assert opt.defaults["fused"] is True


@pytest.mark.parametrize("implementation, flags", [
    ("fused", {"fused": True}), ("foreach", {"foreach": True}),
    ("for-loop", {"foreach": False, "fused": None})])
def test_each_implementation_reaches_torch(implementation, flags):
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    opt = make_optimizer(model, TrainConfig(optimizer="muon"), CPU, adamw=implementation)
    assert {k: opt.adamw.defaults[k] for k in flags} == flags  # Muon's AdamW part too


def test_the_implementations_compute_the_same_steps():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    idx = torch.randint(model.config.vocab_size, (2, 9))
    after = {}
    for implementation in ADAMW_IMPLEMENTATIONS:
        twin = copy.deepcopy(model)
        opt = make_optimizer(twin, TrainConfig(weight_decay=0.1, learning_rate=1e-2), CPU,
                             adamw=implementation)
        for _ in range(3):
            _, loss = twin(idx[:, :-1], idx[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        after[implementation] = torch.cat([p.detach().flatten() for p in twin.parameters()])
    moved = (after["fused"] - torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert moved.abs().max() > 1e-3  # the steps did something
    for implementation in ("foreach", "for-loop"):
        # Within 1% of one step (lr 1e-2): the kernels round differently (4.4e-5 at most
        # when written, in 61 of 29,600 weights).
        torch.testing.assert_close(after[implementation], after["fused"], rtol=0, atol=1e-4)
