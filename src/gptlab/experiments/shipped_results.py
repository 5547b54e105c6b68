"""The experiments' results as gptlab ships them: each experiment run once at its default
size, its results.json kept as shipped/NAME.json and its figures as shipped/NAME.png or
shipped/NAME-*.png, package data, so that a fresh install shows real numbers (the lab's
"Longer than trained" and "Experiments" views) before its user has run anything.

This folder is the one copy: tools/experiment_docs.py generates docs/experiments.md's
claims tables from it (`--add NAME FOLDER` puts a new run's results here), and the docs
site serves the files at experiments/results/NAME.json and experiments/FIGURE.png
(tools/docs_hooks.py).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from gptlab.files.atomic import read_json_object

FOLDER = Path(__file__).resolve().parent / "shipped"


def results_path(name: str, folder: Path = FOLDER) -> Path:
    return folder / f"{name}.json"


def load(name: str, folder: Path = FOLDER) -> dict[str, Any] | None:
    """Experiment `name`'s shipped results, or None where none are shipped."""
    path = results_path(name, folder)
    if not path.is_file():
        return None
    return read_json_object(path, f"the shipped results of experiment {name}")


def figures(name: str, folder: Path = FOLDER) -> list[Path]:
    """The shipped figures of experiment `name` (NAME.png, then NAME-*.png, sorted)."""
    return sorted(folder.glob(f"{name}.png")) + sorted(folder.glob(f"{name}-*.png"))


def machine_words(machine: dict[str, Any]) -> str:
    """Where the numbers were measured, in words: '2 CPU cores (1 torch thread, load
    1.0), torch 2.13.0+cpu'."""
    threads = machine.get("torch_threads")
    parts = [f"{threads} torch thread{'s' if threads != 1 else ''}"] if threads else []
    load = machine.get("load_average")
    if load:
        parts.append(f"load {load[0]:.1f}")
    inner = f" ({', '.join(parts)})" if parts else ""
    torch = f", torch {machine['torch']}" if machine.get("torch") else ""
    return f"{machine.get('cpus', '?')} CPU cores{inner}{torch}"


def label(results: dict[str, Any]) -> str:
    """What the lab writes above shipped numbers: 'shipped results, measured on <machine>
    at <date>'."""
    machine = results.get("machine") or {}
    date = machine.get("date") or "an unrecorded date"
    return (f"shipped results ({results.get('size', '?')} size), measured on "
            f"{machine_words(machine)} at {date}")


def today() -> str:
    """The date a result is stamped with (UTC, ISO)."""
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()
