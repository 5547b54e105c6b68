"""Runs the benchmarks in turn; `gptlab bench` is a thin call into `run_all`."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import SIZES, setup_threads
from gptlab.cli.bench import NAMES as BENCHMARKS  # the one list, in run order

# Left out of --quick unless asked for by name: they train models to a target loss.
SLOW = ("time_to_quality", "speedrun")


def selected(only: list[str] | None, size: str) -> list[str]:
    if only:
        return [name for name in BENCHMARKS if name in only]
    return [name for name in BENCHMARKS if not (size == "quick" and name in SLOW)]


def run_all(
    names: list[str], size: str, out_dir: Path, threads: int, text_path: str | None = None,
    log: Callable[[str], None] = print, seeds: int | None = None,
) -> dict[str, Any]:
    """Run each named benchmark at `size` ('smoke', 'quick' or 'full'), writing
    out_dir/<name>.json (and PNGs); returns {name: its result dict}."""
    setup_threads(threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        t0 = time.perf_counter()
        extra = {"text_path": text_path} if name in SLOW else {}
        if name == "speedrun":
            extra["seeds"] = seeds
        results[name] = module.run(SIZES[size], out_dir, log=log, **extra)
        log(f"[{name}: {time.perf_counter() - t0:.0f} s, wrote {out_dir / (name + '.json')}]")
    return results
