"""`gptlab params`: parameters, FLOPs and memory of a preset or config (see gptlab.params)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gptlab.config import GPTConfig
from gptlab.errors import GptlabError, UsageError
from gptlab.hf import is_hf_dir
from gptlab.params import accounting, meta_parameter_count
from gptlab.presets import PRESETS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "params",
        help="count parameters, FLOPs per token and memory of a model",
        description=(
            "Count a model's parameters part by part, its FLOPs per token and its memory "
            "(weights, AdamW training state, KV cache), from the config alone: nothing is "
            "allocated, so 70B models answer at once. NAME_OR_JSON is a preset "
            f"({', '.join(PRESETS)}), a config JSON file, or a run directory holding "
            "config.json."
        ),
    )
    p.add_argument("model", metavar="NAME_OR_JSON",
                   help="a preset name, a config JSON path or a run directory")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the table (memory in bytes)")
    p.add_argument("--seq-len", type=int, metavar="N",
                   help="context length for the attention FLOPs and the full KV cache "
                        "(default: the config's block_size)")
    p.add_argument("--check", action="store_true",
                   help="also build the model on PyTorch's meta device (no memory) and "
                        "check that it has exactly the counted parameters")
    p.set_defaults(func=run)


def load_config(name_or_path: str) -> GPTConfig:
    """A preset, a config JSON file, or a run directory's config.json."""
    if not name_or_path.strip():
        raise UsageError("give a preset name, a config JSON file or a run directory")
    path = Path(name_or_path)
    if name_or_path not in PRESETS and "/" in name_or_path and not path.exists():
        raise UsageError(f"not found: {name_or_path} (nor is it a preset name)")
    if name_or_path not in PRESETS and path.is_dir():
        if is_hf_dir(path):
            raise UsageError(f"{name_or_path} is a Hugging Face model directory; convert it "
                             "first (gptlab convert --from-hf)")
        path = path / "config.json"
        if not path.is_file():
            raise UsageError(f"{name_or_path} is a directory without a config.json")
        name_or_path = str(path)
    try:
        return GPTConfig.resolve(name_or_path)
    except OSError as exc:  # unreadable, a directory named *.json, ...
        raise UsageError(f"cannot read {name_or_path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    config = load_config(args.model)
    acc = accounting(config, seq_len=args.seq_len, name=args.model)
    meta_count = None
    if args.check:
        meta_count = meta_parameter_count(config)
        if meta_count != acc.total:
            raise GptlabError(
                f"counting disagrees with the model: {acc.total:,} counted, "
                f"{meta_count:,} in GPT(config) on the meta device"
            )
    if args.json:
        out = acc.to_dict()
        if meta_count is not None:
            out["meta_device_params"] = meta_count
        print(json.dumps(out, indent=2))
        return 0
    print(acc.table())
    if meta_count is not None:
        print(f"\nmeta-device check: GPT(config) has {meta_count:,} parameters, as counted")
    return 0
