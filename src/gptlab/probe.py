"""Short timing probes that decide a speed choice for the machine at hand, once.

CPUs disagree about what is fast: bf16 matmuls have run at 4x, 0.5x and 0.01x fp32 on three
2-core VMs, and the faster layout of a decoding matmul flips from one to the next. So a
choice such as `--dtype auto` or `--weights auto` is made by timing the contenders on this
machine, and the answer is kept in `$GPTLAB_CACHE/probes.json` (default ~/.cache/gptlab),
under a key naming the machine (CPU model, logical CPUs, torch version, threads) and the
shape being probed, so the next run decides at once and the same way.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gptlab.data.download import default_cache_dir
from gptlab.errors import GptlabError
from gptlab.files.atomic import read_json_object, write_json

PROBES_FILE = "probes.json"


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_key(device: torch.device) -> str:
    """What makes a timing hold: the device, and for a CPU its model, count and threads."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{cpu_name()} x{os.cpu_count()}, {torch.get_num_threads()} threads"
    return f"{device.type}: {name}; torch {torch.__version__}"


def median_seconds(fn: Callable[[], Any], reps: int, warmup: int = 1) -> float:
    """Median wall seconds of fn() over reps calls, after warmup calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def budgeted_ms(fn: Callable[[], Any], budget_s: float, max_reps: int) -> float:
    """Median ms of fn() over as many calls as fit in about budget_s (3 to max_reps), the
    first call, timed to size the rest, not among them."""
    first = median_seconds(fn, reps=1)
    reps = max(3, min(max_reps, math.ceil(budget_s / max(first, 1e-6))))
    return median_seconds(fn, reps=reps, warmup=0) * 1e3


def config_key(c: Any) -> str:
    """What of a GPTConfig decides a timing: its shapes and the kinds of its parts."""
    return (f"{c.n_layer}x{c.n_embd}, {c.n_head}/{c.n_kv_head} heads, ffn {c.ffn_hidden} "
            f"{c.mlp}, vocab {c.vocab_size}, {c.pos_encoding}, {c.norm}, bias {c.bias}")


def probes_path() -> Path:
    return default_cache_dir() / PROBES_FILE


def cached(kind: str, key: str, measure: Callable[[], dict[str, Any]]) -> tuple[dict, bool]:
    """(the probe's result, whether it came from the cache). measure() runs only when
    probes.json has no result for (kind, key); a cache that cannot be read or written is
    not an error (the probe then runs each time)."""
    path = probes_path()
    try:
        store = read_json_object(path, "probe cache") if path.is_file() else {}
    except GptlabError:
        store = {}  # a torn or foreign file: probe again and replace it
    hit = store.get(kind, {}).get(key) if isinstance(store.get(kind), dict) else None
    if isinstance(hit, dict):
        return hit, True
    result = measure()
    section = store.get(kind) if isinstance(store.get(kind), dict) else {}
    store[kind] = {**section, key: result}
    try:
        write_json(path, store)
    except (GptlabError, OSError):
        pass
    return result, False
