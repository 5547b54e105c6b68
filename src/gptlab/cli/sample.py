"""`gptlab sample`: text from a run directory or a model directory, streamed as it comes."""

from __future__ import annotations

import argparse
import sys
import warnings

from gptlab.cli import argtypes
from gptlab.cli.main import warned
from gptlab.errors import UsageError
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from gptlab.inference.formats import WEIGHT_CHOICES

SEPARATOR = "-" * 40


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sample",
        help="generate text from a trained model",
        description=(
            "Generate text from RUN_DIR: a run directory from `gptlab train` (its latest "
            "weights; RUN_DIR/best for the best ones), any model directory holding "
            f"{CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE} (what `gptlab convert` "
            "writes), or the model gptlab ships, by name: shakespeare. Text streams to stdout "
            "as tokens arrive. Decoding uses a KV cache; "
            "past the model's context (its block_size, or --context) the oldest half is "
            "dropped and decoding goes on. "
            "In --prompt and --stop, \\n, \\t, \\r and \\\\ stand for a newline, a tab, "
            "a carriage return and a backslash; other backslashes are kept as typed."
        ),
        examples=[
            "gptlab sample runs/demo --prompt 'ROMEO:' --seed 1",
            "gptlab sample runs/demo/best --greedy --max-new-tokens 50 --stop '\\n\\n'",
            "gptlab sample openai-community/gpt2 --prompt 'Hello' --top-p 0.9 --weights auto",
        ],
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help=argtypes.MODEL_HELP)
    p.add_argument("--prompt", type=argtypes.escaped_text, metavar="TEXT",
                   help="text to continue (default: a newline, or the vocabulary's first "
                        "token if it has no newline); a prompt longer than the context is "
                        "cropped from the left, with a warning")
    p.add_argument("--max-new-tokens", type=argtypes.int_in(0), default=500, metavar="N",
                   help="tokens to generate (default 500)")
    p.add_argument("--temperature", type=argtypes.finite_float, default=0.8, metavar="TEMP",
                   help="below 1 sharper, above 1 flatter (default 0.8; 0 means greedy)")
    p.add_argument("--top-k", type=int, metavar="K", help="sample from the K likeliest tokens")
    p.add_argument("--top-p", type=argtypes.finite_float, metavar="P",
                   help="sample from the smallest set of tokens with probability >= P")
    p.add_argument("--greedy", action="store_true", help="always the likeliest token")
    p.add_argument("--seed", type=argtypes.seed, metavar="S",
                   help="make the samples reproducible (0 to 2**64 - 1)")
    p.add_argument("--num-samples", type=argtypes.int_in(1), default=1, metavar="N",
                   help="samples to draw (default 1)")
    p.add_argument("--stop", type=argtypes.nonempty_escaped_text, action="append", default=[],
                   metavar="STR",
                   help="end a sample where STR appears (not printed); repeat for several")
    p.add_argument("--no-prompt", action="store_true",
                   help="print only the generated text, not the prompt before it")
    p.add_argument("--weights", choices=WEIGHT_CHOICES, default="fp32",
                   help="the matrices' format for decoding: fp32 (default, as trained), fp16, "
                        "bf16, int8 (per-channel) or auto (the fastest of them on this "
                        "machine). A short probe, cached per machine, picks each format's "
                        "fastest kernel (a line on stderr says when it runs; on a busy "
                        "machine none runs and the format's first kernel is used); for a "
                        "format other than fp32, stderr says what it chose and why")
    p.add_argument("--context", type=argtypes.int_in(1), metavar="N",
                   help="tokens the model sees at once (default its block_size; longer runs "
                        "it at positions it never saw, with a warning; learned positions "
                        "refuse)")
    p.add_argument("--rope-scaling", type=argtypes.rope_scaling, metavar="KIND:F",
                   help="stretch RoPE at inference time: linear:F, ntk:F, yarn:F or "
                        "dynamic:F (see gptlab eval --help)")
    p.add_argument("--device", default="auto",
                   help="auto (default: cuda if there is one, else cpu), cpu, cuda, cuda:N, mps")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.prompt == "":
        raise UsageError("the prompt is empty: give at least one character")
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import torch

    from gptlab import probe
    from gptlab.distributed.process import pick_device
    from gptlab.inference.quantize import quantize
    from gptlab.inference.sampling import default_prompt, generate_text
    from gptlab.loading import load
    from gptlab.model.decoding import SamplingSettings

    temperature = 0.0 if args.greedy else args.temperature
    settings = SamplingSettings(temperature, args.top_k, args.top_p)
    device = pick_device(args.device)
    with warned("gptlab sample"):
        model, tokenizer = load(args.run_dir, device=device, context=args.context,
                                rope_scaling=args.rope_scaling)
    with probe.announced(lambda line: print(f"gptlab sample: {line}", file=sys.stderr)):
        choice = quantize(model, args.weights)  # what gptlab.load(weights=) does, said
    if args.weights != "fp32":
        print(f"gptlab sample: {choice.reason}", file=sys.stderr)
    prompt = args.prompt
    if prompt is None:
        prompt = default_prompt(tokenizer.encode, tokenizer.decode)
    if not tokenizer.encode(prompt):  # unknown characters: one clear error before any output
        raise UsageError(f"the prompt {prompt!r} encodes to no tokens")
    generator = torch.Generator(device=device)
    if args.seed is not None:
        generator.manual_seed(args.seed)
    else:
        generator.seed()
    out = sys.stdout

    def write(piece: str) -> None:
        out.write(piece)
        out.flush()

    for i in range(args.num_samples):
        if i:
            write(f"\n{SEPARATOR}\n")
        if not args.no_prompt:
            write(prompt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            generate_text(model, tokenizer.encode, tokenizer.decode, prompt,
                          args.max_new_tokens, settings, stop=args.stop, generator=generator,
                          on_text=write)
        for w in caught:
            if i == 0:
                print(f"gptlab sample: warning: {w.message}", file=sys.stderr)
    write("\n")
    return 0
