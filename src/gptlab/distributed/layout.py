"""How a run's ranks are arranged for gptlab.distributed.parallelize's modes, apart from the
sharding itself: every run's plan needs the layout, only a sharded run needs
torch.distributed.tensor (and with it sympy and torch.fx: 0.4 s of a 2-core VM's
start-up, where a speedrun takes 6-15 s)."""

from __future__ import annotations

from dataclasses import dataclass

from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.params import check_tp_divides


@dataclass(frozen=True)
class Layout:
    """How the ranks are arranged: dp rows (data parallel, FSDP) x tp columns."""

    mode: str
    dp: int
    tp: int

    @property
    def uses_tp(self) -> bool:
        return self.mode in ("tp", "fsdp+tp")

    @property
    def uses_fsdp(self) -> bool:
        return self.mode in ("fsdp", "fsdp+tp")


def plan_layout(mode: str, tp: int | None, world_size: int, config: GPTConfig) -> Layout:
    """The layout of `world_size` ranks for a mode, or a one-line UsageError naming what
    does not fit."""
    if mode in ("ddp", "fsdp"):
        if tp not in (None, 1):
            raise UsageError(f"--tp {tp} needs --parallel tp or fsdp+tp, not {mode}")
        return Layout(mode, world_size, 1)
    if mode == "tp":
        tp = world_size if tp is None else tp
        if tp != world_size:
            raise UsageError(f"--parallel tp uses every rank for tensor parallel: --tp {tp} "
                             f"with {world_size} ranks; use --parallel fsdp+tp to add data "
                             f"parallel rows")
    else:
        tp = tp or 1
        if tp < 1 or world_size % tp:
            raise UsageError(f"--tp {tp} does not divide the {world_size} ranks into "
                             f"fsdp+tp rows")
    check_tp_divides(config, tp)
    return Layout(mode, world_size // tp, tp)
