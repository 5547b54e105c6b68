"""What every benchmark shares: thread setup, interleaved timing, medians, tables, JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.files.atomic import atomic_write_text

THREADS = 2  # the machine class this project is measured on; set explicitly, never inherited


@dataclass(frozen=True)
class Size:
    """How hard a benchmark works. 'smoke' only proves the plumbing (tests); 'quick' gives
    rough ratios in about two minutes for everything; 'full' is what BENCHMARKS.md reports."""

    name: str
    reps: int  # timed repetitions of each contender, interleaved
    warmup: int  # untimed calls of each contender first

    @property
    def smoke(self) -> bool:
        return self.name == "smoke"


SIZES = {
    "smoke": Size("smoke", reps=2, warmup=1),
    "quick": Size("quick", reps=5, warmup=2),
    "full": Size("full", reps=15, warmup=3),
}


def setup_threads(threads: int = THREADS) -> None:
    torch.set_num_threads(threads)


def interleaved(
    contenders: dict[str, Callable[[], Any]], reps: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each contender, timed in turns A B C A B C ... so that a noisy
    neighbour or thermal drift hits every contender alike. Warm-up calls are not timed."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for rep in range(reps):
        # Alternate the order each round (ABC, CBA, ...) so no one always runs first.
        order = list(contenders) if rep % 2 == 0 else list(reversed(contenders))
        for name in order:
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def machine() -> dict[str, Any]:
    """Enough to tell two result files' machines apart."""
    from gptlab.probe import cpu_name

    info: dict[str, Any] = {
        "cpu": cpu_name(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = None
    return info


def write_result(out_dir: Path, name: str, data: dict[str, Any]) -> Path:
    path = Path(out_dir) / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(),
               "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **data}
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def standalone_main(name: str, doc: str, measure: Callable[[Path, int], dict[str, Any]],
                    reps: int, default_text: Path, argv: list[str] | None = None) -> None:
    """main() of a benchmark run on its own, `python -m bench.NAME [--text PATH] [--reps N]
    [--out DIR]`: measure(text, reps) at THREADS threads, written to DIR/NAME.json."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--text", type=Path, default=default_text)
    p.add_argument("--reps", type=int, default=reps)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    setup_threads()
    t = time.perf_counter()
    data = measure(args.text, args.reps)
    print(f"{name}: {time.perf_counter() - t:.0f} s")
    write_result(args.out, name, data)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table, numbers right-aligned."""

    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"
        return str(x)

    cells = [[cell(x) for x in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row, raw in zip(cells, rows, strict=True):
        lines.append("  ".join(
            c.rjust(w) if isinstance(x, (int, float)) else c.ljust(w)
            for c, w, x in zip(row, widths, raw, strict=True)))
    return "\n".join(lines)


def new_figure(figsize: tuple[float, float]) -> tuple[Any, Any]:
    """A matplotlib Figure and its one Axes, without pyplot's global state or backend."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.add_subplot()


def rss_mib(pid: int) -> float | None:
    """Resident memory of process pid in MiB (Linux's /proc; None elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


@contextlib.contextmanager
def server_process(name: str, command: list[str], ready_url: str, timeout_s: float,
                   env: dict[str, str] | None = None) -> Iterator[int]:
    """The server `command` starts (PYTHONUNBUFFERED, and env, over this environment), once
    GET ready_url answers; yields its pid and terminates it on leaving. A server that ends
    or stays silent for timeout_s raises, naming it and quoting the last it printed."""
    import httpx

    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                httpx.get(ready_url, timeout=5).raise_for_status()
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"{name} did not start: "
                                       f"{log.read()[-800:]}") from None
                time.sleep(0.1)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
