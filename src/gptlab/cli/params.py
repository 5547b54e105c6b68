"""`gptlab params`: parameters, FLOPs and memory of a preset or config (see gptlab.model.params)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.distributed.memory import per_rank_memory
from gptlab.errors import GptlabError
from gptlab.model.config import GPTConfig
from gptlab.model.params import accounting, human_bytes, meta_parameter_count
from gptlab.model.presets import PRESETS

# More ranks than any job has run on; a number past it is a typo, not a plan.
MAX_RANKS = 1 << 20


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "params",
        help="count parameters, FLOPs per token and memory of a model",
        description=(
            "Count a model's parameters part by part, its FLOPs per token and its memory "
            "(weights, AdamW training state, KV cache), from the config alone: nothing is "
            "allocated, so 70B models answer at once. MODEL is a preset "
            f"({', '.join(PRESETS)}), a config JSON file, or anything gptlab.load takes "
            "(a run or model directory, a Hugging Face directory or hub name: only its "
            "config.json is read)."
        ),
        examples=[
            "gptlab params gpt2",
            "gptlab params llama2-7b --fsdp 4 --tp 2",
            "gptlab params runs/demo --json",
        ],
    )
    p.add_argument("model", metavar="MODEL",
                   help="a preset name, a config JSON file, a run or model directory, a "
                        "Hugging Face directory or hub name")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the table (memory in bytes)")
    p.add_argument("--seq-len", type=argtypes.int_in(1), metavar="N",
                   help="context length for the attention FLOPs and the full KV cache "
                        "(default: the config's block_size)")
    p.add_argument("--check", action="store_true",
                   help="also build the model on PyTorch's meta device (no memory) and "
                        "check that it has exactly the counted parameters")
    p.add_argument("--fsdp", type=argtypes.int_in(1, MAX_RANKS), metavar="N",
                   help="also give the training memory per rank with FSDP over N ranks")
    p.add_argument("--tp", type=argtypes.int_in(1, MAX_RANKS), metavar="M",
                   help="... and tensor parallel over M ranks (gptlab train --parallel)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = model_config(args.model)
    acc = accounting(config, seq_len=args.seq_len, name=args.model)
    meta_count = None
    if args.check:
        meta_count = meta_parameter_count(config)
        if meta_count != acc.total:
            raise GptlabError(
                f"counting disagrees with the model: {acc.total:,} counted, "
                f"{meta_count:,} in GPT(config) on the meta device"
            )
    per_rank = None
    if args.fsdp is not None or args.tp is not None:
        per_rank = per_rank_memory(config, fsdp=1 if args.fsdp is None else args.fsdp,
                                   tp=1 if args.tp is None else args.tp)
    if args.json:
        out = acc.to_dict()
        if meta_count is not None:
            out["meta_device_params"] = meta_count
        if per_rank is not None:
            out["memory"]["training_per_rank"] = per_rank.to_dict()
        print(json.dumps(out, indent=2))
        return 0
    print(acc.table())
    if per_rank is not None:
        m, ranks = per_rank, per_rank.fsdp * per_rank.tp
        print(f"\ntraining memory per rank, fsdp {m.fsdp} x tp {m.tp} ({ranks} "
              f"rank{'s' if ranks > 1 else ''}; "
              f"the rank holding the most):\n"
              f"  weights {human_bytes(m.weights)}, grads {human_bytes(m.grads)}, AdamW "
              f"moments {human_bytes(m.optimizer)}: {human_bytes(m.total)} "
              f"(fp32; activations and FSDP's gathered block excluded)")
    if meta_count is not None:
        print(f"\nmeta-device check: GPT(config) has {meta_count:,} parameters, as counted")
    return 0


def model_config(name: str) -> GPTConfig:
    """The config MODEL names: a preset or a config JSON file, else the model gptlab.load
    would load there (its config.json only; a hub model's is fetched without weights). A
    bare word that is no preset and no shipped model stays a preset error, listing the
    presets. No torch is loaded but for a Hugging Face model (transformers reads its
    config)."""
    # start-up time: read where MODEL is a name or a path, not for --help (torch-free)
    from gptlab.model_dir import resolve_config
    from gptlab.pretrained import is_shipped

    path = Path(name)
    if not name.strip() or name in PRESETS or name.endswith(".json") or path.is_file() or (
            "/" not in name and not path.is_dir() and not is_shipped(name)):
        return resolve_config(name)
    from gptlab.loading import config_of  # start-up time: as above

    return config_of(name)
