"""Muon: momentum SGD whose update, for each 2-D hidden weight matrix, is orthogonalised by a
Newton-Schulz iteration (Jordan et al. 2024, https://kellerjordan.github.io/posts/muon/).
Embeddings, the output head, norms and biases stay on AdamW (`MuonWithAdamW` steps both).

The algorithm is torch.optim.Muon's (torch >= 2.9) step for step: Nesterov momentum as
lerps, the quintic iteration with its coefficients and 5 steps, decoupled weight decay
lr * wd, and its shape-based learning-rate adjustment. One thing differs: the iteration's
dtype is a choice. torch.optim.Muon hard-codes bf16, which runs 8-30x slower than fp32 on
CPUs without fast bf16 matmuls; here it defaults to fp32 on CPU and bf16 on CUDA.

Where the iteration lands: each singular value s of G / ||G||_F (all <= 1) goes through
p(x) = a x + b x^3 + c x^5 five times (an odd polynomial acts on singular values alone).
p has a local maximum 1.2024 at x = 0.5545 and a local minimum 0.6818 at x = 1.0501, so
after the 5 steps every s >= 0.0016 lies in [0.6818, 1.2024] (and one that was in
[0.6818, 1.1344], which p maps into itself, stays there); an s below 0.0016 has not got
there yet (p grows small values by a = 3.44 per step). Muon's known trade of exactness for
few steps: "something like U S' V^T with S' ~ Uniform(0.5, 1.5)".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.training.plain_optim import PlainOptimizer

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's (Keller Jordan's) quintic
NS_STEPS = 5
EPS = 1e-7  # floor of the Frobenius norm G is divided by
ADJUST_LR = ("original", "match_rms_adamw")
NS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# The settings that shape a matrix's update after its momentum: groups equal in all of
# them have their same-shaped matrices orthogonalised in one stack.
STACKED_BY = ("lr", "weight_decay", "ns_steps", "ns_dtype", "adjust_lr")


def orthogonalize(g: Tensor, dtype: torch.dtype = torch.float32, steps: int = NS_STEPS,
                  coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                  eps: float = EPS) -> Tensor:
    """About U V^T for G = U S V^T (rows x cols), computed in `dtype`: G / ||G||_F, then
    X <- a X + (b A + c A^2) X with A = X X^T, `steps` times, on the wide orientation (so
    A is the smaller Gram matrix). The same operations, in the same order, as torch's.
    A stack of matrices (n, rows, cols) is orthogonalised matrix by matrix, in batched
    matmuls: on a CPU, a model's same-shaped matrices cost less together than one by one."""
    a, b, c = coefficients
    tall = g.size(-2) > g.size(-1)
    x = g.to(dtype)
    if tall:
        x = x.mT
    if x.dim() == 2:
        x = x / x.norm().clamp(min=eps)
        for _ in range(steps):
            gram = x @ x.T
            poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A^2
            x = torch.addmm(x, poly, x, beta=a)
    else:
        x = x / torch.linalg.matrix_norm(x, keepdim=True).clamp(min=eps)
        for _ in range(steps):
            gram = x @ x.mT
            poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
            x = torch.baddbmm(x, poly, x, beta=a)
    return x.mT if tall else x


def adjusted_lr(lr: float, shape: torch.Size, rule: str) -> float:
    """torch.optim.Muon's scaling for an (A, B) matrix: "original" (Keller Jordan's)
    lr * sqrt(max(1, A / B)); "match_rms_adamw" (Moonshot, Liu et al. 2025) lr * 0.2 *
    sqrt(max(A, B)), an update of AdamW's typical RMS."""
    rows, cols = shape[:2]
    if rule == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    return lr * 0.2 * math.sqrt(max(rows, cols))


def default_ns_dtype(device: torch.device) -> torch.dtype:
    """bf16 where matmuls are fast in it (CUDA), fp32 elsewhere."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


class Muon(PlainOptimizer):
    """Muon for 2-D parameters. ns_dtype: the iteration's dtype, "float32", "bfloat16" or
    None (per parameter: bf16 on CUDA, fp32 elsewhere).

    A param group may set "row_blocks", row counts summing to each of its matrices' rows:
    each block is then orthogonalised as a matrix of its own, with its own shape's learning
    rate. That is how a fused projection is treated as the matrices it stacks (attention's
    q, k and v: modded-nanogpt orthogonalises them apart)."""

    def __init__(self, params: Iterable, lr: float = 0.02, momentum: float = 0.95,
                 nesterov: bool = True, weight_decay: float = 0.0, ns_steps: int = NS_STEPS,
                 ns_dtype: str | None = None, adjust_lr: str = "original") -> None:
        _check("lr", lr, lr >= 0, ">= 0")
        _check("momentum", momentum, 0 <= momentum < 1, "in [0, 1)")
        _check("weight_decay", weight_decay, weight_decay >= 0, ">= 0")
        if not (isinstance(ns_steps, int) and 1 <= ns_steps < 100):
            raise UsageError(f"ns_steps must be an integer in [1, 100), got {ns_steps!r}")
        if ns_dtype is not None and ns_dtype not in NS_DTYPES:
            raise UsageError(f"ns_dtype must be one of {', '.join(NS_DTYPES)} or None, "
                             f"got {ns_dtype!r}")
        if adjust_lr not in ADJUST_LR:
            raise UsageError(f"adjust_lr must be one of {', '.join(ADJUST_LR)}, "
                             f"got {adjust_lr!r}")
        defaults = dict(lr=lr, momentum=momentum, nesterov=bool(nesterov),
                        weight_decay=weight_decay, ns_steps=ns_steps, ns_dtype=ns_dtype,
                        adjust_lr=adjust_lr, row_blocks=None)
        super().__init__(params, defaults)
        for group in self.param_groups:
            blocks = group["row_blocks"]
            for p in group["params"]:
                if p.dim() != 2:
                    raise UsageError(f"Muon takes 2-D weight matrices only, got a parameter "
                                     f"of shape {tuple(p.shape)}: give it to AdamW")
                if blocks is not None and (sum(blocks) != p.shape[0] or min(blocks) < 1):
                    raise UsageError(f"row_blocks {tuple(blocks)} do not split the "
                                     f"{p.shape[0]} rows of a {tuple(p.shape)} matrix")

    def _update(self) -> None:
        # Momentum for every matrix in multi-tensor calls, group by group (on a CPU each
        # small call has its cost); then the Newton-Schulz iteration once per shape, on the
        # stack of that shape's updates, across the groups whose settings are the same (a
        # fused q/k/v cut into blocks has a group of its own, its blocks the shape of the
        # attention's output projection in another).
        stacks: dict[tuple, tuple[dict, list[tuple[Tensor, Tensor, Tensor | None]]]] = {}
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            mu = group["momentum"]
            grads = [p.grad for p in params]
            buffers = [self._momentum_buffer(p) for p in params]
            torch._foreach_lerp_(buffers, grads, 1 - mu)  # mu buf + (1 - mu) g
            updates = torch._foreach_lerp(grads, buffers, mu) if group["nesterov"] else buffers
            same_update = tuple(group.get(k) for k in STACKED_BY)
            for p, update in zip(params, updates, strict=True):
                for unit in _units(p, update, group.get("row_blocks")):
                    key = (tuple(unit[0].shape), p.device, p.dtype, same_update)
                    stacks.setdefault(key, (group, []))[1].append(unit)
        for (shape, device, param_dtype, _), (group, units) in stacks.items():
            lr, wd = group["lr"], group["weight_decay"]
            same = [p for p, _ in units]
            dtype = (NS_DTYPES[group["ns_dtype"]] if group["ns_dtype"]
                     else default_ns_dtype(device))
            stacked = (units[0][1] if len(units) == 1
                       else torch.stack([u for _, u in units]))
            ortho = orthogonalize(stacked, dtype, group["ns_steps"]).to(param_dtype)
            steps = [ortho] if len(units) == 1 else list(ortho.unbind(0))
            if wd:  # decoupled weight decay, unscaled lr as torch's (a no-op at 0)
                torch._foreach_mul_(same, 1 - lr * wd)
            step_lr = adjusted_lr(lr, shape, group["adjust_lr"])
            torch._foreach_add_(same, steps, alpha=-step_lr)

    def _momentum_buffer(self, p: Tensor) -> Tensor:
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p.grad)
        return state["momentum_buffer"]



def _units(p: Tensor, update: Tensor, blocks: Iterable[int] | None
           ) -> list[tuple[Tensor, Tensor]]:
    """(matrix, its update) as the units Muon orthogonalises: whole, or cut into blocks of
    rows (views: a step on a block is a step on the matrix)."""
    if blocks is None:
        return [(p, update)]
    sizes = list(blocks)
    return list(zip(p.split(sizes), update.split(sizes), strict=True))


def _check(name: str, value: float, ok: bool, what: str) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and ok):
        raise UsageError(f"{name} must be {what}, got {value!r}")


def hidden_matrices(model: nn.Module, head: str = "lm_head") -> tuple[list, list]:
    """(names of the parameters for Muon, names of the rest, for AdamW). Muon takes the
    weights of the nn.Linear layers other than the output head `head`; embeddings (and a
    head tied to one), norms and biases go to AdamW. Names as model.named_parameters()."""
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    head_module = getattr(model, head, None)
    if head_module is not None:
        embedded.add(id(head_module.weight))
    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    muon, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        hidden = id(p) in linear and id(p) not in embedded and p.dim() == 2
        (muon if hidden else rest).append(name)
    return muon, rest


class MuonWithAdamW:
    """Two optimizers stepped, zeroed and saved as one: Muon for the hidden matrices, AdamW
    for the rest. param_groups lists both's groups (what the trainer sets lr on, what a
    GradScaler unscales); state_dict holds both, so a checkpoint resumes exactly."""

    def __init__(self, muon: Muon, adamw: PlainOptimizer | torch.optim.Optimizer) -> None:
        self.muon, self.adamw = muon, adamw

    @property
    def param_groups(self) -> list[dict]:
        return self.adamw.param_groups + self.muon.param_groups

    def step(self, closure=None):
        loss = self.adamw.step(closure)
        self.muon.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.adamw.zero_grad(set_to_none=set_to_none)
        self.muon.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"adamw": self.adamw.state_dict(), "muon": self.muon.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if not (isinstance(state, dict) and set(state) == {"adamw", "muon"}):
            raise UsageError("the checkpoint's optimizer state is not Muon + AdamW's: was the "
                             "run trained with another optimizer?")
        self.adamw.load_state_dict(state["adamw"])
        self.muon.load_state_dict(state["muon"])
