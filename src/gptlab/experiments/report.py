"""What every experiment writes and prints: results.json, a Markdown report, plain-text
tables, and the timing with the machine it was measured on.

An experiment builds its sections as Markdown text; this module only lays them out, so the
same table reads in the terminal, in report.md and in the README.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptlab import __version__
from gptlab.files.atomic import atomic_write_text, write_json

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
                   align: str | None = None) -> str:
    """A Markdown table; align is one letter per column ('l' or 'r', default: the first
    column left, the rest right). Cells are printed as given (str())."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(str(c) for c in line) + " |" for line in lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The same table for a terminal: columns padded, the first left, the rest right."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    """Where the numbers were measured: CPUs, torch's threads, the load at the time (a
    shared machine's timings are only indicative)."""
    # start-up time: torch is already loaded by every experiment that calls this
    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in load] if load else None,
            "python": platform.python_version(), "torch": torch.__version__,
            "gptlab": __version__}


@dataclass
class Timer:
    """Seconds spent per phase (training, evaluation, ...) and in all."""

    t0: float = field(default_factory=time.perf_counter)
    phases: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def to_dict(self) -> dict[str, float]:
        return {**{k: round(v, 1) for k, v in self.phases.items()},
                "total_s": round(time.perf_counter() - self.t0, 1)}


def write_results(folder: Path, results: dict[str, Any]) -> Path:
    path = Path(folder) / RESULTS_FILE
    write_json(path, results)
    return path


def write_report(folder: Path, title: str, sections: Sequence[tuple[str, str]]) -> Path:
    """report.md: a title, then each (heading, Markdown body) in order."""
    parts = [f"# {title}\n"]
    for heading, body in sections:
        parts.append(f"## {heading}\n\n{body.strip()}\n")
    path = Path(folder) / REPORT_FILE
    atomic_write_text(path, "\n".join(parts))
    return path


def finish(folder: Path, results: dict[str, Any], timer: Timer, title: str,
           sections: Callable[[dict[str, Any]], Sequence[tuple[str, str]]]) -> dict[str, Any]:
    """The last step of every experiment: the timing and the machine added to results, then
    results.json and report.md (its sections built from the finished results) written."""
    results["timing"] = timer.to_dict()
    results["machine"] = machine()
    write_results(folder, results)
    write_report(folder, title, sections(results))
    return results


def seeds_line(records: dict[str, Any]) -> str:
    """'seed 1337 for every run', or each run's seed where they differ."""
    seeds = {name: r.seed for name, r in records.items()}
    if len(set(seeds.values())) == 1:
        return f"seed {next(iter(seeds.values()))} for every run"
    return "seeds: " + ", ".join(f"{name} {seed}" for name, seed in seeds.items())


def timing_line(timing: dict[str, float], machine_info: dict[str, Any]) -> str:
    """One sentence: the phases' seconds, the total, and the machine with its caveat."""
    phases = ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in timing.items()
                       if k != "total_s")
    load = machine_info.get("load_average")
    busy = f", load average {load[0]:.1f} at the end" if load else ""
    return (f"{timing['total_s']:.0f} s in all ({phases}) on {machine_info['cpus']} CPU "
            f"cores, {machine_info['torch_threads']} torch thread(s){busy}; a shared "
            f"machine's times are indicative only")
