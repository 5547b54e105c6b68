"""Measurements taken on a model while it trains, for experiments that ask how training
behaves rather than only where it ends: gradient norms by group of weights, and how peaked
each head's attention is.

Each is taken on one fixed probe batch (the start of the validation split), so two runs, or
two steps of one run, are measured on the same tokens; gradients come from
torch.autograd.grad, which leaves the trainer's .grad untouched, and nothing here draws a
random number: a run trains exactly as it would unprobed.

    trained = train_probed(out, "norm", size, data, make_specs, measure, progress, log)
    measure(model, x, y) -> {...}   # each run, at every evaluation, step 0 included
    read_probes(run_dir) -> [{"step": 0, ...}, ...]

The experiments that probe (norm, scale) share their sizes' shape (ProbedSize), the way
they train (train_probed) and the head of their results (results_head).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch
from torch import Tensor, nn

from gptlab.data.prepared import load_data
from gptlab.errors import UsageError
from gptlab.experiments import report
from gptlab.experiments.grid import Grid, RunRecord, RunSpec, open_experiment
from gptlab.experiments.units import seed_list
from gptlab.model.config import GPTConfig
from gptlab.training.callbacks import Callbacks
from gptlab.training.config import TrainConfig, recipe
from gptlab.training.reporting import RunReporter
from gptlab.training.rundir import RunFiles

RECIPE = "shakespeare-char-cpu-fast"  # AdamW, cosine decay to min_lr, clipping at 1.0
PROBES_FILE = "probes.jsonl"  # one record per evaluation step, in the run directory
SATURATED = 0.99  # a softmax row is saturated when its largest weight exceeds this


def probe_batch(data_dir: str | Path, block_size: int, rows: int) -> tuple[Tensor, Tensor]:
    """(x, y), each (rows, block_size): consecutive windows from the start of the
    validation split, y shifted by one."""
    val = load_data(data_dir).val
    need = rows * block_size + 1
    if len(val) < need:
        raise UsageError(f"the validation split has {len(val)} tokens; the probe needs {need}")
    tokens = torch.from_numpy(np.asarray(val[:need], dtype=np.int64))
    x = tokens[:-1].view(rows, block_size)
    y = tokens[1:].view(rows, block_size)
    return x, y


def gradients(model: nn.Module, x: Tensor, y: Tensor, params: Sequence[Tensor]
              ) -> list[Tensor]:
    """d loss / d p for each p of params, the model in eval mode (no dropout), without
    touching any p.grad."""
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            _, loss = model(x, y)
            return list(torch.autograd.grad(loss, list(params), allow_unused=True))
    finally:
        model.train(was_training)


def norm(tensors: Sequence[Tensor | None]) -> float:
    """The L2 norm of several tensors taken as one vector (None counts as zeros)."""
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors if t is not None))


def norm_of(values: Sequence[float]) -> float:
    """Per-part norms (of layers, say) combined into the norm of the whole."""
    return math.sqrt(math.fsum(v * v for v in values))


def layer_grad_norms(model: nn.Module, x: Tensor, y: Tensor) -> list[float]:
    """The gradient norm of each block's weights (attention, MLP and its norms), block 0
    first: Xiong et al. 2020's per-layer gradient norm."""
    blocks = list(model.blocks)
    params = [list(block.parameters()) for block in blocks]
    grads = gradients(model, x, y, [p for group in params for p in group])
    out, i = [], 0
    for group in params:
        out.append(norm(grads[i:i + len(group)]))
        i += len(group)
    return out


def qk_grad_norms(model: nn.Module, x: Tensor, y: Tensor) -> list[float]:
    """Per block, the gradient norm reaching the query and key weights: the rows of the
    fused qkv projection (and bias) that make q and k."""
    attns = [block.attn for block in model.blocks]
    params = [p for a in attns for p in a.qkv.parameters()]
    grads = dict(zip(map(id, params), gradients(model, x, y, params), strict=True))
    out = []
    for attn in attns:
        rows = attn.n_head * attn.head_dim + attn.n_kv_head * attn.head_dim  # q, then k
        out.append(norm([grads[id(p)][:rows] for p in attn.qkv.parameters()
                         if grads[id(p)] is not None]))
    return out


@torch.no_grad()
def attention_stats(model: nn.Module, x: Tensor) -> dict[str, list[list[float]]]:
    """Per block and head: the mean entropy (nats) of the attention rows and the share of
    rows whose largest weight exceeds SATURATED. The first query is left out: it has one
    key to attend, so its row is always one-hot."""
    attns = [block.attn for block in model.blocks]
    was_training = model.training
    model.eval()
    for a in attns:
        a.record_weights = True
    try:
        model(x)
        weights = [a.weights for a in attns]  # each (B, nh, T, T)
    finally:
        for a in attns:
            a.record_weights, a.weights = False, None
        model.train(was_training)
    entropy, saturated = [], []
    for w in weights:
        rows = w[:, :, 1:, :].double()  # (B, nh, T-1, T)
        h = -(rows * torch.log(rows.clamp_min(1e-300))).sum(-1)  # 0 log 0 = 0
        entropy.append(h.mean(dim=(0, 2)).tolist())
        saturated.append((rows.amax(-1) > SATURATED).double().mean(dim=(0, 2)).tolist())
    return {"entropy": entropy, "saturated": saturated}


class ProbeReporter(RunReporter):
    """The run's ordinary reporter (metrics.jsonl, loss.png, drawn once at the end), and at
    every evaluation `probe(model)`'s record, with the step, appended to PROBES_FILE."""

    def __init__(self, files: RunFiles, probe: Callable[[nn.Module], dict[str, Any]],
                 progress: bool = False) -> None:
        super().__init__(files, progress=progress, plot_each_eval=False)
        self.probe, self.path = probe, files.run_dir / PROBES_FILE

    def open(self, total: int, initial: int) -> None:
        super().open(total, initial)
        if initial == 0:  # a fresh run: nothing of an earlier one stays
            self.path.unlink(missing_ok=True)

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        super().evaluation(record, model, improved)
        with self.path.open("a") as f:
            f.write(json.dumps({"step": record["step"], **self.probe(model)}) + "\n")


class Probed(Callbacks):
    """A training whose reporter is a ProbeReporter with probe(model)."""

    def __init__(self, probe: Callable[[nn.Module], dict[str, Any]]) -> None:
        self.probe = probe

    def make_reporter(self, files: RunFiles, progress: bool) -> ProbeReporter:
        return ProbeReporter(files, self.probe, progress=progress)


def probed_grid(folder: Path, data_dir: Path, block_size: int, rows: int,
                measure: Callable[[nn.Module, Tensor, Tensor], dict[str, Any]]) -> Grid:
    """A grid whose every run is probed at each evaluation by measure(model, x, y) on the
    probe batch (probe_batch), and keeps a run that diverged as a result."""
    x, y = probe_batch(data_dir, block_size, rows)

    def probe(model: nn.Module) -> dict[str, Any]:
        return measure(model, x, y)

    return Grid(folder, data_dir, keep_diverged=True, callbacks=Probed(probe))


def read_probes(run_dir: str | Path) -> list[dict[str, Any]]:
    """A run's probe records by step (a resumed run's repeat of a step: the later one)."""
    path = Path(run_dir) / PROBES_FILE
    if not path.is_file():
        return []
    by_step = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            by_step[record["step"]] = record
    return [by_step[s] for s in sorted(by_step)]


# ------------------------------------------------------------- the experiments that probe


@dataclass(frozen=True, kw_only=True)
class ProbedSize:
    """How big a probed experiment is: the models' shared fields, each run's training and
    the probe. Each experiment adds its grid's axes."""

    name: str
    model: dict[str, Any]  # GPTConfig fields the grid does not vary (vocab_size: the data's)
    steps: int
    batch_size: int
    seeds: int  # seeds per cell: seed, seed + 1, ...
    warmup: int  # warm-up steps (of the runs with warm-up)
    evals: int = 8  # evaluations (and probes) after step 0
    eval_iters: int = 4
    probe_rows: int = 8  # windows of block_size in the probe batch

    def with_steps(self, steps: int | None) -> Self:
        """This size at another length, its warm-up at most a fifth of it."""
        if steps is None:
            return self
        return replace(self, steps=steps, warmup=min(self.warmup, max(1, steps // 5)))

    def settings(self, seed: int, **changes: Any) -> TrainConfig:
        """RECIPE at this size's length, batch, warm-up and evaluations, float32, with
        `changes` (a grid's learning rate, say)."""
        return recipe(RECIPE, **{
            "max_iters": self.steps, "batch_size": self.batch_size,
            "warmup_iters": self.warmup, "seed": seed,
            "eval_interval": max(1, self.steps // self.evals), "eval_iters": self.eval_iters,
            "log_interval": max(1, self.steps // 50), "whole_val": False, "dtype": "float32",
            **changes})


def grid_specs(size: ProbedSize, seed: int, cells: Sequence[dict[str, Any]],
               name: Callable[[dict[str, Any], int], str],
               model: Callable[[dict[str, Any]], GPTConfig],
               changes: Callable[[dict[str, Any]], dict[str, Any]] = lambda cell: {}
               ) -> list[RunSpec]:
    """One run per cell and seed: name(cell, seed), model(cell), and size.settings with
    changes(cell)."""
    return [RunSpec(name(cell, s), model(cell), size.settings(s, **changes(cell)))
            for cell in cells for s in seed_list(seed, size.seeds)]


@dataclass
class Trained:
    """A probed grid, trained: its folder, data, runs (each measured) and the time it
    took."""

    folder: Path
    data_dir: Path
    records: dict[str, RunRecord]
    runs: dict[str, dict[str, Any]]
    timer: report.Timer


def train_probed(out: str | Path, name: str, size: ProbedSize, data: str | Path | None,
                 make_specs: Callable[[int], list[RunSpec]],
                 probe: Callable[[nn.Module, Tensor, Tensor], dict[str, Any]],
                 measure: Callable[[RunRecord], dict[str, Any]],
                 progress: bool, log: Callable[[str], None]) -> Trained:
    """Open experiment `name`'s folder, train (or reuse) the runs make_specs(vocab_size)
    on `data` (default: the embedded Shakespeare in OUT/data), each probed by probe at
    every evaluation, then measure each run from its directory."""
    timer = report.Timer()
    folder, data_dir = open_experiment(out, name, data, log)
    grid = probed_grid(folder, data_dir, size.model["block_size"], size.probe_rows, probe)
    records = grid.train(make_specs(load_data(data_dir).vocab_size), progress, log)
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    runs = {run: {**r.to_dict(folder), **measure(r)} for run, r in records.items()}
    return Trained(folder, data_dir, records, runs, timer)


def results_head(name: str, size: ProbedSize, seed: int, trained: Trained) -> dict[str, Any]:
    """What every probed experiment's results.json starts with (its runs included)."""
    return {"experiment": name, "size": size.name, "model": size.model, "recipe": RECIPE,
            "steps": size.steps, "batch_size": size.batch_size, "warmup": size.warmup,
            "seeds": seed_list(seed, size.seeds), "data": Path(trained.data_dir).name,
            "probe": {"rows": size.probe_rows,
                      "tokens": size.probe_rows * size.model["block_size"],
                      "from": "the start of the validation split"},
            "runs": trained.runs}
