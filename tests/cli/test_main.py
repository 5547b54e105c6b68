"""gptlab.cli.main across every command: each --help ends with examples that parse, says
what --data and --out are, shows float placeholders for float options; the settings a
SettingError names reach the user as flags; a model whose weights are not finite is refused
by every command that reads one, before any output."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil

import pytest

from gptlab.cli.main import COMMANDS, build_parser, run_command, setting_flags, subcommand
from gptlab.errors import Setting, SettingError, UsageError, listed
from gptlab.files import kinds
from gptlab.model.presets import PRESETS
from gptlab.training import rundir
from gptlab.training.config import AFTER_DIVERGENCE, RESUME_OVERRIDES

# What an integer's placeholder looks like; a float option must show something else.
INT_PLACEHOLDERS = {"N", "M", "K", "S", "B", "SIZE", "ITERS", "STEPS", "INTERVAL"}


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("command", COMMANDS)
def test_help_ends_with_examples_that_parse(parser, command, capsys):
    sub = subcommand(parser, command)
    assert 2 <= len(sub.examples) <= 3, command
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args([command, "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert shown.endswith("\nexamples:\n" + "".join(f"  {e}\n" for e in sub.examples))
    for example in sub.examples:
        argv = shlex.split(example)
        assert argv[:2] == ["gptlab", command], example
        args = parser.parse_args(argv[1:])  # a usage error would raise SystemExit
        assert args.command == command and callable(args.func)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_says_what_it_is_and_floats_look_like_floats(parser, command):
    for action in subcommand(parser, command)._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings[0]
        if flag in ("--data", "--out") or action.required:
            assert action.help, f"{command} {flag} has no help"
        is_float = action.type is float or getattr(action.type, "__name__", "") == (
            "finite_float")
        if is_float:
            assert action.type is not float, f"{command} {flag}: 1e400 would be inf"
            assert action.metavar not in INT_PLACEHOLDERS, f"{command} {flag}"


def test_text_means_the_text_in_every_command_that_reads_one(parser):
    """--text is the text itself and --text-file a file, in each command that takes one."""
    for command in ("eval", "heads", "lens", "attribute"):
        actions = {a.option_strings[0]: a for a in subcommand(parser, command)._actions
                   if a.option_strings}
        assert actions["--text"].metavar == "TEXT", command
        assert actions["--text-file"].metavar == "PATH", command


def test_setting_flags_are_each_options_flag_by_its_settings_name(parser):
    flags = setting_flags(subcommand(parser, "train"))
    assert flags["learning_rate"] == "--learning-rate" and "no_progress" not in flags
    assert flags["whole_val"] == "--whole-val"


def _said(error: Exception, command: str, capsys) -> str:
    """The line `gptlab command` prints for `error` raised by its run."""
    flags = setting_flags(subcommand(build_parser(), command))

    def fail(args):
        raise error

    assert run_command(fail, argparse.Namespace(), f"gptlab {command}", flags=flags) == 2
    return capsys.readouterr().err.rstrip("\n")


def test_a_setting_error_names_its_settings_as_the_commands_flags(capsys):
    one = SettingError(Setting("learning_rate"), " must be > 0, got -1")
    assert _said(one, "train", capsys) == (
        "gptlab train: error: --learning-rate must be > 0, got -1")
    several = SettingError("cannot change ", *listed(["eval_iters", "seed"]), " (only ",
                           *listed(["max_iters", "device", "tp"]), ")")
    assert _said(several, "train", capsys) == (
        "gptlab train: error: cannot change --eval-iters, --seed (only --max-iters, --device, "
        "--tp)")
    # a setting the command has no flag for is said as the library says it
    assert _said(SettingError(Setting("n_head"), " must divide ", Setting("n_embd")), "sample",
                 capsys) == "gptlab sample: error: n_head must divide n_embd"


def test_a_plain_error_is_said_as_it_is_written(capsys):
    """Only a SettingError's Settings become flags: names in a plain error's text (a file's
    keys, a path) stay as they are."""
    plain = UsageError("runs/max_iters/train.json: learning_rate must be > 0")
    assert _said(plain, "train", capsys) == (
        "gptlab train: error: runs/max_iters/train.json: learning_rate must be > 0")


def _texts(parser, command: str) -> dict[str, str]:
    """{flag or "description": its text} of one subcommand, as written (not yet wrapped)."""
    sub = subcommand(parser, command)
    texts = {a.option_strings[0]: a.help or "" for a in sub._actions if a.option_strings}
    return texts | {"description": sub.description or ""}


MODEL_FILES = (kinds.CONFIG_FILE, kinds.WEIGHTS_FILE, kinds.TOKENIZER_FILE)


@pytest.mark.parametrize("command, where, names", [
    ("train", "description", (kinds.CONFIG_FILE, kinds.TRAIN_CONFIG_FILE, kinds.WEIGHTS_FILE,
                              kinds.STATE_FILE, kinds.TOKENIZER_FILE, rundir.METRICS_FILE,
                              kinds.BEST_DIR + "/")),
    ("train", "--train-config", (kinds.TRAIN_CONFIG_FILE,)),
    ("train", "--resume", tuple(f"--{n.replace('_', '-')}" for n in
                                RESUME_OVERRIDES + AFTER_DIVERGENCE)),
    ("train", "--preset", tuple(PRESETS)),
    ("prepare", "--out", (kinds.TRAIN_BIN, kinds.VAL_BIN, kinds.TOKENIZER_FILE, kinds.META_FILE)),
    ("prepare", "description", (kinds.TRAIN_BIN, kinds.VAL_BIN, kinds.TOKENIZER_FILE,
                                kinds.META_FILE)),
    ("convert", "description", MODEL_FILES),
    ("sample", "description", MODEL_FILES),
    ("lab", "description", MODEL_FILES),
])
def test_help_names_what_the_constants_say(parser, command, where, names):
    """Help texts are built from the constants they describe, so they say today's names."""
    text = _texts(parser, command)[where]
    for name in names:
        assert name in text, f"{command} {where}: {name}"


@pytest.mark.parametrize("argv, message", [
    (["--learning-rate", "1e400"], "argument --learning-rate: must be a finite number, got "
                                   "'1e400'"),
    (["--learning-rate", "-1"], "error: --learning-rate must be > 0"),
    (["--dropout", "nan"], "argument --dropout: must be a finite number, got 'nan'"),
    (["--max-iters", "5", "--warmup-iters", "9"],
     "--warmup-iters (9) must not exceed --max-iters (5)"),
])
def test_train_says_flags_and_finite_numbers(argv, message, data_dir, tmp_path, gptlab,
                                             one_line):
    err = one_line(gptlab("train", "--preset", "tiny-gpt2", "--data", data_dir, "--out",
                          tmp_path / "run", *argv))
    assert message in err and "learning_rate" not in err


def test_the_library_names_a_non_finite_setting_as_such():
    from gptlab.training.config import TrainConfig

    with pytest.raises(UsageError, match=r"^learning_rate must be a finite number, got inf$"):
        TrainConfig(learning_rate=float("inf"))
    with pytest.raises(UsageError, match=r"^beta2 must be a finite number, got nan$"):
        TrainConfig(beta2=float("nan"))
    with pytest.raises(UsageError, match=r"^learning_rate must be > 0$"):
        TrainConfig(learning_rate=-1.0)


# Bad values of settings, each said by the library as a SettingError: the CLI's line names
# each setting by its flag (a plain error would say learning_rate, n_head, ...).
TRAIN = ["train", "--preset", "tiny-gpt2", "--data", "{data}", "--out", "{out}"]
BAD_SETTINGS = [
    (TRAIN + ["--learning-rate", "-1"], "--learning-rate must be > 0"),
    (TRAIN + ["--max-iters", "5", "--warmup-iters", "9"],
     "--warmup-iters (9) must not exceed --max-iters (5)"),
    (TRAIN + ["--learning-rate", "0.1", "--min-lr", "0.5"],
     "--min-lr must be in [0, --learning-rate = 0.1]"),
    (TRAIN + ["--n-head", "3"], "--n-embd (32) must be divisible by --n-head (3)"),
    (TRAIN + ["--n-kv-head", "3"], "--n-head (4) must be divisible by --n-kv-head (3)"),
    (TRAIN + ["--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
    (TRAIN + ["--block-size", "5000"], "or a smaller --block-size"),
    (["sample", "{run}", "--temperature", "-1"], "--temperature must be a finite number >= 0"),
    (["sample", "{run}", "--top-k", "-5"], "--top-k must be an integer >= 1, got -5"),
    (["sample", "{run}", "--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
    (["eval", "{run}", "--text", "{text}", "--stride", "99"],
     "--stride must be between 1 and the context"),
    (["params", "tiny-gpt2", "--seq-len", "99"],
     "--seq-len 99 is longer than block_size 32"),
]


@pytest.mark.parametrize("argv, message", BAD_SETTINGS,
                         ids=[" ".join(argv[:1] + argv[-2:]) for argv, _ in BAD_SETTINGS])
def test_a_bad_setting_is_named_by_its_flag(argv, message, data_dir, tiny_run, tiny_text,
                                            tmp_path, parser, gptlab, one_line):
    argv = [a.format(data=data_dir, out=tmp_path / "run", run=tiny_run, text=tiny_text[:60])
            for a in argv]
    err = one_line(gptlab(*argv))
    assert err.startswith(f"gptlab {argv[0]}: error: ") and message in err, err
    snake = [name for name in setting_flags(subcommand(parser, argv[0])) if "_" in name]
    assert not [name for name in snake if re.search(rf"\b{name}\b", err)], err


@pytest.fixture(scope="module")
def diverged(tmp_path_factory, tiny_run):
    """The tiny run with its weights gone NaN, as after a run that diverged."""
    from safetensors.torch import load_file, save_file

    copy = shutil.copytree(tiny_run, tmp_path_factory.mktemp("diverged") / "run")
    state = load_file(copy / "model.safetensors")
    save_file({k: v.fill_(float("nan")) for k, v in state.items()}, copy / "model.safetensors")
    return copy


@pytest.mark.parametrize("argv", [
    ["sample", "{run}", "--max-new-tokens", "5"],  # was RuntimeError in torch.multinomial
    ["eval", "{run}", "--text", "the cat sat on the mat"],  # was "loss nan", exit 0
    ["lens", "{run}", "--text", "the cat"],  # was a table of nan cells
    ["attribute", "{run}", "--text", "the cat", "--target", "a"],
    ["heads", "{run}", "--out", "{tmp}/heads"],
    ["patch", "{run}", "--clean", "the cat", "--corrupt", "the mat"],
])
def test_weights_that_are_not_finite_are_refused_before_any_output(diverged, tmp_path, argv,
                                                                   gptlab, one_line):
    argv = [a.format(run=diverged, tmp=tmp_path) for a in argv]
    code, out, err = gptlab(*argv)
    one_line((code, out, err))
    assert out == "" and "the weights are not finite (NaN or infinite values in " in err


@pytest.mark.parametrize("argv", [
    ["lens", "{run}", "--text", "the cat", "--out", "/proc/gptlab-x"],
    ["attribute", "{run}", "--text", "the cat", "--target", "a", "--out", "/proc/gptlab-x"],
    ["patch", "{run}", "--clean", "the cat", "--corrupt", "the mat", "--out",
     "/proc/gptlab-x"],
    ["heads", "{run}", "--out", "/proc/gptlab-x"],
    ["sample", "{run}", "--stop", ""],
    ["eval", "{run}", "--text", "the cat", "--context", "1"],
    ["convert", "--to-hf", "{run}", "--out", "{tmp}/hf", "--dtype", "q8_0"],
])
def test_outputs_and_arguments_are_checked_before_any_work(tiny_run, tmp_path, argv, gptlab,
                                                           one_line):
    """Nothing is computed or printed before a bad --out or argument is refused."""
    argv = [a.format(run=tiny_run, tmp=tmp_path) for a in argv]
    code, out, err = gptlab(*argv)
    one_line((code, out, err))
    assert out == ""
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("command, argv", [
    ("heads", []), ("lens", ["--text", "a"]), ("attribute", ["--text", "a", "--target", "b"]),
    ("patch", ["--clean", "a", "--corrupt", "b"])])
def test_force_on_a_figure_command_is_named_with_the_command(command, argv, gptlab, one_line):
    """argparse said `gptlab: error: unrecognized arguments: --force`, naming no command."""
    err = one_line(gptlab(command, "runs/demo", *argv, "--force"))
    assert err == (f"gptlab {command}: error: unrecognized arguments: --force (gptlab "
                   f"{command} has no --force: it writes a folder of its own figures again "
                   f"without one)\n")


def test_an_unknown_argument_is_named_with_its_command(gptlab, one_line):
    err = one_line(gptlab("sample", "runs/demo", "--nope", "x"))
    assert err == "gptlab sample: error: unrecognized arguments: --nope x\n"
    assert one_line(gptlab("sample", "runs/demo", "--force")).endswith(
        "--force (gptlab sample has no --force)\n")
