"""Where a run's progress goes: the one object the trainer reports to.

Rank 0 keeps the run's record (metrics.jsonl and the loss curve: RunReporter) and shows a
progress bar and one line per evaluation on stderr; every other rank gets the base Reporter,
which reports nothing, so the trainer never asks which rank it is on. Where stderr is not a
terminal (a CI log, `| tee`, a notebook's captured output) a bar's carriage-return frames
would pile up, one per redraw: there the progress is a plain line at most every PLAIN_LINE_S
seconds instead. With `log tensorboard`, rank 0 also writes a TensorBoard log
(TensorBoardReporter), beside the record through a ReporterGroup. A reporter only reports:
checkpoints and best/ are the run directory's (gptlab.training.rundir.Checkpoints), kept
whatever reporter a run has.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from gptlab.errors import UsageError
from gptlab.inference.sampling import default_prompt, generate_text
from gptlab.model.decoding import SamplingSettings
from gptlab.training.rundir import RunFiles


class Reporter:
    """What the trainer reports to, every method a no-op: as it is, it reports nothing
    (torchrun ranks > 0, benchmarks); the reporters below override what they record."""

    def open(self, total: int, initial: int) -> None: ...

    def close(self) -> None: ...

    def step(self, record: dict[str, Any] | None) -> None: ...

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None: ...

    def whole_val(self, record: dict[str, Any]) -> None: ...

    def val_target(self, record: dict[str, Any]) -> None:
        """A look at the val loss for stop_at_val (gptlab.training.val_target.Look)."""

    def diverged(self, record: dict[str, Any]) -> None:
        """The run stopped on a loss or weight that is not finite (TrainingDiverged's
        record); the error itself says so to the user."""


PLAIN_LINE_S = 30.0


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class RunReporter(Reporter):
    """metrics.jsonl and loss.png through `files`; a tqdm progress bar (if `progress`) and
    evaluation lines on stderr."""

    def __init__(self, files: RunFiles, progress: bool = True, plot_each_eval: bool = True
                 ) -> None:
        self.files, self.progress, self.bar = files, progress, None
        self.plain: dict[str, float] | None = None  # the plain lines' clock, off a terminal
        # False: loss.png is drawn once, at the end (a frequent evaluator, such as the lab's
        # live view, would otherwise spend more time plotting than training)
        self.plot_each_eval = plot_each_eval

    def open(self, total: int, initial: int) -> None:
        if not self.progress:
            return
        if is_terminal(sys.stderr):
            self.bar = tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True,
                            file=sys.stderr, smoothing=0.1)
        else:
            now = time.monotonic()
            self.plain = {"total": total, "initial": initial, "start": now,
                          "next": now + PLAIN_LINE_S}

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if not self.plot_each_eval and self.files.records:
            self.files.plot()

    def step(self, record: dict[str, Any] | None) -> None:
        """One optimizer step done; `record` when it is a logging step."""
        if self.bar is not None:
            self.bar.update(1)
        if record is None:
            return
        self.files.log(record)
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {record['loss']:.4f}, "
                                     f"{record['tokens_per_s']:,.0f} tok/s", refresh=False)
        elif self.plain is not None and time.monotonic() >= self.plain["next"]:
            self._plain_line(record)

    def _plain_line(self, record: dict[str, Any]) -> None:
        clock, now = self.plain, time.monotonic()
        clock["next"] = now + PLAIN_LINE_S
        step, total = record["step"], int(clock["total"])
        done = step - clock["initial"]
        left = (now - clock["start"]) / done * (total - step) if done > 0 else None
        eta = f", {_duration(left)} left" if left is not None else ""
        print(f"step {step} of {total} ({100 * step / max(total, 1):.0f}%): loss "
              f"{record['loss']:.4f}, {record['tokens_per_s']:,.0f} tok/s{eta}",
              file=sys.stderr)

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        self.files.log(record)
        # not at step 0, before anything has trained: a plot of one point would cost the
        # first launch of matplotlib (about 0.4 s) before the first step
        if self.plot_each_eval and record["step"] > 0:
            self.files.plot()
        self._say(f"step {record['step']}: train loss {record['train_loss']:.4f}, "
                  f"val loss {record['val_loss']:.4f}")

    def _say(self, line: str) -> None:
        """A line on stderr, above the progress bar if there is one."""
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def whole_val(self, record: dict[str, Any]) -> None:
        self.files.log(record)
        under = f" (under {record['autocast']} autocast)" if record.get("autocast") else ""
        print(f"step {record['step']}: whole val split, {record['tokens']:,} tokens: "
              f"loss {record['loss']:.4f}{under}", file=sys.stderr)

    def val_target(self, record: dict[str, Any]) -> None:
        self.files.log(record)
        share = record.get("estimate_share", 1.0)
        windows = "every window" if share >= 1 else f"1/{round(1 / share)} of the windows"
        line = (f"step {record['step']}: val estimate {record['estimate']:.4f} "
                f"(se {record['estimate_se']:.4f}, {windows})")
        if record["whole"] is not None:
            line += (f", whole val split {record['whole']:.4f} "
                     f"({'<=' if record['met'] else '>'} target {record['target']:g})")
        if record.get("autocast"):
            line += f"; under {record['autocast']} autocast"
            if record["whole"] is not None and not record.get("whole_autocast"):
                line += ", the whole split again in float32"
        self._say(line)

    def diverged(self, record: dict[str, Any]) -> None:
        self.files.log(record)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class ReporterGroup(Reporter):
    """Several reporters as one: each call goes to each, in the order given."""

    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = reporters

    def open(self, total: int, initial: int) -> None:
        for r in self.reporters:
            r.open(total, initial)

    def close(self) -> None:
        for r in self.reporters:
            r.close()

    def step(self, record: dict[str, Any] | None) -> None:
        for r in self.reporters:
            r.step(record)

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        for r in self.reporters:
            r.evaluation(record, model, improved)

    def whole_val(self, record: dict[str, Any]) -> None:
        for r in self.reporters:
            r.whole_val(record)

    def val_target(self, record: dict[str, Any]) -> None:
        for r in self.reporters:
            r.val_target(record)

    def diverged(self, record: dict[str, Any]) -> None:
        for r in self.reporters:
            r.diverged(record)


# --- TensorBoard ----------------------------------------------------------------------------

# Each logged number's TensorBoard tag: (metrics.jsonl record kind, field) -> tag. Every
# scalar in RUN/tb/ is one of these records' values at the record's step.
SCALAR_TAGS = {
    ("train", "loss"): "loss/train_batch",
    ("eval", "train_loss"): "loss/train",
    ("eval", "val_loss"): "loss/val",
    ("eval", "best_val_loss"): "loss/val_best",
    ("whole_val", "loss"): "loss/whole_val",
    ("train", "lr"): "optimizer/lr",
    ("train", "grad_norm"): "optimizer/grad_norm",  # before clipping; when clipping
    ("train", "tokens_per_s"): "speed/tokens_per_s",
}
SAMPLE_TAG = "sample"
SAMPLE_TOKENS = 64
SAMPLE_SETTINGS = SamplingSettings(temperature=0.8)
SAMPLE_SEED = 0  # the same draw at every evaluation: the samples differ by the weights only


def require_logger(log: str) -> None:
    """Refuse a logger whose package is not installed, before anything is trained."""
    if log == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
        raise UsageError("log 'tensorboard' needs the tensorboard package: "
                         "pip install 'gptlab[tensorboard]'")


def hparams(model_config: dict[str, Any], train_config: dict[str, Any]) -> dict[str, Any]:
    """The two configs as TensorBoard hyper-parameters: model/... and train/..., each a
    number, string or bool (None and nested values as their JSON). train_config: flat
    (TrainConfig.flat), so a lever reads train/muon_lr, as its flag and earlier runs name it."""
    out = {}
    for prefix, config in (("model", model_config), ("train", train_config)):
        for key, value in config.items():
            plain = isinstance(value, (bool, int, float, str))
            out[f"{prefix}/{key}"] = value if plain else json.dumps(value)
    return out


def sort_after_existing_files(log_dir: Path) -> None:
    """TensorBoard reads a directory's event files in name order, and a name starts with the
    second it was opened in: a file opened in the same second as another may sort before it
    (the names then differ by a counter compared as text, ".10" before ".9"), and its purge
    or its steps would be read out of order. Wait for the next second when that could be."""
    stamps = [int(p.name.split(".")[3]) for p in log_dir.glob("events.out.tfevents.*")
              if p.name.split(".")[3].isdigit()]
    wait = max(stamps, default=0) + 1 - time.time()
    if wait > 0:
        time.sleep(wait)


class TensorBoardReporter(Reporter):
    """Scalars (SCALAR_TAGS), a short seeded sample at each evaluation (text) and the run's
    configs (hyper-parameters), in a TensorBoard log directory (a run's tb/), through
    torch.utils.tensorboard.SummaryWriter.

    A resumed run (resumed_at: the checkpoint's step) writes a new event file that starts
    with a purge at resumed_at + 1: TensorBoard drops what an earlier process logged after
    that step, as the run directory's metrics.jsonl drops it (RunFiles.reset_metrics), so
    no step appears twice. The hyper-parameters are written once, by the run's first
    writer."""

    def __init__(self, log_dir: Path, params: dict[str, Any], tokenizer: Any,
                 resumed_at: int | None = None) -> None:
        # the `tensorboard` extra: SummaryWriter needs the tensorboard package
        from torch.utils.tensorboard import SummaryWriter, summary

        first = not any(log_dir.glob("events.out.tfevents.*"))
        self.tokenizer, self.log_dir = tokenizer, log_dir
        sort_after_existing_files(log_dir)
        self.writer = SummaryWriter(str(log_dir), purge_step=None if resumed_at is None
                                    else resumed_at + 1)
        if first:
            metrics = {tag: 0.0 for tag in ("loss/val", "loss/val_best", "loss/whole_val")}
            for part in summary.hparams(params, metrics):
                self.writer.file_writer.add_summary(part)

    def close(self) -> None:
        self.writer.close()  # a later write (whole_val) opens a new event file

    def step(self, record: dict[str, Any] | None) -> None:
        if record is not None:
            self._scalars(record)

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        self._scalars(record)
        text = self.sample(model)
        if text is not None:
            self.writer.add_text(SAMPLE_TAG, markdown_block(text), record["step"])
        self.writer.flush()

    def whole_val(self, record: dict[str, Any]) -> None:
        sort_after_existing_files(self.log_dir)  # the writer was closed: a new file opens
        self._scalars(record)
        self.writer.close()

    def _scalars(self, record: dict[str, Any]) -> None:
        for (kind, key), tag in SCALAR_TAGS.items():
            if record.get("kind") == kind and key in record:
                self.writer.add_scalar(tag, record[key], record["step"])

    def sample(self, model: nn.Module) -> str | None:
        """SAMPLE_TOKENS tokens after the default prompt, seeded; None for a model sharded
        across processes (this one alone cannot run it)."""
        if any(hasattr(p, "device_mesh") for p in model.parameters()):  # a DTensor
            return None
        encode, decode = self.tokenizer.encode, self.tokenizer.decode
        return generate_text(model, encode, decode, default_prompt(encode, decode),
                             SAMPLE_TOKENS, SAMPLE_SETTINGS,
                             generator=torch.Generator().manual_seed(SAMPLE_SEED))


def markdown_block(text: str) -> str:
    """text as TensorBoard's text plugin shows it verbatim: a fenced block (the plugin
    reads Markdown, which would join lines and eat symbols)."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"
