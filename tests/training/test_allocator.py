"""--allocator retain (gptlab.training.allocator): freed memory stays in the process, so the
next allocation of the same size faults no fresh pages in; and where the setting applies."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from gptlab.errors import UsageError
from gptlab.training import allocator
from gptlab.training.config import SpeedLevers, TrainConfig, recipe

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# A child process that takes 3 forward + backward passes of a small GPT under bf16 autocast
# (a training step's mix of tensor sizes), then 20 more, and prints its page faults
# during those 20.
FAULTS = """
import resource, sys, torch
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.allocator import retain_freed_memory
took = retain_freed_memory() if sys.argv[1] == "retain" else None
torch.set_num_threads(1)
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128))
x = torch.randint(0, 65, (24, 64))
def step():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, loss = model(x, x)
    loss.backward()
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not GLIBC, reason="mallopt(3) is glibc's")
def test_retained_memory_is_not_faulted_in_again():
    took, retained = _faults("retain")
    _, system = _faults("system")
    assert took == "True"
    # glibc's defaults fault thousands of pages in over the 20 steps (45-56k on an Intel VM,
    # 4k-13k on an AMD one under load: its adaptive thresholds move with what the steps
    # freed first); retained, the first steps' pages serve them (200-900 on both)
    assert retained < 2_000
    assert retained < system / 4


def test_the_setting_is_checked_and_nanogpts_recipe_keeps_the_systems():
    assert TrainConfig().speed.allocator == "retain"
    with pytest.raises(UsageError, match="allocator"):
        SpeedLevers(allocator="jemalloc")
    assert recipe("shakespeare-char-cpu").speed.allocator == "system"  # the speedrun's peer
    assert recipe("shakespeare-char-cpu-speedrun-2").speed.allocator == "retain"


def test_nothing_changes_off_glibc(monkeypatch):
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    assert allocator.retain_freed_memory() is False
