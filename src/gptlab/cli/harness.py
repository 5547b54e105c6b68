"""`gptlab harness`: lm-evaluation-harness's own command line with the `gptlab` model
registered and gptlab's shipped tasks found (gptlab.harness); every flag is lm-eval's."""

from __future__ import annotations

import argparse
import sys

from gptlab.cli.main import Parser
from gptlab.errors import UsageError

LM_EVAL_COMMANDS = ("run", "ls", "validate")  # lm-eval's subcommands; none given: run


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "harness",
        help="evaluate a model on lm-evaluation-harness tasks (the harness extra)",
        description=(
            "Runs lm-evaluation-harness (pip install 'gptlab[harness]') with its model "
            "`gptlab` registered: --model_args pretrained=MODEL takes anything gptlab.load "
            "takes (a run or model directory, RUN/best, shakespeare, a Hugging Face directory "
            "or hub name), with device=, batch_size=, max_length=, context=, rope_scaling=, "
            "prefix_token_id= and stride=. --model defaults to gptlab and --include_path to "
            "the tasks gptlab ships (gptlab_next_line, gptlab_val_bpb: made from the embedded "
            "corpus, offline; they compare runs, they are no benchmark of language ability). "
            "Every other argument goes to lm-eval's command line as it is: see "
            "`gptlab harness run --help`, or `gptlab harness ls tasks`."
        ),
        examples=[
            "gptlab harness --model_args pretrained=shakespeare --tasks gptlab_next_line",
            "gptlab harness --model_args pretrained=runs/demo,batch_size=16 "
            "--tasks gptlab_next_line,gptlab_val_bpb --output_path results/",
            "gptlab harness --model_args pretrained=runs/demo --tasks my_task.yaml",
        ],
    )
    p.add_argument("lm_eval_args", nargs=argparse.REMAINDER, metavar="LM_EVAL_ARGS ...",
                   help="lm-eval's own arguments (--tasks, --limit, --output_path, ...)")
    p.set_defaults(func=run)
    p.__class__ = PassThrough  # made by the subparsers' parser class; parsed as below


class PassThrough(Parser):
    """A parser that keeps every argument for lm-eval, flags included (argparse's
    REMAINDER stops at a leading --flag), and answers only a lone --help itself."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        if args in (["-h"], ["--help"]):
            return super().parse_known_args(args, namespace)
        namespace, _ = super().parse_known_args([], namespace)
        namespace.lm_eval_args = args
        return namespace, []


def lm_eval_argv(args: list[str], tasks_dir: str) -> list[str]:
    """lm-eval's argv for `gptlab harness ARGS`: `run` unless another lm-eval command is
    named, with --model gptlab, --device auto and --include_path tasks_dir unless ARGS give
    their own; a gptlab model's batch_size= in --model_args (which the model takes) given
    as --batch_size too, which lm-eval's table header shows (it showed 1 where 16 ran)."""
    command, rest = (args[0], args[1:]) if args and args[0] in LM_EVAL_COMMANDS else ("run", args)
    given = {a.split("=", 1)[0] for a in rest if a.startswith("--")}
    if command == "run" and "--model" not in given:
        rest = ["--model", "gptlab", *rest]
    batch = _flag_value(rest, "--batch_size")
    in_model_args = gptlab_model_arg(rest, "batch_size")
    if command == "run" and in_model_args is not None:
        if batch is None:
            rest = [*rest, "--batch_size", in_model_args]
        elif batch != in_model_args:
            raise UsageError(f"--batch_size {batch} and --model_args batch_size={in_model_args} "
                             f"disagree: the model runs {in_model_args}; give one of them")
    if command == "run" and "--device" not in given:  # lm-eval's default is cuda:0
        rest = [*rest, "--device", "auto"]
    if "--include_path" not in given:
        rest = [*rest, "--include_path", tasks_dir]
    return ["lm-eval", command, *rest]


def run(args: argparse.Namespace) -> int:
    if not args.lm_eval_args:
        raise UsageError("give lm-eval's arguments, e.g. --model_args pretrained=shakespeare "
                         "--tasks gptlab_next_line (gptlab harness --help)")
    # start-up time: lm-eval, torch and the model class load here, never for --help
    from gptlab.harness import TASKS_DIR, run_lm_eval  # HarnessMissing without the extra
    from gptlab.loading import resolve

    argv = lm_eval_argv(list(args.lm_eval_args), str(TASKS_DIR))
    pretrained = gptlab_pretrained(argv)
    if pretrained is not None:  # a bad path is one line now, not after lm-eval's set-up
        resolve(pretrained)
    return run_lm_eval(argv)


def gptlab_pretrained(argv: list[str]) -> str | None:
    """The pretrained= of `--model gptlab --model_args ...,pretrained=X,...` in lm-eval's
    argv, or None (another model, or model_args not written key=value)."""
    return gptlab_model_arg(argv, "pretrained")


def gptlab_model_arg(argv: list[str], key: str) -> str | None:
    """The value of key= in `--model gptlab --model_args ...,key=X,...` in lm-eval's argv,
    or None (another model, or model_args not written key=value)."""
    if _flag_value(argv, "--model") != "gptlab":
        return None
    pairs = [part.split("=", 1) for part in (_flag_value(argv, "--model_args") or "").split(",")]
    return next((v.strip() for k, *rest in pairs for v in rest if k.strip() == key), None)


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
