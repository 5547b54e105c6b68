"""What every experiment writes and prints: results.json, a Markdown report, plain-text
tables, and the timing with the machine it was measured on.

An experiment builds its sections as Markdown text; this module only lays them out, so the
same table reads in the terminal, in report.md and in the README.
"""

from __future__ import annotations

import math
import os
import platform
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptlab.experiments import claims as claims_module
from gptlab.experiments import shipped_results
from gptlab.files.atomic import atomic_write_text, write_json
from gptlab.version import __version__

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
    """Where and when the numbers were measured: CPUs, torch's threads, the load at the time
    (a shared machine's timings are only indicative), the date (UTC)."""
    # start-up time: torch is already loaded by every experiment that calls this
    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in load] if load else None,
            "python": platform.python_version(), "torch": torch.__version__,
            "gptlab": __version__, "date": shipped_results.today()}


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


def finish(folder: Path, results: dict[str, Any], records: dict[str, Any], timer: Timer,
           title: str, sections: Callable[[dict[str, Any]], Sequence[tuple[str, str]]],
           claims: Sequence[claims_module.Claim] = (),
           training_s: float | None = None) -> dict[str, Any]:
    """What every experiment does last, its figures drawn: the grid's training time (when
    it was trained; training_s where what trained is not a grid's runs), the timing, the
    machine and the torch threads its models trained at added to `results`, its claims
    judged on them (results["claims"], gptlab.experiments.claims) with the one line a run
    that decides none of them prints (results["undecided_line"], else None), then
    results.json and report.md (title, the claims table after the first of
    sections(results)) written. Returns results."""
    # start-up time: torch is already loaded by every experiment that calls this
    import torch

    if training_s is None:
        training_s = sum(r.train_s for r in records.values())
    results["training_time_s"] = round(training_s, 1)
    results["timing"] = timer.to_dict()
    results["machine"] = machine()
    # every run the grid reuses was trained at this count too (gptlab.experiments.grid)
    results["threads"] = torch.get_num_threads()
    judge(results, claims)
    write_results(folder, results)
    parts = list(sections(results))
    if results["claims"]:
        parts.insert(1, claims_section(results))
    write_report(folder, title, parts)
    return results


def judge(results: dict[str, Any], claims: Sequence[claims_module.Claim]) -> dict[str, Any]:
    """results["claims"] and results["undecided_line"] (gptlab.experiments.claims) judged
    afresh on results' numbers; returns results."""
    results["claims"] = claims_module.evaluate(claims, results)
    results["undecided_line"] = claims_module.undecided_line(results["claims"],
                                                             results.get("size") == "quick")
    return results


def claims_section(results: dict[str, Any]) -> tuple[str, str]:
    """report.md's claims table (the claim | the paper | this run | precondition, where a
    claim has one | verdict), the line of a run that decides none of them above it, and
    the rule."""
    line = results.get("undecided_line")
    above = f"**{line[:1].upper()}{line[1:]}.**\n\n" if line else ""
    header, rows = claims_module.table(results["claims"])
    return ("The claims, judged",
            above + markdown_table(header, rows, "l" * len(header)) + "\n\n" + RULE_NOTE)


RULE_NOTE = ("Verdicts are computed (gptlab.experiments.claims): the effect is measured per "
             "unit (a seed; for some claims a slice of text, a length or a timing repeat, "
             "as this run's column says); held = in the claimed direction and beyond twice "
             "the spread over the units, held weakly = in the direction within it, not "
             "seen = no effect (below the claim's smallest) or the opposite within it, "
             "contradicted = the opposite beyond it, undecided = a unit without a number, or "
             "a claim that reads a trained model's mechanism whose precondition (the model "
             "learned its task) is not met. One unit has no spread: at most held weakly.")


def claims_text(results: dict[str, Any], width: int = 100) -> str:
    """The claims as a command prints them first, within `width` columns: the one line of
    a run that decides none of them, or each claim's lines (claims.text); nothing for
    results written before claims were judged."""
    line = results.get("undecided_line")
    if line:
        return "\n" + "\n".join(textwrap.wrap(line, width))
    judged = results.get("claims") or []
    return f"\nthe claims, judged:\n{claims_module.text(judged, width)}" if judged else ""


def table_sections(tables: Sequence[tuple[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]]
                   ) -> list[tuple[str, str]]:
    """An experiment's tables as report sections: each title (its colon dropped, its first
    letter capitalised) over its markdown table."""
    sections = []
    for title, (header, rows) in tables:
        title = title.rstrip(":")
        sections.append((title[:1].upper() + title[1:], markdown_table(header, rows)))
    return sections


def closing(results: dict[str, Any], figure: str) -> list[tuple[str, str]]:
    """A probed experiment's last sections: its figure, then the time."""
    return [("Figure", f"![{Path(figure).stem}]({figure})"), time_section(results)]


def time_section(results: dict[str, Any]) -> tuple[str, str]:
    """The report's last section: the timing line, and what training the grid took."""
    return ("Time", timing_line(results["timing"], results["machine"])
            + f". Training the grid took {results['training_time_s']:.0f} s when it was "
              f"trained.")


def print_tables(results: dict[str, Any], out: str,
                 tables: Sequence[tuple[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]],
                 files: Sequence[str], notes: Sequence[str] = ()) -> None:
    """What an experiment prints: its claims (claims_text), each (title, (header, rows)) as
    a text table, the notes, then the footer (print_footer)."""
    claims = claims_text(results)
    if claims:
        print(claims)
    for title, (header, rows) in tables:
        print(f"\n{title}")
        print(text_table(header, rows))
    if notes:
        print("\n" + "\n".join(notes))
    print_footer(results, out, files)


def print_footer(results: dict[str, Any], out: str, files: Sequence[str]) -> None:
    """The last lines an experiment prints: its timing (and the torch threads its models
    trained at), and the files it wrote in out."""
    threads = results.get("threads")
    trained = (f" Its models trained at {threads} torch thread{'s' if threads != 1 else ''}."
               if threads else "")
    print(f"\n{timing_line(results['timing'], results['machine'])}.{trained}")
    print("wrote " + ", ".join(f"{out}/{name}" for name in (RESULTS_FILE, REPORT_FILE, *files)))


def find(cells: Sequence[dict[str, Any]], **where: Any) -> dict[str, Any]:
    """The cell of a grid whose keys have the values given."""
    return next(c for c in cells if all(c[k] == v for k, v in where.items()))


def loss_cell(loss: dict[str, Any], diverged: Sequence[str | None]) -> str:
    """A cell's loss (spread's) for a table: the mean ± half the seeds' range, with how
    many of its runs diverged; NaN where one became NaN."""
    flags = sum(d is not None for d in diverged)
    note = f" ({flags}/{len(diverged)} diverged)" if flags else ""
    if loss["mean"] is None:
        return "NaN" + note
    text = f"{loss['mean']:.3f}"
    if len(loss["values"]) > 1:
        text += f" ± {loss['spread'] / 2:.3f}"
    return text + note


def difference_cell(a: dict[str, Any], b: dict[str, Any]) -> str:
    """b's mean minus a's, signed, or a dash where either has none."""
    if a["mean"] is None or b["mean"] is None:
        return "—"
    return f"{b['mean'] - a['mean']:+.3f}"


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


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """One cell over its seeds: the mean, the seed-to-seed spread (max - min; 0 for one
    seed) and the values. A missing value (None: a diverged run) makes mean and spread None
    (results.json stays strict JSON: no NaN)."""
    finite = all(v is not None and math.isfinite(v) for v in values)
    return {"mean": sum(values) / len(values) if finite else None,
            "spread": (max(values) - min(values)) if finite else None,
            "values": list(values)}


def beyond_spread(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    """Whether two cells (spread's) differ by more than the larger of their seed spreads;
    None where that cannot be said (one seed, or a cell without a mean)."""
    if len(a["values"]) < 2 or len(b["values"]) < 2 or a["mean"] is None or b["mean"] is None:
        return None
    return abs(a["mean"] - b["mean"]) > max(a["spread"], b["spread"])


def verdict_cell(flag: bool | None) -> str:
    """beyond_spread as a table cell."""
    return {True: "yes", False: "no", None: "—"}[flag]
