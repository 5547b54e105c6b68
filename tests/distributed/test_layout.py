"""Layouts of ranks (gptlab.distributed.layout): what fits, what is refused by name, and
that planning one costs none of torch.distributed.tensor's imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gptlab.distributed.layout import Layout, plan_layout
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig

# One layer, 4 heads sharing 2 key/value heads: what the refusals are about.
SMALL = GPTConfig(vocab_size=30, block_size=16, n_layer=1, n_head=4, n_kv_head=2, n_embd=32,
                  bias=False)


@pytest.mark.parametrize("mode, tp, world, expected", [
    ("ddp", None, 4, Layout("ddp", 4, 1)),
    ("fsdp", 1, 2, Layout("fsdp", 2, 1)),
    ("tp", None, 2, Layout("tp", 1, 2)),
    ("fsdp+tp", 2, 4, Layout("fsdp+tp", 2, 2)),
    ("fsdp+tp", None, 2, Layout("fsdp+tp", 2, 1)),
])
def test_layouts_arrange_the_ranks_in_rows_and_columns(mode, tp, world, expected):
    layout = plan_layout(mode, tp, world, SMALL)
    assert layout == expected and layout.dp * layout.tp == world
    assert layout.uses_tp == (mode in ("tp", "fsdp+tp"))
    assert layout.uses_fsdp == (mode in ("fsdp", "fsdp+tp"))


@pytest.mark.parametrize("mode, tp, world, config, message", [
    ("tp", 3, 3, SMALL, "--tp 3 does not divide n_head 4"),
    ("tp", 4, 4, SMALL, "--tp 4 does not divide n_kv_head 2"),
    ("fsdp+tp", 3, 4, SMALL, "--tp 3 does not divide the 4 ranks"),
    ("tp", 2, 4, SMALL, "--parallel tp uses every rank"),
    ("fsdp", 2, 2, SMALL, "--tp 2 needs --parallel tp or fsdp+tp, not fsdp"),
])
def test_layouts_that_do_not_fit_are_refused_by_name(mode, tp, world, config, message):
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        plan_layout(mode, tp, world, config)


def test_planning_a_run_imports_no_sharding():
    """The plan (gptlab.training.plan) needs the layout; only a sharded run needs DTensor."""
    code = ("import sys, gptlab.training.plan, gptlab.training.run; "
            "print('torch.distributed.tensor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
