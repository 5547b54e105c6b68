"""Run under torchrun by tests/distributed/conftest.py: everything that needs 2 ranks, in one
launch.

argv: ROOT (holding data/, model.json and common.json, the training settings every run
shares, from the test) then MODE:TP items. For each item
it trains 20 steps into ROOT/MODE-TP-full, 10 steps into ROOT/MODE-TP-half (the schedule
of the 20-step run) and resumes a copy of that to 20 in ROOT/MODE-TP-resumed, all on these
ranks; fsdp's half run is also resumed to 15 under `--parallel tp --tp 2`
(ROOT/fsdp-1-moved), for the test to finish on one process. First it writes
ROOT/bytes-RANK.json: for each sharded mode, the local shard bytes after one training step
of a SwiGLU model with biases (gptlab.distributed.parallelize.local_bytes),
how far its first loss and its gradients (gathered, in the ordinary layout) are from the
unsharded model's on the whole batch, and whether the sharded model's config and attention
modules still say what the config said before (tensor parallel cuts weights, not settings).
Every warning a rank meets in the whole launch goes to ROOT/warnings-RANK.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import TrainConfig
from gptlab.training.run import train
from gptlab.training.rundir import RunFiles


def measure_bytes(root: Path, config: GPTConfig, layouts: list[tuple[str, int]]) -> None:
    from gptlab.distributed import parallelize
    from gptlab.distributed.layout import plan_layout
    from gptlab.distributed.process import Dist
    from gptlab.training.optim import make_optimizer

    rank = int(os.environ["RANK"])
    out = {}
    for mode, tp in layouts:
        torch.manual_seed(0)
        model = GPT(config)
        x = torch.randint(0, config.vocab_size, (4, config.block_size),
                          generator=torch.Generator().manual_seed(1))
        loss = model(x, x)[1]
        loss.backward()
        whole_loss = loss.item()
        whole_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        ctx = Dist(rank, rank, dist.get_world_size(), torch.device("cpu"))
        layout = plan_layout(mode, tp, ctx.world_size, config)
        before = config.to_dict()
        parallelize.parallelize(model, layout, parallelize.build_mesh(layout, ctx))
        heads = {(b.attn.n_head, b.attn.n_kv_head) for b in model.blocks}
        config_kept = (model.config.to_dict() == before
                       and heads == {(before["n_head"], before["n_kv_head"])})
        optimizer = make_optimizer(model, TrainConfig(), ctx.device)
        rows = x.chunk(layout.dp)[ctx.rank // layout.tp]  # this rank's rows of the batch
        loss = model(rows, rows)[1]
        loss.backward()
        grads = parallelize.fused_weights({  # every rank gathers each gradient, in turn
            n: p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            for n, p in model.named_parameters()})
        grad_diff = max((grads[n] - g).abs().max().item() for n, g in whole_grads.items())
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        out[f"{mode}:{tp}"] = {"dp": layout.dp, "tp": layout.tp, "config_kept": config_kept,
                               "loss_diff": abs(mean.item() / ctx.world_size - whole_loss),
                               "grad_diff": grad_diff,
                               **parallelize.local_bytes(model, optimizer)}
    (root / f"bytes-{rank}.json").write_text(json.dumps(out))


def main() -> None:
    root = Path(sys.argv[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_everything(root)
    seen = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    (root / f"warnings-{os.environ['RANK']}.json").write_text(json.dumps(seen, indent=1))


def train_everything(root: Path) -> None:
    RunFiles.plot = lambda self: None  # loss.png costs seconds per evaluation; not tested here
    dist.init_process_group("gloo")  # one group for every training below
    config = GPTConfig.from_json(root / "model.json")
    common = json.loads((root / "common.json").read_text())
    items = [(m, int(t)) for m, t in (a.split(":") for a in sys.argv[2:])]
    swiglu = {**config.to_dict(), "vocab_size": 30, "mlp": "swiglu", "bias": True,
              "norm": "rmsnorm", "pos_encoding": "rope", "tie_embeddings": False}
    measure_bytes(root, GPTConfig.from_dict(swiglu),
                  [("fsdp", 1), ("tp", 2), ("fsdp+tp", 2), ("fsdp+tp", 1)])
    rank = int(os.environ["RANK"])
    for mode, tp in items:
        name = f"{mode}-{tp}"
        rows = 1 if mode == "tp" else 2 // tp  # data-parallel ranks: the global batch is 8
        settings = dict(common, parallel=mode, tp=tp if mode != "ddp" else None,
                        batch_size=8 // rows)
        train(config, TrainConfig(max_iters=20, **settings), root / "data",
              root / f"{name}-full", progress=False)
        train(config, TrainConfig(max_iters=10, **settings), root / "data",
              root / f"{name}-half", progress=False)
        if rank == 0:  # the half run stays as it is, for the test to resume on one process
            shutil.copytree(root / f"{name}-half", root / f"{name}-resumed")
        dist.barrier()
        train(None, None, root / "data", root / f"{name}-resumed", resume=True,
              overrides={"max_iters": 20}, progress=False)
    if ("fsdp", 1) in items:  # the fsdp run moved to tensor parallel for 5 steps (issue 23)
        if rank == 0:
            shutil.copytree(root / "fsdp-1-half", root / "fsdp-1-moved")
        dist.barrier()
        train(None, None, root / "data", root / "fsdp-1-moved", resume=True,
              overrides={"max_iters": 15, "parallel": "tp", "tp": 2}, progress=False)


if __name__ == "__main__":
    main()
