"""`gptlab demo` (what `make demo` runs): prepare the embedded Shakespeare, train a small
model for a couple of minutes, print a sample and say where everything is."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gptlab import stopping
from gptlab.cli import argtypes
from gptlab.cli.train import timing
from gptlab.data.corpus import ensure_shakespeare
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.model.config import GPTConfig
from gptlab.training.callbacks import Callbacks
from gptlab.training.config import recipe

# The CPU speedrun's plain recipe (Muon + AdamW, cosine, untied head), its 600 steps
# stretched to 1000: the embedded corpus is 4x tiny Shakespeare, so the extra steps still
# find new text. About 90 s on 2 CPU cores in fp32, where nanoGPT's shape with AdamW at
# twice nanoGPT's rate takes as long (3000 steps of 12 rows) to reach a whole-val loss of
# 1.693 against this one's 1.565 (where --dtype auto picks bf16 with float32 attention,
# 1.5x faster for about +0.01). The 1.70 speedrun's preset reaches 1.585 at 1000 steps, and
# its options cannot be exported to Hugging Face or GGUF, which the README's tour does with
# this run.
PRESET = RECIPE = "shakespeare-char-cpu-speedrun"
DEMO_ITERS = 1000
EVAL_INTERVAL = 200
OWNER = "demo"  # in the marks of the folders it writes (gptlab.files.kinds)


class DemoRun(Callbacks):
    """The demo's run is marked as the demo's, so a later demo may replace it."""

    owner = OWNER


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="prepare Shakespeare, train a small model, sample from it (a few minutes)",
        description=(
            "The whole loop in one command: prepare the embedded Shakespeare corpus "
            "(char-level) into --data (reused when already there), train a 4-layer model "
            f"({PRESET}) into --out with a progress bar, write its loss curve, and print a "
            "sample."
        ),
        examples=[
            "gptlab demo",
            "gptlab demo --max-iters 500 --no-progress",
            "gptlab demo --data runs/demo-data --out runs/demo-2 --seed 1",
        ],
    )
    p.add_argument("--data", default="runs/demo-data", metavar="DATA_DIR",
                   help="where the prepared corpus goes (default runs/demo-data)")
    p.add_argument("--out", default="runs/demo", metavar="RUN_DIR",
                   help="the run directory (default runs/demo); a run an earlier demo wrote "
                        "there is replaced, any other run only with --force")
    p.add_argument("--max-iters", type=argtypes.int_in(1), default=DEMO_ITERS, metavar="N",
                   help=f"training steps (default {DEMO_ITERS})")
    p.add_argument("--seed", type=argtypes.seed, default=1337, metavar="S",
                   help="seed of the weights, batches and the sample (default 1337)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true",
                   help="replace a run in RUN_DIR that gptlab train wrote (never another kind "
                        "of folder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import torch

    from gptlab import model_dir
    from gptlab.inference.sampling import generate_text
    from gptlab.model.decoding import SamplingSettings
    from gptlab.training.run import train

    data_dir, run_dir = Path(args.data), Path(args.out)
    replace = claim_folders(data_dir, run_dir, args.force)
    ensure_data(data_dir)
    settings = recipe(RECIPE, max_iters=args.max_iters, eval_interval=EVAL_INTERVAL,
                      seed=args.seed)
    result = train(GPTConfig.from_preset(PRESET), settings, data_dir, run_dir,
                   overwrite=replace, progress=not args.no_progress, callbacks=DemoRun())
    if result.status == "interrupted":
        return stopped(result, data_dir, run_dir)
    whole = (f"; over the whole val split {result.whole_val_loss:.3f}"
             if result.whole_val_loss is not None else "")
    print(f"\ntrained {timing(result)}: train loss {result.train_loss:.3f}, val loss "
          f"{result.val_loss:.3f} (estimates at step {result.eval_step}){whole}\n")
    print("A sample (temperature 0.8, 400 characters):\n")
    model = model_dir.load_model(run_dir)
    tokenizer = model_dir.load_tokenizer_of(run_dir)
    generator = torch.Generator().manual_seed(args.seed)

    def write(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    write("\n")
    generate_text(model, tokenizer.encode, tokenizer.decode, "\n", 400,
                  SamplingSettings(temperature=0.8), generator=generator, on_text=write)
    print(f"\n\nThe run lives in {run_dir}/ (loss curve: {run_dir}/loss.png, "
          f"best weights: {run_dir}/best/).")
    print(f"Sample again:     gptlab sample {run_dir} --prompt 'ROMEO:' --seed 1")
    print(f"Train on:         gptlab train --data {data_dir} --out {run_dir} --resume "
          f"--max-iters {2 * result.step}   (the extra steps run at the final learning rate)")
    return 0


def stopped(result, data_dir: Path, run_dir: Path) -> int:
    """Where an interrupted demo stopped, how to finish it; 130 (143 for a SIGTERM)."""
    print(f"\nstopped at step {result.step} of {result.max_iters}; checkpoint saved in "
          f"{run_dir}/")
    if result.eval_step is not None:
        print(f"last evaluated at step {result.eval_step}: train loss {result.train_loss:.3f}, "
              f"val loss {result.val_loss:.3f} (estimates)")
    print(f"Finish its {result.max_iters} steps: gptlab train --data {data_dir} --out {run_dir} "
          f"--resume")
    return stopping.exit_code(result.signal)


def claim_folders(data_dir: Path, run_dir: Path, force: bool) -> bool:
    """Both folders checked before any work (gptlab.files.kinds): data_dir a data directory
    (or absent, or empty), run_dir a run, replaced if an earlier demo wrote it (or force).
    Whether the run is to be replaced."""
    if data_dir.resolve() == run_dir.resolve():
        raise UsageError(f"--data and --out are the same folder ({run_dir}): the data and the "
                         f"run need a folder each")
    kinds.claim(data_dir, kinds.DATA, force=True)  # its data is reused, never replaced
    replace = force or kinds.recognise(run_dir).by == OWNER
    kinds.claim(run_dir, kinds.RUN, force=replace,
                hint="it is not marked as a demo's run: give the demo another --out, or "
                     "replace it with --force")
    return replace


def ensure_data(data_dir: Path) -> None:
    """Prepare the embedded corpus into data_dir unless a complete copy is already there."""
    try:
        meta, reused = ensure_shakespeare(data_dir, by=OWNER)
    except UsageError as exc:
        raise UsageError(f"{exc}; give the demo another --data") from None
    if reused:
        print(f"reusing the prepared corpus in {data_dir}/")
    else:
        print(f"prepared the embedded Shakespeare ({meta['train_tokens'] + meta['val_tokens']:,} "
              f"characters, {meta['vocab_size']} symbols) in {data_dir}/")
