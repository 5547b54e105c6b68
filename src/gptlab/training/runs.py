"""The runs under a folder, as a table: what each is, how far it got, how it stands and how
good it is, read from its files alone (no torch: `gptlab runs` answers at once, even beside
a training). `gptlab runs`, the lab's run pickers and the notebooks all list through here.

A run directory tells its own story, read through gptlab.training.rundir (the one owner of
its format, torch-free to import):
  config.json, train.json      the model's shape and the steps planned (max_iters)
  model.safetensors            the step of the last checkpoint (rundir.checkpoint_step)
  metrics.jsonl                losses, tokens/s and the whole-val score (rundir.read_metrics)
  .lock                        held by the trainer writing it (rundir.lock_holder: its PID)
so its status is one of: running (the lock is held: by that PID), finished (its checkpoint
is at max_iters, or where its whole val loss met its stop_at_val), interrupted (stopped
before, with a checkpoint to --resume from).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError, Setting, SettingError
from gptlab.model.config import GPTConfig
from gptlab.model.params import count_parameters
from gptlab.training.rundir import (
    CONFIG_FILE,
    METRICS_FILE,
    STATE_FILE,
    TOKENIZER_FILE,
    TRAIN_CONFIG_FILE,
    WEIGHTS_FILE,
    checkpoint_step,
    lock_holder,
    read_metrics,  # also a name of this module's: the notebooks read a run's log from here
)

MAX_DEPTH = 3  # model directories nested up to root/<a>/<b>/<c>
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)  # gptlab.model_dir's
STATUSES = ("running", "interrupted", "finished")
# --sort keys: the RunInfo field each sorts by.
SORT_KEYS = {"name": "name", "params": "parameters", "steps": "step", "status": "status",
             "best-val": "best_val", "whole-val": "whole_val", "tokens-per-s": "tokens_per_s",
             "changed": "changed"}


def is_model_dir(path: Path) -> bool:
    return all((path / f).is_file() for f in MODEL_FILES)


def model_dirs(root: str | Path, max_depth: int = MAX_DEPTH) -> list[Path]:
    """The model directories under root (config, weights and tokenizer: runs, converted
    models), up to max_depth folders down, sorted by their path (see find_folders: a model
    directory is not searched further, its best/ being part of it)."""
    return find_folders(root, is_model_dir, max_depth)


def find_folders(root: str | Path, matches: Callable[[Path], bool],
                 max_depth: int = MAX_DEPTH) -> list[Path]:
    """The folders under root for which matches(folder) holds, up to max_depth folders
    down, sorted by their path. A match is not searched further; folders that resolve
    outside root (a symlink pointing out), symlink loops and unreadable folders are
    skipped."""
    root = Path(root)
    if not root.is_dir():
        return []
    resolved = root.resolve()
    found, frontier = [], [root]
    for _ in range(max_depth):
        next_frontier = []
        for folder in frontier:
            try:
                children = sorted(folder.iterdir())
            except OSError:
                continue
            for child in children:
                try:
                    real = child.resolve()
                    if not child.is_dir() or not (real == resolved or resolved in real.parents):
                        continue
                    (found if matches(child) else next_frontier).append(child)
                except (OSError, RuntimeError):  # a symlink loop, a name too long
                    continue
        frontier = next_frontier
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


@dataclass(frozen=True)
class RunInfo:
    """One run as the table shows it. Numbers a run has not logged yet are None."""

    name: str  # its path relative to the folder listed
    path: str
    n_layer: int | None
    n_head: int | None
    n_embd: int | None
    block_size: int | None
    parameters: int | None
    step: int | None  # steps done: the checkpoint's (the last logged one while running)
    max_iters: int | None  # steps planned
    status: str  # one of STATUSES
    pid: int | None  # the trainer's, while running
    best_val: float | None  # the lowest estimated val loss of its evaluations
    whole_val: float | None  # over the whole val split, at the end
    tokens_per_s: float | None  # the median of its logged steps
    changed: float  # the newest of its files' modification times (Unix seconds)

    @property
    def shape(self) -> str:
        if self.n_layer is None:
            return "?"
        return f"{self.n_layer}L {self.n_head}H d{self.n_embd} ctx{self.block_size}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed_iso": time.strftime(
            "%Y-%m-%dT%H:%M:%S%z", time.localtime(self.changed))}


def list_runs(root: str | Path, sort: str = "name", reverse: bool = False) -> list[RunInfo]:
    """The training runs (model directories with a train.json) under root, sorted by one of
    SORT_KEYS; runs missing the value sort last."""
    root = Path(root)
    runs = [read_run(p, p.relative_to(root).as_posix()) for p in model_dirs(root)
            if (p / TRAIN_CONFIG_FILE).is_file()]
    return sort_runs(runs, sort, reverse)


def sort_runs(runs: Iterable[RunInfo], key: str, reverse: bool = False) -> list[RunInfo]:
    if key not in SORT_KEYS:
        raise SettingError(Setting("sort"), f" must be one of {', '.join(SORT_KEYS)}, not {key!r}")
    field = SORT_KEYS[key]
    present = [r for r in runs if getattr(r, field) is not None]
    missing = [r for r in runs if getattr(r, field) is None]
    # by name first: sorted() is stable, so ties stay in name order either way round
    order = sorted(sorted(present, key=lambda r: r.name), key=lambda r: getattr(r, field),
                   reverse=reverse)
    return order + sorted(missing, key=lambda r: r.name)


def _met_its_target(records: list[dict], step: int) -> bool:
    """Whether the run stopped at `step` because its whole val loss met stop_at_val (its
    last look there met it: gptlab.training.val_target)."""
    looks = [r for r in records if r.get("kind") == "val_target"]
    return bool(looks) and looks[-1].get("met") is True and looks[-1].get("step") == step


def read_run(path: str | Path, name: str | None = None) -> RunInfo:
    """What path's files say of the run (a file missing or unreadable leaves its fields
    None)."""
    path = Path(path)
    config = _json_object(path / CONFIG_FILE)
    settings = _json_object(path / TRAIN_CONFIG_FILE)
    records = read_metrics(path)
    evals = [r["val_loss"] for r in records if r.get("kind") == "eval"
             and _is_number(r.get("val_loss"))]
    wholes = [r["loss"] for r in records if r.get("kind") == "whole_val"
              and _is_number(r.get("loss"))]
    speeds = [r["tokens_per_s"] for r in records if r.get("kind") == "train"
              and _is_number(r.get("tokens_per_s"))]
    logged = [r["step"] for r in records if isinstance(r.get("step"), int)]
    step = checkpoint_step(path)
    max_iters = settings.get("max_iters") if isinstance(settings.get("max_iters"), int) else None
    pid = lock_holder(path)
    if pid is not None:
        status, step = "running", max([s for s in [step, *logged] if s is not None], default=None)
    elif step is not None and ((max_iters is not None and step >= max_iters)
                               or _met_its_target(records, step)):
        status = "finished"
    else:
        status = "interrupted"
    return RunInfo(
        name=name if name is not None else path.name, path=str(path),
        n_layer=_int(config, "n_layer"), n_head=_int(config, "n_head"),
        n_embd=_int(config, "n_embd"), block_size=_int(config, "block_size"),
        parameters=_parameters(config), step=step, max_iters=max_iters, status=status,
        pid=pid, best_val=min(evals) if evals else None,
        whole_val=wholes[-1] if wholes else None,
        tokens_per_s=round(statistics.median(speeds), 1) if speeds else None,
        changed=max((p.stat().st_mtime for p in _files(path)), default=0.0))


def format_table(runs: list[RunInfo]) -> str:
    """One aligned row per run."""
    header = ("run", "model", "params", "steps", "status", "best val", "whole val",
              "tok/s", "changed")
    rows = [header]
    for r in runs:
        steps = f"{_or(r.step, '{:,}')}/{_or(r.max_iters, '{:,}')}"
        status = f"running (PID {r.pid})" if r.status == "running" else r.status
        rows.append((r.name, r.shape, _or(r.parameters, "{:,}"), steps, status,
                     _or(r.best_val, "{:.4f}"), _or(r.whole_val, "{:.4f}"),
                     _or(r.tokens_per_s, "{:,.0f}"),
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(r.changed))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {2, 3, 5, 6, 7}  # numbers
    return "\n".join("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                               ).rstrip() for row in rows)


def _or(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _files(path: Path) -> Iterator[Path]:
    for name in (METRICS_FILE, STATE_FILE, WEIGHTS_FILE, CONFIG_FILE, TRAIN_CONFIG_FILE):
        if (path / name).is_file():
            yield path / name


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _int(d: dict[str, Any], key: str) -> int | None:
    value = d.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _parameters(config: dict[str, Any]) -> int | None:
    if not config:  # missing or unreadable (from_dict would give GPT-2's defaults)
        return None
    try:
        return count_parameters(GPTConfig.from_dict(config))
    except GptlabError:  # a config gptlab cannot build: the table shows "-" for its count
        return None

