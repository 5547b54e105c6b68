"""An experiment's folder and its grid of training runs, trained once.

    folder = experiment_folder("runs/context", "context")   # the one way a folder is opened
    grid = Grid(folder, data_dir)
    records = grid.train([RunSpec("rope", model_config, train_config), ...])

Every run is an ordinary run directory (gptlab.training.run.train) under FOLDER/runs/NAME:
loadable, resumable, listed by the lab. `grid.json` remembers what each run was asked to be
(its model and training settings, the run it was fine-tuned from, the data's content) and
whether it finished; a later call reuses a finished run asked for again, resumes an
interrupted one, and trains afresh a run whose settings, data or torch thread count
changed. A grid that
studies stability (`Grid(..., keep_diverged=True)`) keeps a run whose loss became NaN as a
result, recorded and reused like a finished one, instead of stopping there.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from gptlab.data.corpus import ensure_shakespeare
from gptlab.data.prepared import load_data
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.atomic import read_json_object, write_json
from gptlab.files.kinds import EXPERIMENT_FILE, WEIGHTS_FILE
from gptlab.model.config import GPTConfig
from gptlab.stopping import Interrupted
from gptlab.training import rundir
from gptlab.training.callbacks import Callbacks
from gptlab.training.config import TrainConfig
from gptlab.training.reporting import Reporter, ReporterGroup
from gptlab.training.run import train
from gptlab.training.trainer import TrainingDiverged
from gptlab.version import __version__

GRID_FILE = "grid.json"
RUNS_DIR = "runs"


def experiment_folder(path: str | Path, name: str,
                      configuration: dict[str, Any] | None = None, force: bool = False) -> Path:
    """The folder experiment `name` writes into, made ready: created where missing, or one
    that already holds this experiment (its runs are reused). Anything else is refused
    before a file is written, by the rule every folder gptlab writes follows
    (gptlab.files.kinds). Every experiment opens its folder here, and only here.

    configuration: what the results depend on (a command's size, steps, seed and data),
    recorded in experiment.json. A folder holding the results of another configuration is
    refused unless force: its runs would be trained again and its results replaced (one
    that records none, from the library or an earlier version, cannot be told and takes
    this one). None: whatever the folder records."""
    path = Path(path)
    if kinds.recognise(path).kind == kinds.EXPERIMENT:
        recorded = _experiment_record(path)
        found = recorded.get("experiment")
        if found != name:
            raise UsageError(f"{path} holds the experiment {found!r}, not {name!r}: choose "
                             f"another --out")
        if configuration is None:
            configuration = recorded.get("configuration")
        elif not force:
            _check_same_configuration(path, name, recorded.get("configuration"), configuration)
    else:
        kinds.claim(path, kinds.EXPERIMENT)  # absent or empty; any other folder is refused
    kinds.mark(path, kinds.EXPERIMENT, "experiment")
    record = {"kind": "experiment", "experiment": name, "gptlab": __version__}
    if configuration is not None:
        record["configuration"] = configuration
    write_json(path / EXPERIMENT_FILE, record)
    return path


def _check_same_configuration(path: Path, name: str, recorded: dict[str, Any] | None,
                              configuration: dict[str, Any]) -> None:
    # None: a folder the library or an earlier version wrote, which records none; its runs
    # keep their own settings (grid.json), and a run asked for with others trains again. A
    # flag an earlier version did not record (--threads) is taken as this one's, the same.
    if recorded is None:
        return
    recorded = {**configuration, **recorded}
    if recorded == configuration:
        return
    was = describe_configuration({k: v for k, v in recorded.items()
                                  if configuration.get(k) != v})
    now = describe_configuration({k: v for k, v in configuration.items()
                                  if recorded.get(k) != v})
    raise UsageError(f"{path} holds experiment {name}'s results made {was}, not {now}: "
                     f"--force trains it again with this one there, replacing them, or give "
                     f"another --out")


def describe_configuration(configuration: dict[str, Any]) -> str:
    """{"quick": True, "seed": 1, "steps": None} -> "with --quick and --seed 1 and without
    --steps" (as the command's flags: a flag left out, or off, is "without" it)."""
    given, left_out = [], []
    for key, value in configuration.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            left_out.append(flag)
        else:
            given.append(flag if value is True else f"{flag} {value}")
    parts = ([f"with {' and '.join(given)}"] if given else []) + (
        [f"without {' or '.join(left_out)}"] if left_out else [])
    return " and ".join(parts) or "with the same flags"


def _experiment_record(path: Path) -> dict[str, Any]:
    try:
        return read_json_object(path / EXPERIMENT_FILE, "experiment marker")
    except UsageError:
        return {}


def open_experiment(out: str | Path, name: str, data: str | Path | None,
                    log: Callable[[str], None] = print) -> tuple[Path, Path]:
    """(folder, data directory) of experiment `name` writing into `out`: the folder made
    ready (experiment_folder), the data given or the embedded corpus prepared in it."""
    folder = experiment_folder(out, name)
    return folder, (Path(data) if data is not None else embedded_corpus(folder, log))


def choose_size(sizes: dict[str, Any], quick: bool, **changes: Any) -> Any:
    """sizes["quick"] or sizes["default"] (a dataclass), with the changes that are not None
    (a command's --steps, say) applied."""
    size = sizes["quick" if quick else "default"]
    return replace(size, **{k: v for k, v in changes.items() if v is not None})


def embedded_corpus(folder: Path, log: Callable[[str], None] = print) -> Path:
    """The embedded Shakespeare, prepared (once) into FOLDER/data: every experiment's
    default data."""
    data_dir = Path(folder) / "data"
    meta, reused = ensure_shakespeare(data_dir)
    if not reused:
        log(f"prepared the embedded Shakespeare ({meta['train_tokens'] + meta['val_tokens']:,} "
            f"characters) in {data_dir}/")
    return data_dir


def experiment_of(path: str | Path) -> str | None:
    """The name of the experiment a folder holds, or None."""
    return _experiment_record(Path(path)).get("experiment")


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: its name (a folder under FOLDER/runs), model and settings; a
    fine-tune names the grid run it starts from (`start`), and its model may differ from
    that one's only where a fine-tune may (gptlab.training.plan.FINE_TUNE_MAY_CHANGE)."""

    name: str
    model: GPTConfig
    train: TrainConfig
    start: str | None = None
    # What else watches the training (an experiment's measurements at each evaluation):
    # watcher(run_dir) -> a reporter, beside the run's own. Not part of what the run is.
    watcher: Callable[[Path], Reporter] | None = field(default=None, compare=False)

    def key(self) -> dict[str, Any]:
        """What the run was asked to be; a finished run is reused while this is unchanged.
        vocab_size and init_from are left out: the data and the folder decide them. The
        settings flat (TrainConfig.flat): the key does not depend on how TrainConfig groups
        them, so a finished run stays reusable."""
        model = {k: v for k, v in self.model.to_dict().items() if k != "vocab_size"}
        settings = {k: v for k, v in self.train.flat().items() if k != "init_from"}
        return {"model": model, "train": settings, "start": self.start}


@dataclass(frozen=True)
class RunRecord:
    """A run of the grid as it stands: where, its seed and steps, the seconds its training
    took (when it was trained, if it was reused), whether this call reused it, and, for a
    run that diverged, its record of it (TrainingDiverged.record: step, what)."""

    name: str
    run_dir: Path
    seed: int
    steps: int
    train_s: float
    reused: bool
    diverged: dict[str, Any] | None = None

    def to_dict(self, folder: Path) -> dict[str, Any]:
        return {"dir": self.run_dir.relative_to(folder).as_posix(), "seed": self.seed,
                "steps": self.steps, "train_s": round(self.train_s, 2), "reused": self.reused,
                "diverged": self.diverged}


class Grid:
    """The runs of one experiment folder trained on one data directory, their state in
    FOLDER/grid.json. An experiment with runs on several data directories has a grid per
    directory, each its own `state` file, all their runs in FOLDER/runs (where `gptlab runs`
    and the lab find them).

    callbacks: every training's (gptlab.training.callbacks), for an experiment that measures
    its models while they train (a RunSpec's watcher measures beside the reporter they
    make); keep_diverged: a run whose loss or weights became NaN is a result, not an
    error."""

    def __init__(self, folder: Path, data_dir: str | Path, state: str = GRID_FILE,
                 keep_diverged: bool = False, callbacks: Callbacks | None = None) -> None:
        self.folder, self.data_dir = Path(folder), Path(data_dir)
        self.state_path = self.folder / state
        self.data = data_identity(self.data_dir)
        self.keep_diverged, self.callbacks = keep_diverged, callbacks or Callbacks()

    def run_dir(self, name: str) -> Path:
        return self.folder / RUNS_DIR / name

    def train(self, specs: Sequence[RunSpec], progress: bool = False,
              log: Callable[[str], None] = print) -> dict[str, RunRecord]:
        """Every spec's run, in order (a fine-tune after the run it starts from), trained
        unless a finished run of the same settings and data is there already."""
        names = [s.name for s in specs]
        for spec in specs:
            if spec.start is not None and spec.start not in names[:names.index(spec.name)]:
                raise UsageError(f"run {spec.name!r} starts from {spec.start!r}, which is not "
                                 f"an earlier run of the grid")
        return {spec.name: self._one(spec, progress, log) for spec in specs}

    def _one(self, spec: RunSpec, progress: bool, log: Callable[[str], None]) -> RunRecord:
        run_dir, state = self.run_dir(spec.name), self._state()
        entry = state["runs"].get(spec.name)
        # torch's thread count is part of what a run is: another count sums its reductions
        # in another order, and the trained weights (and the verdicts) move
        same = (entry is not None and entry["spec"] == spec.key()
                and entry.get("threads") == torch.get_num_threads()
                and state.get("data") == self.data)
        steps = spec.train.max_iters
        diverged = entry.get("diverged") if same else None
        if same and entry["finished"] and (diverged or _finished_at(run_dir) == steps):
            log(f"{spec.name}: reusing the {'diverged' if diverged else 'finished'} run in "
                f"{run_dir}")
            return RunRecord(spec.name, run_dir, spec.train.seed,
                             diverged["step"] if diverged else steps, entry["train_s"], True,
                             diverged)
        settings = spec.train
        if spec.start is not None:
            settings = replace(settings, init_from=str(self.run_dir(spec.start)))
        self._record(spec, finished=False, train_s=0.0)
        t0 = time.perf_counter()
        callbacks = self.callbacks
        if spec.watcher is not None:
            callbacks = Watched(callbacks, spec.watcher)
        try:
            if same and rundir.has_checkpoint(run_dir):
                log(f"{spec.name}: resuming the interrupted run in {run_dir}")
                result = train(None, None, self.data_dir, run_dir, resume=True,
                               progress=progress, callbacks=callbacks)
            else:
                log(f"{spec.name}: training {steps} steps into {run_dir}")
                result = train(spec.model, settings, self.data_dir, run_dir, overwrite=True,
                               progress=progress, callbacks=callbacks)
        except TrainingDiverged as exc:
            if not self.keep_diverged:
                raise
            elapsed = time.perf_counter() - t0
            log(f"{spec.name}: diverged ({exc.happened} at step {exc.step})")
            self._record(spec, finished=True, train_s=elapsed, diverged=exc.record())
            return RunRecord(spec.name, run_dir, spec.train.seed, exc.step, elapsed, False,
                             exc.record())
        if result.signal is not None:  # a Ctrl-C or SIGTERM: the command exits 130 / 143
            raise Interrupted(result.signal)
        if result.status != "finished":
            raise UsageError(f"run {spec.name} stopped at step {result.step}: run the "
                             f"experiment again to resume it")
        elapsed = time.perf_counter() - t0
        self._record(spec, finished=True, train_s=elapsed)
        return RunRecord(spec.name, run_dir, spec.train.seed, result.step, elapsed, False)

    def _state(self) -> dict[str, Any]:
        path = self.state_path
        state = read_json_object(path, "grid state") if path.is_file() else {}
        if state.get("data") != self.data:  # new data: nothing trained before counts
            state = {"data": self.data, "runs": {}}
        return state

    def _record(self, spec: RunSpec, finished: bool, train_s: float,
                diverged: dict[str, Any] | None = None) -> None:
        state = self._state()
        state["runs"][spec.name] = {"spec": spec.key(), "threads": torch.get_num_threads(),
                                    "finished": finished, "train_s": round(train_s, 2),
                                    "diverged": diverged}
        write_json(self.state_path, state)


class Watched(Callbacks):
    """`callbacks` with a RunSpec's watcher (watcher(run_dir) -> a reporter) beside the
    reporter they make."""

    def __init__(self, callbacks: Callbacks, watcher: Callable[[Path], Reporter]) -> None:
        self.callbacks, self.watcher = callbacks, watcher
        self.owner = callbacks.owner

    def make_reporter(self, files: rundir.RunFiles, progress: bool) -> Reporter:
        return ReporterGroup(self.callbacks.make_reporter(files, progress),
                         self.watcher(files.run_dir))

    def should_stop(self, step: int) -> bool:
        return self.callbacks.should_stop(step)


def data_identity(data_dir: Path) -> dict[str, Any]:
    """What the runs were trained on, by content (its meta and each file's SHA-256), so that
    a folder moved with its data keeps its runs, and other data of the same shape does not."""
    data = load_data(data_dir)  # refused here if the data is not there
    digests = {}
    for path in sorted(p for p in Path(data_dir).iterdir() if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digests[path.name] = digest.hexdigest()
    return {**data.meta, "files": digests}


def _finished_at(run_dir: Path) -> int | None:
    """The step a run's weights were saved at (None where there are none)."""
    if not (run_dir / WEIGHTS_FILE).is_file():
        return None
    return rundir.weights_step(run_dir / WEIGHTS_FILE)
