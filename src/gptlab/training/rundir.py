"""A run directory: the one module that knows its format. Its file names, how it is
written, how it is read (with torch: the checkpoint; without: the step, the log, the lock),
and the lock protocol, both sides. Every other module asks here: for the names, for a
checkpoint written or read, for the step and the log, for the lock; none parses a run's
weights' header or touches its lock (tests/test_package.py checks).

A run directory is a model directory (gptlab.model_dir) holding the latest weights, plus:
  train.json     the TrainConfig (gptlab.training.run)
  state.pt       the training checkpoint: step, weights and their checksum
                 (STATE_CHECKSUM, gptlab.model_dir.tensors_sha256: torch.load checks none
                 of its own), optimizer, RNG states, best val loss; plain tensors and
                 numbers, loaded with torch.load(weights_only=True)
  model.safetensors  the weights of the last checkpoint, their step in its metadata
                 (weights_metadata), readable without torch (weights_step), and their
                 checksum (gptlab.model_dir, which checks it on every load)
  metrics.jsonl  one JSON object per logged step; loss.png, the curve drawn from it
  best/          a model directory with the weights of the best validation loss so far
  tb/            with `log tensorboard`: TensorBoard's event files (scalars, samples, configs)
  shards-STEP-ID/  a sharded run's (--parallel fsdp, tp, fsdp+tp) weights and optimizer
                 moments, one file per rank (gptlab.distributed.sharded_checkpoint); state.pt names
                 it
  data.json      the data it started on: its folder and its tokens' fingerprint
                 (gptlab.data.prepared); a resume on tokens that changed since is refused
  .lock          held (flock) by the one trainer writing the directory; it holds its PID:
                 `locked` takes it, `lock_holder` tells who holds it
  .gptlab.json   the mark of a run (gptlab.files.kinds), written before any other file

state.pt is the commit point of a checkpoint. It carries the weights itself and is written
before model.safetensors, so whenever a process dies, state.pt is whole and self-consistent:
--resume continues from it, whatever state the other files were left in. A marked run
without state.pt, weights or best/ never trained a step worth keeping (a run is
checkpointed at step 0 before its first step), so a fresh start may replace what it holds;
one whose state.pt is gone but whose weights are there keeps them (gptlab.files.kinds.WORK).
A sharded run's state.pt carries no weights but names its shards directory, whole before
state.pt is written. `Checkpoints` is the one way a trainer commits them, in every mode,
whatever it reports; no checkpoint holds a weight that is not finite.

Why here, in training/: writing a checkpoint needs the model directory's writer, the sharded
checkpoint and the loss curve, all in lower layers, so the owner sits above them; and the
readers below it need nothing of a run: gptlab.model_dir writes whatever metadata it is
given (weights_metadata), and gptlab.files.kinds declares the names it recognises a run by
(re-exported here, the names a user of a run takes). Importing this module loads no torch:
`gptlab runs` and the lab's listings read runs beside a training (gptlab.training.runs);
torch, the model directory, the shards and the plots are imported by the functions that
write or read checkpoints.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.atomic import (
    append_text,
    atomic_path,
    atomic_write_text,
    copy_file,
    ensure_dir,
    read_json_object,
    write_json,
)
from gptlab.files.kinds import (
    BEST_DIR,
    CONFIG_FILE,
    LOCK_FILE,
    RUN,
    STATE_FILE,
    TOKENIZER_FILE,
    TRAIN_CONFIG_FILE,
    WEIGHTS_FILE,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

# --- the names ------------------------------------------------------------------------------
# gptlab.files.kinds declares the ones it tells a run by (the folder rule sits below every
# writer); the rest are the run's alone.
METRICS_FILE = "metrics.jsonl"  # one JSON object per logged step
PLOT_FILE = "loss.png"
DATA_RECORD_FILE = "data.json"
TB_DIR = "tb"  # with `log tensorboard` (gptlab.training.reporting.TensorBoardReporter)
# Every file a run writes at its top level (best/ and .lock aside).
RUN_FILES = (CONFIG_FILE, TRAIN_CONFIG_FILE, WEIGHTS_FILE, STATE_FILE, TOKENIZER_FILE,
             METRICS_FILE, PLOT_FILE, DATA_RECORD_FILE)
STEP_KEY = "step"  # in model.safetensors' metadata: the step its weights were saved at
STATE_CHECKSUM = "model_sha256"  # in state.pt: gptlab.model_dir.tensors_sha256 of its "model"
_LOCK_HELD = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)  # flock's "someone has it"


# --- the lock: one writer, and who it is ----------------------------------------------------


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold run_dir's lock for the block: a second trainer fails at once, naming our PID.

    An OS lock (flock), so it goes when the process dies, however it dies; no stale lock
    file to clean up. The `filelock` package would do the locking, but it keeps no holder's
    PID for a real (non-soft) lock, and the message a user needs is "held by PID n".
    """
    ensure_dir(run_dir)
    try:
        import fcntl  # POSIX only (Windows has no flock)
    except ImportError:  # Windows: no flock; one writer is then up to the user
        yield
        return
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in _LOCK_HELD:
                raise
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise UsageError(f"{run_dir} is in use by another trainer (PID {holder}); wait "
                             f"for it to finish or stop it, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_holder(run_dir: str | Path) -> int | None:
    """The PID of the trainer holding run_dir's lock (`locked`), or None. The PID in .lock
    is only believed while that process lives and the lock is held: a lock file outlives
    its trainer, and its PID may be reused."""
    path = Path(run_dir) / LOCK_FILE
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    if not text.isdigit() or not _alive(int(text)):
        return None
    try:
        import fcntl  # POSIX only
    except ImportError:  # Windows: no flock; a live PID is all there is
        return int(text)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # A shared lock for an instant: refused while a trainer holds its exclusive one.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return int(text) if exc.errno in _LOCK_HELD else None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


# --- reading without torch ------------------------------------------------------------------


def weights_metadata(step: int) -> dict[str, str]:
    """What a run records in its weights' header (gptlab.model_dir.save_model's metadata):
    the step they were saved at, which weights_step reads back."""
    return {STEP_KEY: str(step)}


def weights_step(path: str | Path) -> int | None:
    """The step a weights file's metadata records (weights_metadata), or None if it has
    none; a UsageError if it is not a readable safetensors file. Only the header is read,
    by the safetensors library with framework="numpy": no torch, no tensor loaded."""
    # start-up time: `gptlab --help` builds `train`'s parser from this module's names
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            step = (f.metadata() or {}).get(STEP_KEY)
    except (SafetensorError, OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    return int(step) if step is not None and step.isdigit() else None


def checkpoint_step(run_dir: str | Path) -> int | None:
    """The step of the last checkpoint's weights (model.safetensors), without torch; None
    when the run has none, or none readable (a table shows a blank, not an error)."""
    try:
        return weights_step(Path(run_dir) / WEIGHTS_FILE)
    except UsageError:
        return None


def read_metrics(run_dir: str | Path) -> list[dict]:
    """metrics.jsonl's records (a line cut short by a kill, or not JSON, is skipped; none
    when there is no log)."""
    try:
        text = (Path(run_dir) / METRICS_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def divergence(run_dir: Path, after_step: int) -> dict[str, Any] | None:
    """The "diverged" record metrics.jsonl holds for a step after `after_step` (the run's
    checkpoint, the last one with finite losses and weights), or None: whether the run
    stopped on a loss or weight that is not finite since that checkpoint."""
    return next((r for r in reversed(read_metrics(run_dir)) if r.get("kind") == "diverged"
                 and isinstance(r.get("step"), int) and r["step"] > after_step), None)


def read_train_config(run_dir: Path) -> dict[str, Any]:
    return read_json_object(run_dir / TRAIN_CONFIG_FILE, "training settings")


# --- fresh starts and resumes ---------------------------------------------------------------


def has_checkpoint(run_dir: Path) -> bool:
    return (run_dir / STATE_FILE).is_file()


def fresh_start_hint(run_dir: Path) -> str:
    """What to offer instead of replacing a run that holds work (kinds.claim's hint)."""
    if has_checkpoint(run_dir):
        return "continue it with --resume, or replace it with --force"
    return (f"fine-tune from its weights into another folder with --init-from {run_dir}, or "
            f"replace it with --force")


def clear(run_dir: Path) -> None:
    """Remove a run's files and its mark (after kinds.claim said they may go)."""
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / BEST_DIR, ignore_errors=True)
    shutil.rmtree(run_dir / TB_DIR, ignore_errors=True)
    remove_stale_shards(run_dir, keep=None)
    kinds.unmark(run_dir)


def check_resumable(run_dir: Path) -> None:
    """run_dir is a run with a checkpoint, or a UsageError saying what it holds instead,
    and what can be done with it."""
    if not run_dir.is_dir():
        raise UsageError(f"nothing to resume: run directory {run_dir} does not exist")
    found = kinds.recognise(run_dir)
    if found.kind != RUN:
        what = ("is empty" if found.empty else f"is {kinds.DESCRIPTION[found.kind]}"
                if found.kind else f"holds files gptlab did not write ({found.listing()})")
        raise UsageError(f"nothing to resume: {run_dir} {what}, not a training run")
    if has_checkpoint(run_dir):
        return
    kept = _kept_weights(run_dir)
    if not kept:
        raise UsageError(f"nothing to resume: {run_dir} stopped before its first checkpoint; "
                         f"start it afresh without --resume")
    raise UsageError(f"nothing to resume: {run_dir} has no {STATE_FILE}, so its checkpoint "
                     f"(step, optimizer and random states) is gone; {' and '.join(kept)} "
                     f"{'are' if len(kept) > 1 else 'is'} still there: sample or evaluate "
                     f"them, or fine-tune from them into another folder with --init-from "
                     f"{run_dir}")


def _kept_weights(run_dir: Path) -> list[str]:
    """The weights a run without its checkpoint still holds, described with their steps."""
    kept = []
    for where, name in ((run_dir, f"its weights ({WEIGHTS_FILE}"),
                        (run_dir / BEST_DIR, f"{BEST_DIR}/ (the best weights")):
        if (where / WEIGHTS_FILE).is_file():
            try:
                step = weights_step(where / WEIGHTS_FILE)
            except UsageError:
                step = None
            kept.append(name + (f", step {step})" if step is not None else ")"))
    return kept


def check_same_tokenizer(data_tokenizer: Path, run_dir: Path) -> None:
    run_tokenizer = run_dir / TOKENIZER_FILE
    if not run_tokenizer.is_file():
        raise UsageError(f"cannot resume: {run_tokenizer} does not exist")
    if data_tokenizer.read_bytes() != run_tokenizer.read_bytes():
        raise UsageError(f"the data's {data_tokenizer} differs from the run's {run_tokenizer}: "
                         f"resume with the data the run was trained on")


def record_data(run_dir: Path, data_dir: Path, fingerprint: str) -> None:
    """data.json: the data the run trains on from now (its start, or a resume)."""
    write_json(run_dir / DATA_RECORD_FILE, {"data": str(data_dir), "fingerprint": fingerprint})


def check_same_data(run_dir: Path, data_dir: Path, fingerprint: str) -> None:
    """A resume continues on the tokens the run trained on: a UsageError naming data_dir
    if their fingerprint differs from the one the run recorded. A run from before the
    record has none to compare (its resume records it)."""
    try:
        recorded = read_json_object(run_dir / DATA_RECORD_FILE, "the run's data record")
    except UsageError:
        if (run_dir / DATA_RECORD_FILE).exists():
            raise
        return
    if recorded.get("fingerprint") not in (None, fingerprint):
        raise UsageError(f"the data in {data_dir} is not the data {run_dir} trained on (its "
                         f"tokens changed since: another fingerprint): resume with that data, "
                         f"or fine-tune from the run into a new --out with --init-from "
                         f"{run_dir}")


def start(run_dir: Path, data_dir: Path, settings: dict[str, Any],
          model_config: dict[str, Any], by: str = "train",
          data_fingerprint: str | None = None) -> None:
    """The files a fresh run begins with, its mark first (written by command `by`), its
    tokenizer data_dir's; the checkpoint of step 0 follows at once. data_fingerprint: the
    data's (record_data)."""
    kinds.mark(run_dir, RUN, by)
    copy_file(data_dir / TOKENIZER_FILE, run_dir / TOKENIZER_FILE)
    if data_fingerprint is not None:
        record_data(run_dir, data_dir, data_fingerprint)
    write_train_config(run_dir, settings)
    write_json(run_dir / CONFIG_FILE, model_config)


def write_train_config(run_dir: Path, settings: dict[str, Any]) -> None:
    write_json(run_dir / TRAIN_CONFIG_FILE, settings)


# --- checkpoints ----------------------------------------------------------------------------


def save_checkpoint(run_dir: Path, model: nn.Module, state: dict[str, Any]) -> None:
    """state.pt (with the weights), then the model directory's files for sample and co.

    state: plain data (tensors, numbers, strings, lists, dicts) with an int "step"; a
    sharded run's names its shards directory as "sharded" instead of carrying weights."""
    # start-up time: torch and the model's writer, only where a checkpoint is written
    import torch

    from gptlab import model_dir

    if "sharded" not in state:
        weights = model_dir.weights_state(model)
        state = {**state, "model": weights, STATE_CHECKSUM: model_dir.tensors_sha256(weights)}
    with atomic_path(run_dir / STATE_FILE) as tmp:
        torch.save(state, tmp)
    remove_stale_shards(run_dir, keep=state.get("sharded"))
    model_dir.save_model(model, run_dir, metadata=weights_metadata(state["step"]))


def remove_stale_shards(run_dir: Path, keep: str | None) -> None:
    """Once state.pt names `keep`, every other shards directory goes (older checkpoints,
    and partial ones a crash left)."""
    # start-up time: the sharded checkpoint loads torch.distributed
    from gptlab.distributed import sharded_checkpoint

    for path in run_dir.glob(sharded_checkpoint.PREFIX + "*"):
        if path.name != keep and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def load_checkpoint(run_dir: Path, mmap: bool = False) -> dict[str, Any]:
    """state.pt of a run: its "model" entry holds the weights of its step, checked against
    the checksum it records (one from before the checksum has none to check). mmap: its
    tensors are read only when touched, and not checked (a look at its step and kind costs
    no more than that)."""
    path = run_dir / STATE_FILE
    if not path.is_file():
        raise UsageError(f"nothing to resume: {path} does not exist")
    import torch  # start-up time: only the checkpoint itself needs torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # a truncated or foreign file; torch raises many kinds
        raise UsageError(f"{path} is not a readable training state ({type(exc).__name__})") \
            from None
    if (not isinstance(state, dict) or not isinstance(state.get("step"), int)
            or not isinstance(state.get("model", state.get("sharded")), (dict, str))):
        raise UsageError(f"{path} is not a gptlab training state")
    recorded = state.pop(STATE_CHECKSUM, None)
    if recorded is not None and not mmap and isinstance(state.get("model"), dict):
        from gptlab import model_dir  # start-up time: as torch above

        found = model_dir.tensors_sha256(state["model"])
        if found != recorded:
            raise UsageError(f"{path} is damaged: its weights' sha256 is {found[:12]}..., "
                             f"the checkpoint records {str(recorded)[:12]}... (changed since "
                             f"gptlab wrote it); the run cannot resume from it")
    return state


def save_best(run_dir: Path, model: nn.Module, step: int) -> None:
    """RUN_DIR/best/: a plain model directory (config, weights, tokenizer)."""
    from gptlab import model_dir  # start-up time: the model's writer loads torch

    best = run_dir / BEST_DIR
    model_dir.save_model(model, best, metadata=weights_metadata(step))
    tokenizer = run_dir / TOKENIZER_FILE
    if tokenizer.is_file():
        copy_file(tokenizer, best / TOKENIZER_FILE)


class Checkpoints:
    """A run directory's checkpoints, for a trainer (gptlab.training.trainer.Checkpointer):
    the one place they are committed, whole or sharded, whatever the run reports.

    Every rank calls each method; only `writer` (rank 0) writes files. A whole model's
    weights and optimizer moments go into state.pt itself; a sharded model's (`sharding`,
    gptlab.training.run's ShardedGPT) into a shards directory that every rank
    writes first (gptlab.distributed.sharded_checkpoint), which state.pt then names, with the
    gathered weights in model.safetensors for sample and co.

    best/ lives here too, not with the reporter: it is weights, like model.safetensors (for
    a sharded model every rank must take part in gathering them, whichever reporter it
    has), and a resumed run trusts state.pt's best_val to describe what best/ holds.
    """

    def __init__(self, run_dir: Path, writer: bool, sharding: Any = None) -> None:
        self.run_dir, self.writer, self.sharding = run_dir, writer, sharding
        self.where = str(run_dir)

    def save(self, progress: dict[str, Any], model: nn.Module,
             optimizer: torch.optim.Optimizer) -> None:
        if self.sharding is None:
            if self.writer:
                save_checkpoint(self.run_dir, model,
                                {**progress, "optimizer": optimizer.state_dict()})
            return
        from gptlab.distributed import sharded_checkpoint  # start-up time: torch.distributed

        shards = sharded_checkpoint.save(self.run_dir, progress["step"], model, optimizer)
        whole = self.sharding.gathered()  # model.safetensors stays an ordinary file
        if self.writer:
            save_checkpoint(self.run_dir, whole, {**progress, "sharded": shards})

    def restore(self, state: dict[str, Any], model: nn.Module,
                optimizer: torch.optim.Optimizer) -> None:
        """The optimizer's moments; a sharded model's weights too (a whole model's come
        from state["model"] before it is wrapped or sharded: gptlab.training.run)."""
        if self.sharding is None:
            optimizer.load_state_dict(state["optimizer"])
        else:
            from gptlab.distributed import sharded_checkpoint  # start-up time, as in save

            sharded_checkpoint.load(self.run_dir, state["sharded"], model, optimizer)

    def save_best(self, model: nn.Module, step: int) -> None:
        if self.writer:
            save_best(self.run_dir, model, step)


# --- metrics --------------------------------------------------------------------------------


class RunFiles:
    """What a run logs as it goes: metrics.jsonl and the loss curve drawn from it."""

    def __init__(self, run_dir: Path, title: str = "") -> None:
        self.run_dir, self.title = run_dir, title
        self.metrics_path = run_dir / METRICS_FILE
        self.records: list[dict] = []

    def reset_metrics(self, keep_until_step: int | None, redo_eval: bool = False) -> None:
        """Start metrics.jsonl afresh, or keep the records up to a resumed step (a run
        killed after its checkpoint may have logged steps that will now run again).
        redo_eval: the checkpoint's evaluation is pending (it was saved before it, as step
        0's is): an evaluation logged at that step will be logged again, so it goes."""
        kept = [] if keep_until_step is None else [
            r for r in read_metrics(self.run_dir)
            if r.get("step", math.inf) <= keep_until_step
            and not (redo_eval and r.get("kind") == "eval" and r.get("step") == keep_until_step)]
        self.records = kept
        atomic_write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))

    def log(self, record: dict) -> None:
        record = {**record, "time": round(time.time(), 3)}
        self.records.append(record)
        append_text(self.metrics_path, json.dumps(record) + "\n")

    def plot(self) -> None:
        from gptlab.plots.training import loss_curves  # start-up time: matplotlib

        loss_curves(self.records, title=self.title).save(self.run_dir / PLOT_FILE)
