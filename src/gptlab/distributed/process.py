"""One process or many: what the trainer needs to know about torchrun.

Under `torchrun` the environment carries RANK, LOCAL_RANK and WORLD_SIZE; we then join a
process group (nccl on GPUs, gloo on CPUs) and wrap the model in DistributedDataParallel.
Without them everything here is a no-op, so the trainer has one code path.
"""

from __future__ import annotations

import contextlib
import gc
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gptlab.errors import UsageError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Only this process writes files and prints."""
        return self.rank == 0


def pick_device(name: str | torch.device) -> torch.device:
    """'auto' (CUDA when there is one, else the CPU), a torch device name such as cpu,
    cuda, cuda:1, mps or xpu, or a torch.device; a UsageError unless this build and
    machine have it."""
    if isinstance(name, torch.device):
        device, name = name, str(name)
    elif name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            with warnings.catch_warnings():  # torch warns of deprecated names, e.g. 'mkldnn'
                warnings.simplefilter("ignore")
                device = torch.device(name)
        except (RuntimeError, TypeError):
            raise UsageError(f"unknown device {name!r}; available here: "
                             f"{', '.join(available_devices())}") from None
    if device.type == "cpu":
        return device
    backend = getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if not (callable(is_available) and is_available()):
        raise UsageError(f"device {name!r} is not available (no {device.type} in this PyTorch "
                         f"build or on this machine); available here: "
                         f"{', '.join(available_devices())}")
    count = backend.device_count() if hasattr(backend, "device_count") else 1
    if device.index is not None and device.index >= count:
        raise UsageError(f"device {name!r} asked for, but there are only {count} "
                         f"{device.type} device(s) (0..{count - 1})")
    return device


def available_devices() -> list[str]:
    """'auto', 'cpu' and each accelerator this build and machine have."""
    found = ["auto", "cpu"]
    for kind in ("cuda", "mps", "xpu"):
        backend = getattr(torch, kind, None)
        if backend is not None and backend.is_available():
            found.append(kind)
    return found


@contextlib.contextmanager
def setup(device_name: str = "auto") -> Iterator[Dist]:
    """Yield this process's place in the job, joining the process group under torchrun."""
    if "RANK" not in os.environ or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        yield Dist(device=pick_device(device_name))
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)  # one GPU per process on each node
        torch.cuda.set_device(device)
    if dist.is_initialized():  # the caller's group (several trainings in one job): keep it
        yield Dist(rank, local_rank, world, device)
        return
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        yield Dist(rank, local_rank, world, device)
    finally:
        # A DistributedDataParallel model left in a reference cycle would otherwise be freed
        # by a later garbage collection, after the group is gone: its reducer then destroys
        # the gloo group while holding the GIL, and the group's worker thread, which needs
        # the GIL to free a finished allreduce, never joins (a hang at exit, seen under load).
        gc.collect()
        dist.destroy_process_group()


def sum_across(ctx: Dist, value: torch.Tensor) -> torch.Tensor:
    """The sum of `value` over all processes (itself when there is one)."""
    if ctx.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def min_across(ctx: Dist, value: torch.Tensor) -> torch.Tensor:
    """The smallest `value` over all processes, element by element (itself when there is
    one)."""
    if ctx.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return value
