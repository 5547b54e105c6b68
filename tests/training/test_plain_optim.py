"""gptlab.training.plain_optim: torch.optim's bookkeeping and AdamW's step without
torch.optim.Optimizer (whose first use imports torch._dynamo). The numbers are torch's to
the bit, the state_dict format is torch's both ways, and a Muon run never imports
torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gptlab.training.plain_optim import AdamW, PlainOptimizer


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=g)) for shape in
            ((8, 4), (4,), (3, 5))]


def _grads(step: int, params) -> None:
    g = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g)


def _groups(params):
    return [{"params": [params[0], params[2]], "weight_decay": 0.1},
            {"params": [params[1]], "weight_decay": 0.0}]


@pytest.mark.parametrize("impl", [{"fused": True}, {"foreach": True}, {"foreach": False}])
def test_adamw_steps_as_torch_optim_adamw_to_the_bit(impl):
    ours_p, theirs_p = _params(0), _params(0)
    ours = AdamW(_groups(ours_p), lr=3e-3, betas=(0.9, 0.99), **impl)
    theirs = torch.optim.AdamW(_groups(theirs_p), lr=3e-3, betas=(0.9, 0.99), **impl)
    for step in range(5):
        for opt, params in ((ours, ours_p), (theirs, theirs_p)):
            for group in opt.param_groups:  # the trainer sets lr on every step
                group["lr"] = 3e-3 * (1 - step / 10)
            _grads(step, params)
            opt.step()
            opt.zero_grad()
    for a, b in zip(ours_p, theirs_p, strict=True):
        assert torch.equal(a, b)
        assert a.grad is None


def test_state_dicts_go_both_ways_with_torch_optim():
    """A checkpoint torch.optim.AdamW saved loads into gptlab's AdamW and the other way
    round, and both continue as one optimizer would."""
    ref_p, a_p, b_p = _params(1), _params(1), _params(1)
    ref = torch.optim.AdamW(_groups(ref_p), lr=1e-2, fused=True)
    first = torch.optim.AdamW(_groups(a_p), lr=1e-2, fused=True)
    for step in range(3):
        for opt, params in ((ref, ref_p), (first, a_p)):
            _grads(step, params)
            opt.step()
    ours = AdamW(_groups(a_p), lr=5.0, fused=True)  # the saved settings win, lr included
    saved = first.state_dict()
    ours.load_state_dict(saved)
    assert ours.state[a_p[0]]["exp_avg"] is not saved["state"][0]["exp_avg"]  # copied
    assert ours.param_groups[0]["lr"] == 1e-2
    assert ours.state_dict()["state"].keys() == first.state_dict()["state"].keys()
    for step in range(3, 5):
        for opt, params in ((ref, ref_p), (ours, a_p)):
            _grads(step, params)
            opt.step()
    back = torch.optim.AdamW(_groups(b_p), lr=1e-2, fused=True)
    with torch.no_grad():
        for p, q in zip(b_p, a_p, strict=True):
            p.copy_(q)
    back.load_state_dict(ours.state_dict())
    for step in range(5, 7):
        for opt, params in ((ref, ref_p), (back, b_p)):
            _grads(step, params)
            opt.step()
    for r, p in zip(ref_p, b_p, strict=True):
        assert torch.equal(r, p)


def test_bookkeeping_refuses_what_torch_optim_refuses():
    p = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="empty"):
        PlainOptimizer([], {})
    with pytest.raises(ValueError, match="more than one"):
        PlainOptimizer([{"params": [p]}, {"params": [p]}], {})
    opt = PlainOptimizer([p], {"lr": 1.0})
    assert opt.param_groups[0]["lr"] == 1.0 and opt.param_groups[0]["params"] == [p]
    with pytest.raises(ValueError, match="different number"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1]}]})
    p.grad = torch.ones(2)
    opt.zero_grad(set_to_none=False)
    assert torch.equal(p.grad, torch.zeros(2))


# A child process: a Muon run, as the speedrun's presets train, from the CLI's entry point.
MUON_RUN = """
import sys
from gptlab.cli.main import main
code = main(["train", "--preset", "shakespeare-char-cpu-speedrun-188", "--data", sys.argv[1],
             "--out", sys.argv[2], "--max-iters", "3", "--n-embd", "32", "--block-size",
             "16", "--batch-size", "2", "--no-progress", "--dtype", "float32",
             "--muon-dtype", "float32", "--attention-dtype", "float32"])
heavy = [m for m in ("torch._dynamo", "torch.distributed.tensor") if m in sys.modules]
print(code, " ".join(heavy) or "none")
"""


def test_a_muon_run_imports_neither_dynamo_nor_dtensor(data_dir, tmp_path):
    """What a speedrun's start-up no longer pays (0.9 s on a 2-core VM): torch._dynamo
    (torch.optim's optimizers, a model built on the meta device) and
    torch.distributed.tensor (the sharded modes and checkpoints)."""
    out = subprocess.run([sys.executable, "-c", MUON_RUN, str(data_dir), str(tmp_path / "r")],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1].split() == ["0", "none"], out
