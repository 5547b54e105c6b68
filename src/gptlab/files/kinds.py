"""What a folder holds, and the one rule for writing one. Torch-free and told from the files
alone (nothing is imported or loaded), so the CLI checks its folders before any work.

Every command that writes a folder writes one kind of folder:

  run         gptlab train, gptlab demo, the lab's live training (gptlab.training.rundir)
  data        gptlab prepare, demo, the lab (gptlab.data.prepared)
  model       gptlab convert --from-hf (gptlab.files.model_dir)
  export      gptlab convert --to-hf: a Hugging Face model directory (gptlab.convert.hf)
  experiment  gptlab experiment

and marks it: MARKER_FILE (`.gptlab.json`: {"kind": ..., "version": 1, "by": the command})
is written before the folder's other files, so a folder gptlab began is known as gptlab's
whatever happens next. Folders that earlier versions wrote carry no mark; they are known by
their files (a run by train.json beside its checkpoint or weights, data by gptlab's
meta.json, a model by gptlab's config.json beside its weights, an export by a Hugging Face
config.json).

The rule, `claim(path, kind, force)`, which every writer of a folder calls before it writes
or deletes anything:
- an absent or empty folder may become a folder of any kind;
- a folder of another kind is refused, with or without force: --force never turns one kind
  of folder into another (a run into an export, a data directory into a run);
- a non-empty folder gptlab did not make is refused: its files are the user's;
- a folder of the same kind that holds work (WORK: a run's checkpoint, weights or best/; a
  model's or an export's weights; anything in an experiment) is replaced only with force
  (`--force`; `overwrite=True` in the library). A run that stopped before it kept anything
  may be started again without, and a data directory may be prepared again (with the same
  tokenizer: gptlab.data.prepared checks that);
- a folder inside a run (its best/, its shards) is the run's, and refused.
Each refusal is one line naming what is there. Commands claim first and delete only after
every check has passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptlab.errors import UsageError
from gptlab.files.atomic import check_dir, ensure_dir, is_temp_name, write_json

CONFIG_FILE = "config.json"  # a gptlab model directory's and a Hugging Face export's
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"  # a data directory's (gptlab.data.prepared), written last
TRAIN_CONFIG_FILE = "train.json"  # a run directory's (gptlab.training.rundir)
STATE_FILE = "state.pt"  # a run's checkpoint commit point
EXPERIMENT_FILE = "experiment.json"  # an experiment's (gptlab.experiments.grid): which one
METRICS_FILE = "metrics.jsonl"  # a run's log, one JSON object per logged step
LOCK_FILE = ".lock"  # a run's: held (flock) by its one trainer, holding its PID
BEST_DIR = "best"  # a run's best weights, a model directory inside it
MARKER_FILE = ".gptlab.json"
MARKER_VERSION = 1

RUN, DATA, MODEL, EXPORT, EXPERIMENT = "run", "data", "model", "export", "experiment"
KINDS = (RUN, DATA, MODEL, EXPORT, EXPERIMENT)
DESCRIPTION = {RUN: "a training run", DATA: "a data directory", MODEL: "a model directory",
               EXPORT: "a Hugging Face model directory", EXPERIMENT: "an experiment"}
# What a folder of each kind holds that writing it again would lose: replaced only with
# force. None: anything in it.
WORK: dict[str, tuple[str, ...] | None] = {
    RUN: (STATE_FILE, WEIGHTS_FILE, BEST_DIR),
    DATA: (),
    MODEL: (CONFIG_FILE, WEIGHTS_FILE),
    EXPORT: (CONFIG_FILE, WEIGHTS_FILE),
    EXPERIMENT: None,
}
# Entries that do not make a folder non-empty: a desktop's clutter, and a trainer's lock
# (gptlab.training.rundir), which a failed start may leave in a folder it never wrote.
IGNORED = frozenset({".DS_Store", ".lock"})


@dataclass(frozen=True)
class Found:
    """What a folder holds: its kind (None: absent, empty, or not gptlab's) and its entries
    (directories with a trailing /; the marker and IGNORED left out)."""

    path: Path
    kind: str | None
    entries: tuple[str, ...]
    marker: dict[str, Any] | None  # its MARKER_FILE, if it has a valid one

    @property
    def empty(self) -> bool:
        return not self.entries

    @property
    def by(self) -> str | None:
        """The command that marked it."""
        return self.marker.get("by") if self.marker else None

    def work(self) -> list[str]:
        """The entries writing it again would lose (WORK)."""
        if self.kind is None:
            return []
        keep = WORK[self.kind]
        return [e for e in self.entries if keep is None or e.rstrip("/") in keep]

    def listing(self, names: list[str] | tuple[str, ...] | None = None, limit: int = 4) -> str:
        names = list(self.entries if names is None else names)
        shown = ", ".join(names[:limit])
        return shown + (f", ... ({len(names)} entries)" if len(names) > limit else "")


def recognise(path: str | Path) -> Found:
    """What `path` holds (a UsageError if it exists and is not a directory)."""
    path = Path(path)
    if not path.exists():
        return Found(path, None, (), None)
    if not path.is_dir():
        raise UsageError(f"{path} exists and is not a directory")
    try:
        entries = tuple(sorted(e.name + ("/" if e.is_dir() else "") for e in path.iterdir()
                               if e.name not in IGNORED and e.name != MARKER_FILE
                               and not is_temp_name(e.name)))  # a killed write's litter
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    marker = read_marker(path)
    kind = marker["kind"] if marker is not None else _unmarked_kind(path)
    return Found(path, kind, entries, marker)


def kind_of(path: str | Path) -> str | None:
    """The kind of folder at `path` (None: absent, empty, not a directory or not gptlab's)."""
    try:
        return recognise(path).kind
    except UsageError:
        return None


def claim(path: str | Path, kind: str, *, force: bool = False, hint: str = "--force replaces it"
          ) -> Found:
    """Check that `path` may be written as a folder of `kind` (the module's rule), before
    any work: a one-line UsageError naming what is there if not. Creates and deletes
    nothing; returns what is there. `hint` ends the refusal of a folder of the same kind
    holding work (what the caller offers instead)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of folder {kind!r}")
    path = Path(path)
    check_dir(path)
    if path.exists() and _is_part_of_a_run(path):
        raise UsageError(f"{path} is part of the training run in {path.parent}: give "
                         f"the {kind} a folder of its own")
    found = recognise(path)
    if found.empty:
        return found
    if found.kind is None:
        raise UsageError(f"{path} holds files gptlab did not write ({found.listing()}): "
                         f"give the {kind} a new or empty folder")
    if found.kind != kind:
        also = " (--force replaces only a folder of the same kind)" if force else ""
        raise UsageError(f"{path} is {DESCRIPTION[found.kind]} ({found.listing()}): give the "
                         f"{kind} a folder of its own{also}")
    work = found.work()
    if work and not force:
        raise UsageError(f"{path} already holds {DESCRIPTION[kind]} ({found.listing(work)}): "
                         f"{hint}")
    return found


def check_loose(path: str | Path) -> Path:
    """A folder that receives loose files beside whatever it holds (figures, scores): it
    must be creatable and writable, and not one of the kinds above, whose files it would
    mix with. A folder inside a run (`gptlab heads` writes RUN/heads/) is fine."""
    path = Path(path)
    check_dir(path)
    found = recognise(path)
    if found.kind is not None:
        raise UsageError(f"{path} is {DESCRIPTION[found.kind]}: give these files a folder of "
                         f"their own")
    return path


# --- the mark -------------------------------------------------------------------------------


def read_marker(path: str | Path) -> dict[str, Any] | None:
    """A folder's marker, if it has a valid one."""
    try:
        raw = json.loads((Path(path) / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(raw, dict) and raw.get("kind") in KINDS:
        return raw
    return None


def mark(path: str | Path, kind: str, by: str) -> None:
    """Mark `path` (created if need be) as a folder of `kind` written by command `by`;
    written atomically, before the folder's other files, and only when it says otherwise."""
    path = ensure_dir(path)
    marker = {"kind": kind, "version": MARKER_VERSION, "by": by}
    if read_marker(path) != marker:
        write_json(path / MARKER_FILE, marker)


def unmark(path: str | Path) -> None:
    """Remove the marker (a folder emptied of what gptlab wrote in it)."""
    (Path(path) / MARKER_FILE).unlink(missing_ok=True)


# --- folders from before the mark -----------------------------------------------------------


def _unmarked_kind(path: Path) -> str | None:
    """The kind of a folder an earlier gptlab wrote, by its files, or None."""
    def has(name: str) -> bool:
        return (path / name).exists()

    if is_hf_dir(path):
        return EXPORT
    if has(EXPERIMENT_FILE):
        return EXPERIMENT
    if has(META_FILE) and _json_keys(path / META_FILE) >= {"vocab_size", "train_tokens"}:
        return DATA
    if has(TRAIN_CONFIG_FILE) and has(CONFIG_FILE) and (has(STATE_FILE) or has(WEIGHTS_FILE)):
        return RUN
    if has(WEIGHTS_FILE) and _json_keys(path / CONFIG_FILE) >= {"vocab_size", "n_layer",
                                                               "n_embd"}:
        return MODEL
    return None


def _is_part_of_a_run(path: Path) -> bool:
    parent = path.resolve().parent
    if parent == path.resolve():
        return False
    marker = read_marker(parent)
    if marker is not None:
        return marker["kind"] == RUN
    return _unmarked_kind(parent) == RUN


def _json_keys(path: Path) -> set[str]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set(raw) if isinstance(raw, dict) else set()


def is_hf_dir(path: str | Path) -> bool:
    """Whether path holds a Hugging Face config.json (one with a model_type, and none of
    gptlab's own config fields)."""
    keys = _json_keys(Path(path) / CONFIG_FILE)
    return "model_type" in keys and "pos_encoding" not in keys
