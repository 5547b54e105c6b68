"""What each decoding weight format costs in quality, on a trained run: the loss over the
whole val split (gptlab.evaluate's sliding windows, as `gptlab eval`) and greedy-token
agreement with fp32, for `gptlab sample --weights fp32|fp16|bf16|int8|auto`.

    gptlab demo                                   # trains runs/demo on runs/demo-data
    python -m bench.weights_quality runs/demo --data runs/demo-data
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import setup_threads, table, write_result
from gptlab.data import load_data
from gptlab.evaluate import score_ids
from gptlab.loading import load
from gptlab.quantize import WEIGHT_CHOICES

PROMPTS = 8  # greedy continuations from this many places in the val split
NEW_TOKENS = 100


def measure(run: Path, data: Path, log=print) -> dict[str, Any]:
    val = torch.from_numpy(load_data(data).val.astype("int64"))
    starts = np.linspace(0, len(val) - 65, PROMPTS).astype(int)
    prompts = torch.stack([val[s : s + 32] for s in starts])
    rows, reference = [], None
    for weights in ("plain", *WEIGHT_CHOICES):
        model, _ = load(run, weights=None if weights == "plain" else weights)
        nll, scored = score_ids(model, val)
        tokens = model.generate(prompts, NEW_TOKENS, top_k=1)[:, 32:]
        if reference is None:
            reference = {"loss": nll / scored, "tokens": tokens}
        kernel = getattr(model, "decode_choice", None)
        rows.append({"weights": weights, "kernel": kernel.kernel if kernel else "nn.Linear",
                     "val_loss": nll / scored, "tokens_scored": scored,
                     "vs_fp32": (nll / scored) / reference["loss"] - 1,
                     "greedy_agree": float((tokens == reference["tokens"]).float().mean())})
    log(table(["weights", "kernel", "whole-val loss", "vs plain fp32", "greedy tokens agree"],
              [[r["weights"], r["kernel"], f"{r['val_loss']:.4f}", f"{r['vs_fp32']:+.3%}",
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
