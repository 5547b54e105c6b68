"""Optimizers outside torch.optim.Optimizer, for the ones gptlab steps itself (Muon and the
AdamW beside it): the same param groups, per-parameter state and state_dict format, so a
checkpoint saved by either loads into the other, without torch.optim.Optimizer's start-up.

Why: torch.optim.Optimizer's constructor (add_param_group), zero_grad, state_dict and
load_state_dict are @torch._disable_dynamo, whose first call imports torch._dynamo, and
with it sympy and torch.fx: 0.4-0.9 s of a fresh process on a 2-core VM, where the CPU
speedrun's whole command takes 7-16 s. The update
itself stays torch's: `AdamW` calls torch.optim.adamw.adamw, the functional form
torch.optim.AdamW steps with (fused, foreach or a loop), so its numbers are torch's to the
bit (tests/training/test_plain_optim.py).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim.adamw import adamw


class PlainOptimizer:
    """param_groups (dicts with the defaults filled in), state (per parameter), zero_grad,
    and state_dict / load_state_dict in torch.optim's format: {"state": {index: {...}},
    "param_groups": [{..., "params": [index, ...]}]}, parameters numbered in group order."""

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) < len(params) or any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append({**self.defaults, **group, "params": params})

    @torch.no_grad()
    def step(self, closure=None):
        """One update (a subclass's _update); closure, if given, recomputes the loss first,
        with gradients on, as torch.optim's step takes it."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update()
        return loss

    def _update(self) -> None:
        raise NotImplementedError

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().requires_grad_(False).zero_()

    def state_dict(self) -> dict[str, Any]:
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        return {"state": {index[id(p)]: s for p, s in self.state.items()},
                "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As torch.optim.Optimizer's: the groups must match in number and size; each
        group's settings come from the saved ones; state tensors go to their parameter's
        device, floating ones (but "step") to its dtype; nothing is shared with
        state_dict (copied first, as torch does)."""
        state_dict = copy.deepcopy(state_dict)
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
                len(s["params"]) != len(g["params"])
                for s, g in zip(saved, self.param_groups, strict=True)):
            raise ValueError("loaded state dict has a different number of parameter groups "
                             "or parameters than the optimizer")
        by_index = {i: (p, s) for s, g in zip(saved, self.param_groups, strict=True)
                    for i, p in zip(s["params"], g["params"], strict=True)}
        self.state = defaultdict(dict)
        for i, values in state_dict["state"].items():
            p, group = by_index[int(i)]
            on_device = bool(group.get("fused") or group.get("capturable"))
            self.state[p] = {k: _placed(v, p, k, on_device) for k, v in values.items()}
        self.param_groups = [{**s, "params": g["params"]}
                             for s, g in zip(saved, self.param_groups, strict=True)]


def _placed(value: Any, p: Tensor, key: str, step_on_device: bool) -> Any:
    if not isinstance(value, Tensor):
        return value
    if key == "step":  # a count: on the parameter's device where fused AdamW needs it
        return value.to(device=p.device, dtype=torch.float32) if step_on_device else value
    if value.is_floating_point():
        return value.to(device=p.device, dtype=p.dtype)
    return value.to(device=p.device)


class AdamW(PlainOptimizer):
    """torch.optim.AdamW's step (decoupled weight decay, no amsgrad) on PlainOptimizer's
    bookkeeping; fused / foreach as torch's flags say (None: torch's default)."""

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, fused: bool | None = None,
                 foreach: bool | None = None) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=False, maximize=False, foreach=foreach,
                                      capturable=False, differentiable=False, fused=fused,
                                      decoupled_weight_decay=True))

    def _update(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p, group["fused"]) for p in params]
            beta1, beta2 = group["betas"]
            adamw(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                  [s["exp_avg_sq"] for s in states], [], [s["step"] for s in states],
                  foreach=group["foreach"], fused=group["fused"], amsgrad=False,
                  beta1=beta1, beta2=beta2, lr=group["lr"],
                  weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)

    def _state(self, p: Tensor, fused: bool | None) -> dict[str, Any]:
        state = self.state[p]
        if not state:  # as torch.optim.AdamW starts it
            state["step"] = torch.zeros((), dtype=torch.float32,
                                        device=p.device if fused else "cpu")
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state
