"""Sharded checkpoints of a sharded run (gptlab.distributed.parallelize), with
torch.distributed.checkpoint.

Each rank writes its own shards of the weights and AdamW moments into RUN/shards-STEP-ID/;
DCP records every tensor's global shape and which piece each rank held, so a checkpoint
loads onto any mode and number of ranks (the parameter layout is the same in every sharded
mode). A checkpoint is written as `NAME.partial` and renamed once every rank has finished;
state.pt, written after that by rank 0 and naming the directory, is the commit point
(gptlab.training.rundir), so a crash mid-save leaves the previous checkpoint as it was.

The optimizer state is saved per parameter name, as `optimizer.<name>.<exp_avg|...>`, from
`optimizer.state` directly. torch's get_optimizer_state_dict is not used: on an optimizer
that has not stepped yet (the step-0 checkpoint) it runs a step with zero gradients to
create the state, which moves Adam's step count and so every later update.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

from gptlab.errors import UsageError

# + step and a random id: a sharded checkpoint's directory. Every run's checkpoint looks
# for stale ones by this name, so the module imports torch.distributed.checkpoint (with
# torch.distributed.tensor, sympy and torch.fx: 0.45 s) only where it saves or loads.
PREFIX = "shards-"
PARTIAL = ".partial"


def save(run_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """Every rank: write this rank's shards; returns the directory's name (in run_dir)."""
    import torch.distributed.checkpoint as dcp  # start-up: see PREFIX

    token = [secrets.token_hex(4) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(token, src=0)  # one directory name for all ranks
    name = f"{PREFIX}{step:08d}-{token[0]}"
    partial = run_dir / (name + PARTIAL)
    dcp.save({"model": _weights(model), "optimizer": _moments(model, optimizer)},
             checkpoint_id=partial)
    dist.barrier()  # every rank's files are written before the directory counts as whole
    if dist.get_rank() == 0:
        partial.rename(run_dir / name)
    dist.barrier()
    return name


def load(run_dir: Path, name: str, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Every rank: load the weights and optimizer moments of checkpoint `name` into this
    rank's shards, whatever layout wrote them."""
    path = run_dir / name
    if not (path / ".metadata").is_file():
        raise UsageError(f"cannot resume: the sharded checkpoint {path} is missing")
    import torch.distributed.checkpoint as dcp  # start-up: see PREFIX

    saved = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    weights = _weights(model)
    moments: dict[str, dict[str, Tensor]] = {}
    fused = any(g.get("fused") or g.get("capturable") for g in optimizer.param_groups)
    for fqn, param in _named(model).items():
        prefix = f"optimizer.{fqn}."
        for key, meta in saved.items():
            kind = key[len(prefix):]
            if not key.startswith(prefix) or "." in kind:
                continue
            if tuple(meta.size) == tuple(param.shape):
                target = torch.zeros_like(param.detach(), dtype=meta.properties.dtype)
            else:  # a scalar such as Adam's step count: plain, the same on every rank
                target = torch.zeros(tuple(meta.size), dtype=meta.properties.dtype,
                                     device=param.device if fused else "cpu")
            moments.setdefault(fqn, {})[kind] = target
    missing = sorted(f"model.{k}" for k in weights if f"model.{k}" not in saved)
    if missing:
        raise UsageError(f"{path} does not match the model: missing {', '.join(missing[:3])}")
    dcp.load({"model": weights, "optimizer": moments}, checkpoint_id=path)
    params = _named(model)
    optimizer.state.clear()
    for fqn, state in moments.items():
        optimizer.state[params[fqn]] = state


def _named(model: nn.Module) -> dict[str, nn.Parameter]:
    return dict(model.named_parameters())  # a tied matrix once, under its first name


def _weights(model: nn.Module) -> dict[str, Tensor]:
    return {name: p.detach() for name, p in _named(model).items()}


def _moments(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, dict]:
    return {name: dict(optimizer.state[p]) for name, p in _named(model).items()
            if p in optimizer.state}
