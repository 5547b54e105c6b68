"""What a folder holds, and the one rule for writing one. Torch-free and told from the files
alone (nothing is imported or loaded), so the CLI checks its folders before any work.

Every command that writes a folder writes one kind of folder:

  run         gptlab train, gptlab demo, the lab's live training (gptlab.training.rundir)
  data        gptlab prepare, demo, the lab (gptlab.data.prepared)
  model       gptlab convert --from-hf (gptlab.model_dir)
  export      gptlab convert --to-hf: a Hugging Face model directory (gptlab.convert.hf)
  experiment  gptlab experiment
  figures     gptlab heads, lens, patch, attribute --out: their figures and scores

and marks it: MARKER_FILE (`.gptlab.json`: {"kind": ..., "version": 1, "by": the command})
is written before the folder's other files, so a folder gptlab began is known as gptlab's
whatever happens next. Folders that earlier versions wrote carry no mark; they are known by
their files (a run by train.json beside its checkpoint or weights, data by gptlab's
meta.json, a model by gptlab's config.json beside its weights, an export by a Hugging Face
config.json, figures by names and figures gptlab writes, and nothing else).

The rule, `claim(path, kind, force)`, which every writer of a folder calls before it writes
or deletes anything:
- an absent or empty folder may become a folder of any kind;
- a folder of another kind is refused, with or without force: --force never turns one kind
  of folder into another (a run into an export, a data directory into a run);
- a non-empty folder gptlab did not make is refused: its files are the user's;
- a folder of the same kind that holds work (WORK: a run's checkpoint, weights or best/; a
  data directory's tokens; a model's or an export's weights; anything in an experiment) is
  replaced only with force (`--force`; `overwrite=True` in the library). A run that stopped
  before it kept anything may be started again without;
- a folder inside a run (its best/, its shards) is the run's, and refused; no new folder
  goes inside a folder of a kind either, but an experiment's runs and data, and figures
  right inside a run, a model or an export (`gptlab heads RUN` writes RUN/heads/). A
  folder of figures is written again by any of its commands, as long as it holds nothing
  but what they write (a symlink, or any other file, is the user's: refused).
Each refusal is one line naming what is there. Commands claim first and delete only after
every check has passed.

One file a command writes (a .gguf, a figure: `claim_file`) follows the same rule: never
inside a folder of a kind (a run's state.pt, a data directory's train.bin, an export's
config.json), never the source it is made from, never through a symlink, and an existing
file only with force and only when gptlab wrote it as the same kind of output (read from
the file's own metadata: gptlab.files.authorship).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptlab.errors import UsageError
from gptlab.files import authorship
from gptlab.files.atomic import check_dir, ensure_dir, is_temp_name, write_json

# The names each kind of folder is known by. A run's are declared here, where the rule that
# recognises a run needs them; gptlab.training.rundir owns the run's format and re-exports
# them (its other names are its own).
CONFIG_FILE = "config.json"  # a gptlab model directory's and a Hugging Face export's
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"  # a data directory's (gptlab.data.prepared), written last
TRAIN_CONFIG_FILE = "train.json"  # a run directory's (gptlab.training.rundir)
STATE_FILE = "state.pt"  # a run's checkpoint commit point
EXPERIMENT_FILE = "experiment.json"  # an experiment's (gptlab.experiments.grid): which one
LOCK_FILE = ".lock"  # a run's: its one trainer's (gptlab.training.rundir.locked)
BEST_DIR = "best"  # a run's best weights, a model directory inside it
TRAIN_BIN, VAL_BIN = "train.bin", "val.bin"  # a data directory's tokens
MARKER_FILE = ".gptlab.json"
MARKER_VERSION = 1

RUN, DATA, MODEL, EXPORT, EXPERIMENT = "run", "data", "model", "export", "experiment"
FIGURES = "figures"
KINDS = (RUN, DATA, MODEL, EXPORT, EXPERIMENT, FIGURES)
DESCRIPTION = {RUN: "a training run", DATA: "a data directory", MODEL: "a model directory",
               EXPORT: "a Hugging Face model directory", EXPERIMENT: "an experiment",
               FIGURES: "a folder of gptlab's figures"}
# What a folder of each kind holds that writing it again would lose: replaced only with
# force. None: anything in it.
WORK: dict[str, tuple[str, ...] | None] = {
    RUN: (STATE_FILE, WEIGHTS_FILE, BEST_DIR),
    DATA: (TRAIN_BIN, VAL_BIN),
    MODEL: (CONFIG_FILE, WEIGHTS_FILE),
    EXPORT: (CONFIG_FILE, WEIGHTS_FILE),
    EXPERIMENT: None,
    FIGURES: (),  # drawn again from the model by the command that drew them
}
# The folders a folder of figures may sit in, right inside: a model's (its own figures).
FIGURE_HOSTS = (RUN, MODEL, EXPORT)
# What the commands that write a folder of figures write in it (gptlab heads, lens, patch,
# attribute): nothing else may be there.
FIGURE_FILES = re.compile(r"(lens|scores|patch|attribution)\.(png|json)|layer\d+_head\d+\.png")
# Entries that do not make a folder non-empty: a desktop's clutter, and a trainer's lock
# (gptlab.training.rundir), which a failed start may leave in a folder it never wrote.
IGNORED = frozenset({".DS_Store", LOCK_FILE})


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
    if kind is None and entries and not _not_figures(path, entries):
        kind = FIGURES  # as an earlier gptlab left them: its names and figures, nothing else
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
    its = "their" if kind == FIGURES else "its"
    path = Path(path)
    check_dir(path)
    if kind == FIGURES:
        _check_figures_place(path)
    elif path.exists() and _is_part_of_a_run(path):
        raise UsageError(f"{path} is part of the training run in {path.resolve().parent}: "
                         f"give the {kind} a folder of its own")
    else:
        _check_place(path, kind)
    found = recognise(path)
    if found.empty:
        return found
    if found.kind is None:
        raise UsageError(f"{path} holds files gptlab did not write ({found.listing()}): "
                         f"give the {kind} a new or empty folder")
    if found.kind != kind:
        also = " (--force replaces only a folder of the same kind)" if force else ""
        raise UsageError(f"{path} is {DESCRIPTION[found.kind]} ({found.listing()}): give the "
                         f"{kind} a folder of {its} own{also}")
    if kind == FIGURES:
        foreign = _not_figures(path, found.entries, every=True)
        if foreign:
            raise UsageError(f"{path} holds files gptlab did not write ({found.listing(foreign)})"
                             f": give the {kind} a new or empty folder")
    work = found.work()
    if work and not force:
        raise UsageError(f"{path} already holds {DESCRIPTION[kind]} ({found.listing(work)}): "
                         f"{hint}")
    return found


def claim_file(path: str | Path, output: str, *, force: bool = False,
               sources: tuple[str | Path, ...] = (), flag: str = "--out") -> Path:
    """Check that one file of `output` (gptlab.files.authorship.OUTPUTS: a figure, a GGUF
    file) may be written at `path`, before any work: a one-line UsageError naming `flag` if
    not. Never inside a folder of a kind, never one of `sources` (what it is made from) or
    inside one, never through a symlink; a file already there only with force, and only one
    gptlab wrote as the same output (the file's own mark). Creates nothing; returns path."""
    if output not in authorship.OUTPUTS:
        raise ValueError(f"unknown kind of output {output!r}")
    path = Path(path)
    if output == authorship.FIGURE and path.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"{flag} {path}: a figure is written as .png or .svg")
    if path.is_symlink():
        raise UsageError(f"{flag} {path} is a symbolic link (to {_readlink(path)}): give the "
                         f"path of a file of its own")
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give the file to write")
    real = _resolved(path, flag)
    what = authorship.DESCRIPTION[output]
    for source in map(Path, sources):
        if not source.exists():
            continue  # a hub name, a shipped model: nothing here to overwrite
        origin = _resolved(source, "the source")
        if real == origin or origin in real.parents:
            raise UsageError(f"{flag} {path} is {'' if real == origin else 'inside '}"
                             f"{source}, what the {what} is made from: write it elsewhere")
    around = enclosing(real)
    if around is not None:
        kind, folder = around
        raise UsageError(f"{flag} {path} is inside {_shown(folder)}, {DESCRIPTION[kind]}, "
                         f"whose files are its own: write the {what} outside it")
    if path.exists():
        if not path.is_file():
            raise UsageError(f"{flag} {path} exists and is not a regular file")
        if not authorship.written_by_gptlab(path, output):
            raise UsageError(f"{flag} {path} already exists and is not a {what} gptlab "
                             f"wrote (--force replaces only those): give another path")
        if not force:
            raise UsageError(f"{flag} {path} already exists: --force replaces it (a {what} "
                             f"gptlab wrote)")
    check_dir(path.parent)
    return path


def enclosing(path: str | Path) -> tuple[str, Path] | None:
    """(kind, folder): the nearest folder above `path` that is of a kind (its mark or, from
    an earlier version, its files), or None."""
    for parent in Path(path).absolute().parents:
        marker = read_marker(parent)
        kind = marker["kind"] if marker is not None else _unmarked_kind(parent)
        if kind is not None:
            return kind, parent
    return None


def _check_place(path: Path, kind: str) -> None:
    """A folder of a kind is never made inside another (a run in a data directory), but
    for an experiment's runs and data (gptlab.experiments.grid)."""
    around = enclosing(_resolved(path, "--out"))
    if around is None or (around[0] == EXPERIMENT and kind in (RUN, DATA)):
        return
    raise UsageError(f"{path} is inside {_shown(around[1])}, {DESCRIPTION[around[0]]}: give the "
                     f"{kind} a folder of its own")


def _check_figures_place(path: Path) -> None:
    """A folder of figures may sit in a folder of a model (FIGURE_HOSTS: its own figures,
    as `gptlab heads RUN` writes RUN/heads/), and nowhere else inside a folder of a kind."""
    real = _resolved(path, "--out")
    around = enclosing(real)
    if around is None:
        return
    kind, folder = around
    if kind in FIGURE_HOSTS and folder == real.parent:
        return
    raise UsageError(f"{path} is inside {_shown(folder)}, {DESCRIPTION[kind]}: give the figures a "
                     f"folder of their own")


def _not_figures(path: Path, entries: tuple[str, ...], every: bool = False) -> list[str]:
    """The entries of `path` that the commands writing figures did not write (FIGURE_FILES;
    a figure of gptlab's or, from an earlier one, of matplotlib's; a JSON object): the first
    one found, or every one."""
    foreign = []
    for entry in entries:
        file = path / entry
        if not _is_figures_file(file):
            foreign.append(entry)
            if not every:
                break
    return foreign


def _is_figures_file(file: Path) -> bool:
    if not FIGURE_FILES.fullmatch(file.name) or file.is_symlink() or not file.is_file():
        return False
    if file.suffix == ".json":
        return bool(_json_keys(file))
    return authorship.is_gptlab_figure(file, earlier=True)


def _resolved(path: Path, flag: str) -> Path:
    """path with every symlink on its way followed (what a write there would touch)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop (RuntimeError before 3.13)
        raise UsageError(f"{flag} {path}: cannot follow its links ({exc})") from None


def _shown(folder: Path) -> str:
    """A folder found by following a path, as the user would name it: from the working
    directory when it lies under it."""
    try:
        return str(folder.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(folder)


def _readlink(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:
        return "?"


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
