"""What checking the weights' checksum costs a load, against the same load unchecked.

gptlab records the sha256 of a weights file's tensors in its header (gptlab.model_dir) and
checks it on every load; the shipped model's files are checked against its manifest
(gptlab.pretrained). Contenders, timed in interleaved turns in this process:

  gpt2-small, checked     model_dir.load_model of a GPT-2-small-sized random model (124M
                          parameters, 498 MB fp32) whose header records the checksum
  gpt2-small, unchecked   the same weights in a file without it (as written before it)
  shipped, checked        model_dir.load_model(pretrained.verified("shakespeare")), as
                          gptlab.load("shakespeare") reads it: the manifest's sha256 of
                          its three files, then the model (2.7M parameters, 5.4 MB float16)
  shipped, unchecked      model_dir.load_model of the same folder, no check at all

    python -m bench.checksum_load [--reps 7] [--out bench/results]

The claim is the ratio of medians, checked / unchecked, per model; the hash alone (sha256
of the tensors' bytes) is timed too.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.common import interleaved, median, setup_threads, table, write_result
from gptlab import model_dir
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.pretrained import folder, verified


def _unchecked_copy(source: Path, target: Path) -> None:
    """target: source's config and weights, the header without the checksum."""
    from safetensors.torch import load_file, save_file

    target.mkdir()
    (target / model_dir.CONFIG_FILE).write_bytes((source / model_dir.CONFIG_FILE).read_bytes())
    save_file(load_file(str(source / model_dir.WEIGHTS_FILE)),
              str(target / model_dir.WEIGHTS_FILE), metadata={"format": "pt"})


def run(reps: int, out_dir: Path | None, log: Callable[[str], None] = print
        ) -> dict[str, Any]:
    setup_threads()
    with tempfile.TemporaryDirectory() as root:
        checked, unchecked = Path(root) / "checked", Path(root) / "unchecked"
        torch.manual_seed(0)
        model_dir.save_model(GPT(GPTConfig.from_preset("gpt2")), checked)
        _unchecked_copy(checked, unchecked)
        state = model_dir.weights_state(model_dir.load_model(checked))
        shipped = folder("shakespeare")
        contenders = {
            "gpt2-small, checked": lambda: model_dir.load_model(checked),
            "gpt2-small, unchecked": lambda: model_dir.load_model(unchecked),
            "gpt2-small, the hash alone": lambda: model_dir.tensors_sha256(state),
            "shipped, checked": lambda: model_dir.load_model(verified("shakespeare")),
            "shipped, unchecked": lambda: model_dir.load_model(shipped),
        }
        times = interleaved(contenders, reps=reps, warmup=1)
    medians = {name: median(ts) for name, ts in times.items()}
    ratios = {model: medians[f"{model}, checked"] / medians[f"{model}, unchecked"]
              for model in ("gpt2-small", "shipped")}
    log(f"load with and without the checksum, median of {reps} interleaved runs")
    log(table(["contender", "median s", "min s", "max s"],
              [[name, medians[name], min(ts), max(ts)] for name, ts in times.items()]))
    for model, ratio in ratios.items():
        log(f"{model}: checked / unchecked {ratio:.3f}")
    data = {"reps": reps, "median_s": medians, "times_s": times,
            "ratio_checked_over_unchecked": ratios}
    if out_dir is not None:
        write_result(out_dir, "checksum_load", data)
    return data


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.checksum_load",
                                description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=7, help="timed loads of each (default 7)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    run(args.reps, args.out)


if __name__ == "__main__":
    main()
