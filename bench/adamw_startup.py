"""Which torch.optim.AdamW implementation a CPU run should use: fused, foreach or for-loop.

Two costs, for the demo model (preset and recipe shakespeare-char-cpu: batch 12, block 64,
AdamW on every parameter) and the speedrun model (shakespeare-char-cpu-speedrun: batch 32,
Muon on the hidden matrices and AdamW on the rest):

(a) start-up: a fresh process per implementation, timed from its launch to the end of its
    first optimizer step (import torch, build the model and the optimizer as the trainer
    does, one forward and backward, one step), in interleaved rounds; the child also
    reports where the time went, and whether torch._dynamo was imported and by what;
(b) steady state, in this process: ms per AdamW step alone (the same gradients each
    step) and ms per whole training step (forward, backward, clipping, the optimizer),
    over >= 200 steps each, implementations interleaved in blocks of 20 steps.

Medians throughout. Run it on a quiet machine:

    python -m bench.adamw_startup [--rounds 7] [--steps 240] [--out bench/results]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

import gptlab
from bench.common import median, setup_threads, table, write_result
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import recipe
from gptlab.training.optim import ADAMW_IMPLEMENTATIONS, make_optimizer

MODELS = {"demo": "shakespeare-char-cpu", "speedrun": "shakespeare-char-cpu-speedrun"}
THREADS = 2
BLOCK = 20  # steps of one implementation before the next one's turn
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(gptlab.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}

# One fresh process: launch -> the end of the first optimizer step. {preset} {impl} filled.
CHILD = """
import time
t0 = time.perf_counter()
import builtins, json, sys, traceback
first_dynamo = []
real_import = builtins.__import__

def spy(name, *args, **kwargs):
    if not first_dynamo and name.startswith("torch._dynamo") and "torch._dynamo" not in sys.modules:
        first_dynamo.append(" < ".join(f"{{f.filename.rsplit('/', 1)[-1]}}:{{f.name}}"
                                       for f in reversed(traceback.extract_stack()[-5:-1])))
    return real_import(name, *args, **kwargs)

builtins.__import__ = spy
import torch
torch.set_num_threads({threads})
t_torch = time.perf_counter()
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import recipe
from gptlab.training.optim import make_optimizer
torch.manual_seed(0)
model = GPT(GPTConfig.from_preset("{preset}"))
cfg = recipe("{preset}")
idx = torch.randint(model.config.vocab_size, (cfg.batch_size, model.config.block_size + 1))
t_model = time.perf_counter()
opt = make_optimizer(model, cfg, torch.device("cpu"), adamw="{impl}")
t_opt = time.perf_counter()
_, loss = model(idx[:, :-1], idx[:, 1:])
loss.backward()
t_backward = time.perf_counter()
opt.step()
t_step = time.perf_counter()
print(json.dumps({{"import_torch_s": t_torch - t0, "model_s": t_model - t_torch,
                  "optimizer_init_s": t_opt - t_model, "forward_backward_s": t_backward - t_opt,
                  "first_step_s": t_step - t_backward, "in_process_s": t_step - t0,
                  "dynamo_imported": "torch._dynamo" in sys.modules,
                  "dynamo_first_imported_in": first_dynamo[0] if first_dynamo else None}}),
      flush=True)
"""


def start_up(rounds: int, log=print) -> dict[str, Any]:
    """(a): per model and implementation, launch-to-first-step seconds over `rounds`."""
    runs: dict[str, dict[str, list[dict]]] = {m: {i: [] for i in ADAMW_IMPLEMENTATIONS}
                                               for m in MODELS}
    order = [(m, i) for m in MODELS for i in ADAMW_IMPLEMENTATIONS]
    for r in range(rounds):
        for model, impl in order if r % 2 == 0 else list(reversed(order)):
            code = CHILD.format(preset=MODELS[model], impl=impl, threads=THREADS)
            start = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                    env=ENV, text=True)
            line = proc.stdout.readline()
            wall = time.perf_counter() - start
            proc.wait()
            if proc.returncode != 0 or not line:
                raise RuntimeError(f"{model} {impl}: the child failed ({proc.returncode})")
            runs[model][impl].append({"launch_to_first_step_s": wall, **json.loads(line)})
        log(f"start-up round {r + 1}/{rounds} done")
    summary = {m: {i: {key: median([x[key] for x in xs]) for key in
                       ("launch_to_first_step_s", "import_torch_s", "optimizer_init_s",
                        "forward_backward_s", "first_step_s")}
                   | {"dynamo_first_imported_in": xs[0]["dynamo_first_imported_in"]}
                   for i, xs in per.items()} for m, per in runs.items()}
    return {"rounds": rounds, "median": summary, "runs": runs}


def _models(preset: str) -> tuple[GPT, Any, torch.Tensor]:
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset(preset))
    cfg = recipe(preset)
    idx = torch.randint(model.config.vocab_size, (cfg.batch_size, model.config.block_size + 1))
    return model, cfg, idx


def _adamw_alone(preset: str) -> dict[str, Any]:
    """Per implementation: a closure doing one AdamW step on the model's AdamW parameters
    (all of them, or the speedrun's non-Muon ones), the same gradients every step."""
    model, cfg, idx = _models(preset)
    _, loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    steps = {}
    for impl in ADAMW_IMPLEMENTATIONS:
        twin = copy.deepcopy(model)
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            q.grad = p.grad.clone()  # (deepcopy leaves them out)
        opt = make_optimizer(twin, cfg, torch.device("cpu"), adamw=impl)
        steps[impl] = getattr(opt, "adamw", opt).step  # MuonWithAdamW: its AdamW part
    return steps


def _train_steps(preset: str) -> dict[str, Any]:
    """Per implementation: a closure doing one whole training step as the trainer does."""
    model, cfg, idx = _models(preset)
    x, y = idx[:, :-1], idx[:, 1:]
    steps = {}
    for impl in ADAMW_IMPLEMENTATIONS:
        twin = copy.deepcopy(model)
        opt = make_optimizer(twin, cfg, torch.device("cpu"), adamw=impl)

        def step(twin=twin, opt=opt) -> None:
            _, loss = twin(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(twin.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)

        steps[impl] = step
    return steps


def _per_step_ms(calls: dict[str, Any], steps: int) -> dict[str, float]:
    """Median ms per call of each, timed call by call in blocks of BLOCK, order alternating."""
    for call in calls.values():
        for _ in range(3):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for block in range(-(-steps // BLOCK)):
        names = list(calls) if block % 2 == 0 else list(reversed(calls))
        for name in names:
            for _ in range(BLOCK):
                start = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - start)
    return {name: median(ts) * 1e3 for name, ts in times.items()} | {
        "steps": len(next(iter(times.values())))}


def steady_state(steps: int, log=print) -> dict[str, Any]:
    out = {}
    for model, preset in MODELS.items():
        out[model] = {"adamw_step_ms": _per_step_ms(_adamw_alone(preset), steps),
                      "train_step_ms": _per_step_ms(_train_steps(preset), steps)}
        log(f"steady state {model} done")
    return out


def run(out_dir: Path, rounds: int, steps: int, log=print) -> dict[str, Any]:
    setup_threads(THREADS)
    first = start_up(rounds, log)
    steady = steady_state(steps, log)
    rows = []
    for model in MODELS:
        for impl in ADAMW_IMPLEMENTATIONS:
            s = first["median"][model][impl]
            rows.append([model, impl, s["launch_to_first_step_s"], s["import_torch_s"],
                         s["optimizer_init_s"], s["first_step_s"],
                         steady[model]["adamw_step_ms"][impl],
                         steady[model]["train_step_ms"][impl]])
    log(f"AdamW implementations on CPU, {THREADS} threads: medians of {rounds} fresh "
        f"processes (seconds) and of {steps} steps (ms)")
    log(table(["model", "AdamW", "launch->1st step s", "import torch s", "optimizer init s",
               "1st step s", "AdamW step ms", "train step ms"], rows))
    dynamo = {m: {i: first["median"][m][i]["dynamo_first_imported_in"]
                  for i in ADAMW_IMPLEMENTATIONS} for m in MODELS}
    log(f"torch._dynamo first imported in: {dynamo}")
    data = {"threads": THREADS, "models": {m: dataclasses.asdict(recipe(p)) | {"preset": p}
                                           for m, p in MODELS.items()},
            "start_up": first, "steady_state": steady}
    write_result(out_dir, "adamw_startup", data)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.adamw_startup",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="fresh processes of each")
    parser.add_argument("--steps", type=int, default=240, help="timed steps of each")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    run(args.out, args.rounds, args.steps)


if __name__ == "__main__":
    main()
