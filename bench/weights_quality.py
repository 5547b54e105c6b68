"""What each decoding weight format costs in quality, on a trained run: the loss over the
whole val split (gptlab.inference.evaluate's sliding windows, as `gptlab eval`) and greedy-token
agreement with plain fp32, for every format `gptlab sample --weights` can pick.

    gptlab demo                                   # trains runs/demo on runs/demo-data
    python -m bench.weights_quality runs/demo --data runs/demo-data
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import setup_threads, table, write_result
from gptlab.data.prepared import load_data
from gptlab.inference import quantize
from gptlab.inference.evaluate import score_ids
from gptlab.loading import load

# Each format's numerics (a layout changes none): what `--weights` can pick.
KERNELS = ("nn.Linear", "fp16/linear", "bf16/linear", "int8/bf16_input", "int8/dynamic")
PROMPTS = 8  # greedy continuations from this many places in the val split
NEW_TOKENS = 100


def measure(run: Path, data: Path, log=print) -> dict[str, Any]:
    val = torch.from_numpy(load_data(data).val.astype("int64"))
    starts = np.linspace(0, len(val) - 65, PROMPTS).astype(int)
    prompts = torch.stack([val[s : s + 32] for s in starts])
    rows, reference = [], None
    for kernel in KERNELS:
        model, _ = load(run)
        if kernel != "nn.Linear":
            quantize._swap(model, kernel)
        t = time.perf_counter()
        nll, scored = score_ids(model, val)
        eval_s = time.perf_counter() - t
        tokens = model.generate(prompts, NEW_TOKENS, top_k=1)[:, 32:]
        if reference is None:
            reference = {"loss": nll / scored, "tokens": tokens}
        rows.append({"kernel": kernel, "eval_s": eval_s,
                     "val_loss": nll / scored, "tokens_scored": scored,
                     "vs_fp32": (nll / scored) / reference["loss"] - 1,
                     "greedy_agree": float((tokens == reference["tokens"]).float().mean())})
        log(f"{kernel}: whole-val {nll / scored:.4f} ({eval_s:.0f} s)")
    log(table(["kernel", "whole-val loss", "vs plain fp32", "greedy tokens agree"],
              [[r["kernel"], f"{r['val_loss']:.4f}", f"{r['vs_fp32']:+.3%}",
                f"{r['greedy_agree']:.1%}"] for r in rows]))
    return {"size": "full", "run": str(run), "val_tokens": int(len(val)),
            "prompts": PROMPTS, "new_tokens": NEW_TOKENS, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    setup_threads()
    write_result(args.out, "weights_quality", measure(args.run, args.data))


if __name__ == "__main__":
    main()
