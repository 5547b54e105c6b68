"""Every subcommand, driven through `gptlab.cli.main` with generated flag values and files:
numbers of every sign and size, NaN and infinities, empty, huge and unicode strings, and
paths that exist, do not, are files or lie under a file. For every input:

- nothing escapes main() but argparse's SystemExit, and no "Traceback" is printed;
- the exit code is one of the documented ones (README, "Exit codes": 0, 1, 2);
- a failure is exactly one line on stderr, and exit 1 (a failure that is not the input's
  fault) comes only from the stubbed network;
- no file in the prepared data directory, the trained run or the Hugging Face directory
  changes, appears or vanishes (a heads/ folder in them, where `heads` writes by design,
  excepted), nor in a folder of any other kind gptlab writes (a converted model, an
  experiment), in those three as an earlier version left them (unmarked), or in a folder of
  the user's own files: every command that writes a folder is pointed at each of them
  (test_no_command_changes_a_folder_of_another_kind_or_the_users).

What runs for real and what is stubbed:
- sample, params, heads, lens, attribute, patch, convert, prepare run for real, on a data
  directory and a run trained once per module (1 layer, n_embd 16, 2 steps). The network
  is stubbed (urlopen and the Hugging Face hub fail as offline), and the embedded corpus is
  a short text.
- train, demo: their own argument checks and the config validation run for real; the
  trainer itself is replaced by a stub (training belongs to tests/training/, and 2 CPU cores
  cannot afford a training run per example). demo's data preparation is stubbed too.
- runs: for real, on the world's folder (its table, --json, and --plot's figure).
- lab: `serve` is stubbed (no server starts). `python -m bench`'s arguments are driven the
  same way, its runner stubbed (no benchmark).
Argument vectors never hold NUL (a real argv cannot). Examples are derandomized: the
same few hundred inputs on every run, about 45 s on two cores.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gptlab.cli.main import main
from gptlab.files import kinds
from gptlab.model.presets import PRESETS

TINY_MODEL = {"vocab_size": 100, "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16}

# GPTLAB_FUZZ_SCALE=20 explores: 20x the examples, random ones (not the fixed set).
SCALE = float(os.environ.get("GPTLAB_FUZZ_SCALE", "1"))


def fuzz(examples: int):
    """Examples are few and derandomized: the same inputs on every run, and the whole
    module within about a minute on two cores."""
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None,
                    derandomize=SCALE == 1, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


# ----------------------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_shakespeare, one_thread_module):
    """A data directory, a trained run, a Hugging Face directory and assorted paths, built
    once; a scratch working directory for whatever relative paths the examples name."""
    root = tmp_path_factory.mktemp("world")
    small = root / "small.txt"
    small.write_text(tiny_shakespeare.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    short = root / "short.txt"
    short.write_text("First Citizen:\nBefore we", encoding="utf-8")
    config = root / "tiny.json"
    config.write_text(json.dumps(TINY_MODEL))
    data, run, hf = root / "data", root / "run", root / "hf"
    assert main(["prepare", "--input", str(small), "--out", str(data)]) == 0
    assert main(["train", "--config", str(config), "--data", str(data), "--out", str(run),
                 "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1",
                 "--warmup-iters", "0", "--batch-size", "2", "--no-progress",
                 "--device", "cpu"]) == 0
    assert main(["convert", "--to-hf", str(run), "--out", str(hf)]) == 0
    # every other kind of folder, those three as an earlier version left them (no mark), and
    # a folder of the user's own files (issue 23)
    model, experiment, mine = root / "model", root / "experiment", root / "mine"
    assert main(["convert", "--from-hf", str(hf), "--out", str(model)]) == 0
    kinds.mark(experiment, kinds.EXPERIMENT, "test")
    (experiment / "report.md").write_text("# an experiment's report\n")
    mine.mkdir()
    for name in ("config.json", "train.json", "metrics.jsonl"):
        (mine / name).write_text('{"mine": true}\n')
    unmarked = []
    for folder in (data, run, hf):
        unmarked.append(root / f"{folder.name}-old")
        shutil.copytree(folder, unmarked[-1])
        (unmarked[-1] / kinds.MARKER_FILE).unlink()
    a_file = root / "a-file"
    a_file.write_text("not a directory\n")
    empty = root / "empty-dir"
    empty.mkdir()
    scratch = tmp_path_factory.mktemp("cwd")
    before = Path.cwd()
    os.chdir(scratch)
    yield SimpleNamespace(
        root=root, data=data, run=run, hf=hf, small=small, short=short, config=config,
        file=a_file, empty=empty, scratch=scratch, fresh=itertools.count(),
        folders={p.name: p for p in (data, run, hf, model, experiment, mine, *unmarked,
                                     run / "best")},
        guarded=[data, run, hf, small, short, config, a_file, model, experiment, mine,
                 *unmarked],
    )
    os.chdir(before)


@pytest.fixture
def offline(monkeypatch, world):
    """No network: a download or a hub lookup fails as it does offline. The embedded corpus
    is short, and the download cache is empty."""
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    from gptlab.cli import prepare

    def no_urlopen(*args, **kwargs):
        raise urllib.error.URLError("offline (stubbed by the test)")

    def no_hub(name, **kwargs):
        raise LocalEntryNotFoundError("offline (stubbed by the test)")

    monkeypatch.setattr(urllib.request, "urlopen", no_urlopen)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    monkeypatch.setitem(prepare.SOURCES, "shakespeare", lambda: world.small.read_text())
    monkeypatch.setenv("GPTLAB_CACHE", str(world.root / "cache"))


# ----------------------------------------------------------------------------- strategies

# Any text a shell could pass: no NUL, no lone surrogates.
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
TEXT = st.one_of(
    st.text(CHARS, max_size=20),
    st.sampled_from(["", " ", "\n", "\\n", "\\", "é€😀", "-", "--", "-h", "=", "..",
                     "x" * 5000, "e" * 100_000, "ROMEO:", "\t\r\\t",
                     "a\udcffb"]),  # not UTF-8: how Python hands over such argv bytes
)
NUMBER = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.integers(-3, 40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e400", "1e-400", "5e-324", "0", "-0",
                     "0.0", "1_000", "0x10", "١٢", " 7 ", "", "1e3", str(2**64),
                     str(2**64 - 1), str(2**63)]),
    TEXT,
)


SWITCH = st.booleans()


def ints(lo: int, hi: int):
    return st.integers(lo, hi).map(str)


def floats(lo: float, hi: float):
    return st.floats(lo, hi).map(repr)


def paths(*extra: str):
    """A path given as an argument: the world's files and folders, or odd ones."""
    names = ["data", "run", "run/best", "hf", "file", "file/under", "empty", "missing",
             "small", "short", "config", "proc", "root", *extra]
    return st.one_of(st.sampled_from(names).map(lambda n: ("world", n)),
                     TEXT.map(lambda t: ("text", t)))


def world_path(*names: str):
    return st.sampled_from(names).map(lambda n: ("world", n))


def out_paths(*extra: str):
    """An output directory: a fresh one, or one that cannot be made."""
    return world_path("fresh", "fresh", "fresh/deeper", "file", "file/under", "proc",
                      "proc-file", *extra)


def argsets(valid: dict, hostile: dict | None = None, max_hostile: int = 2):
    """Flag values: a valid value for any subset of the flags, then up to max_hostile of
    them replaced by a hostile one (NUMBER or TEXT unless `hostile` names a strategy), so
    that most examples get past argparse and reach the command's own checks. Switches
    (st.booleans()) stay valid: argparse alone answers `--json=5`."""
    hostile = hostile or {}
    valued = sorted(name for name, strategy in valid.items()
                    if name in hostile or strategy is not SWITCH)

    @st.composite
    def build(draw):
        values = dict(draw(st.fixed_dictionaries({}, optional=valid)))
        n_bad = draw(st.sampled_from([0, 0, 1, 1, 2, 3]))  # all valid in a third of them
        n_bad = min(n_bad, max_hostile, len(valued))
        bad = draw(st.lists(st.sampled_from(valued), min_size=n_bad, max_size=n_bad,
                            unique=True))
        for name in bad:
            values[name] = draw(hostile.get(name, st.one_of(NUMBER, TEXT)))
        return values

    return build()


def mostly(usual, other):
    """`usual` three times in four, else `other`."""
    return st.sampled_from([True, True, True, False]).flatmap(
        lambda pick: usual if pick else other)


def _int_in(value, lo: int, hi: int) -> bool:
    try:
        return lo <= int(value) <= hi
    except (TypeError, ValueError):
        return False


def resolve(world, spec) -> str:
    kind, name = spec
    if kind == "text":
        return name
    base = name.split("/")[0]
    rest = name[len(base):]
    where = {
        "data": world.data, "run": world.run, "hf": world.hf, "file": world.file,
        "empty": world.empty, "missing": world.root / "missing", "small": world.small,
        "short": world.short, "config": world.config, "root": world.root,
        "proc": Path("/proc/gptlab-fuzz/x"), "proc-file": Path("/proc/version/x"),
        "tokenizer": world.data / "tokenizer.json",
        "fresh": world.scratch / f"out-{next(world.fresh)}",
    }[base]
    return str(where) + rest


def flags(world, values: dict) -> list[str]:
    """{"max_new_tokens": "5", "greedy": True, "stop": [..]} -> ["--max-new-tokens=5", ...]
    (the = form, so that a value such as -inf reaches the flag's own check)."""
    argv = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        for v in value if isinstance(value, list) else [value]:
            if v is True:
                argv.append(flag)
            elif v is not False and v is not None:
                argv.append(f"{flag}={resolve(world, v) if isinstance(v, tuple) else v}")
    return argv


# ----------------------------------------------------------------------------- checks


def snapshot(world) -> dict[str, tuple[bytes, int, int]]:
    """Contents, mtime and mode of every guarded file."""
    files = {}
    for top in world.guarded:
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            if path.is_file() and "heads" not in path.relative_to(top.parent).parts[:-1]:
                stat = path.stat()
                files[str(path)] = (path.read_bytes(), stat.st_mtime_ns, stat.st_mode)
    return files


def check(world, capsys, argv: list[str], run=main, prog: str = "gptlab"
          ) -> tuple[int, str, str]:
    """Run `gptlab argv` (or another front end: its main and its name); assert the promises
    in this module's docstring."""
    before = snapshot(world)
    try:
        code = run(argv)
    except SystemExit as exc:  # argparse: a usage error, or --help
        code = exc.code
    out, err = capsys.readouterr()
    shown = f"{prog} {' '.join(a[:80] for a in argv)[:600]}\nexit {code}\nstderr: {err[-2000:]}"
    assert "Traceback" not in err, shown
    assert code in (0, 1, 2), shown
    if code != 0:
        lines = err.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith(prog) and " error: " in lines[0], \
            shown
    if code == 1:  # a failure, not bad input: only the stubbed network may cause one
        assert "offline (stubbed by the test)" in err, f"exit 1 for bad input?\n{shown}"
    assert snapshot(world) == before, f"a guarded file changed:\n{shown}"
    return code, out, err


# ----------------------------------------------------------------------------- commands

DEVICES = st.one_of(st.sampled_from(["cpu", "auto", "cpu:0", "mps", "xpu", "cuda", "cuda:1",
                                     "cuda:-1", "meta", "hpu", "mkldnn", "CPU", "garbage",
                                     ""]), TEXT)
PROMPTS = st.one_of(st.sampled_from(["ROMEO:", "First", "\\n", "a\\tb", "--", "\n\n"]),
                    st.text(st.sampled_from("abcdefghij ABC:\n"), min_size=1, max_size=40))
RUNS = mostly(world_path("run", "run/best"), paths())


@fuzz(70)
@given(run=RUNS, opts=argsets(
    valid=dict(prompt=PROMPTS, max_new_tokens=ints(0, 20), temperature=floats(0, 3),
               top_k=ints(1, 60), top_p=floats(0.01, 1), greedy=SWITCH,
               seed=ints(0, 2**64 - 1), num_samples=ints(1, 2),
               stop=st.lists(st.one_of(PROMPTS, TEXT), max_size=3), no_prompt=SWITCH,
               device=st.sampled_from(["cpu", "auto"])),
    hostile=dict(prompt=TEXT, device=DEVICES, stop=st.lists(TEXT, min_size=1, max_size=3))))
def test_sample(world, capsys, offline, run, opts):
    for name, most in (("max_new_tokens", 20), ("num_samples", 2)):
        if _int_in(opts.get(name), most + 1, 2**70):
            opts = {**opts, name: str(most)}  # valid, but long: the tokens come one by one
    check(world, capsys, ["sample", *flags(world, opts), resolve(world, run)])


@fuzz(60)
@given(model=st.one_of(st.sampled_from(sorted(PRESETS)).map(lambda n: ("text", n)),
                       world_path("run", "run/best", "config"), paths()),
       opts=argsets(valid=dict(json=SWITCH, seq_len=ints(1, 64), check=SWITCH)))
def test_params(world, capsys, offline, model, opts):
    if opts.get("check") and model[1] not in ("gpt2", "run", "config"):
        opts = {**opts, "check": False}  # a 70B model on the meta device takes seconds
    check(world, capsys, ["params", *flags(world, opts), resolve(world, model)])


@fuzz(60)
@given(source=st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(["shakespeare", "tinyshakespeare"])}),
    st.fixed_dictionaries({"input": world_path("small", "short", "small", "root")}),
    st.fixed_dictionaries({"url": st.sampled_from(["https://example.com/x.txt",
                                                   "http://example.invalid/"])}),
    st.fixed_dictionaries({}, optional={"name": TEXT, "input": paths(),
                                        "url": st.one_of(TEXT, st.just("ftp://x/y"))})),
    opts=argsets(
        valid=dict(tokenizer=st.sampled_from([("text", "char"), ("text", "bpe"), ("text", "bpe"),
                                              ("world", "tokenizer")]),
                   vocab_size=ints(257, 400), val_fraction=floats(0.05, 0.5)),
        hostile=dict(tokenizer=st.one_of(paths(), TEXT.map(lambda t: ("text", t))),
                     vocab_size=st.one_of(NUMBER, st.sampled_from(
                         [str(2**31 - 1), str(2**62), str(2**70), "256", "0", "-1"])))),
    out=out_paths("run", "hf", "run/best", "empty"))
def test_prepare(world, capsys, offline, source, opts, out):
    """(--out is never the data directory: rewriting it is prepare's job, not this test's.)"""
    source = dict(source)
    name = source.pop("name", None)
    argv = ["prepare", *flags(world, {**source, **opts}), "--out", resolve(world, out)]
    check(world, capsys, argv + ([name] if name is not None else []))


@fuzz(60)
@given(pair=mostly(
    st.sampled_from([("--from-hf", ("world", "hf")), ("--to-hf", ("world", "run")),
                     ("--to-hf", ("world", "run/best")), ("--to-gguf", ("world", "run")),
                     ("--to-gguf", ("world", "hf"))]),
    st.tuples(st.sampled_from(["--from-hf", "--to-hf", "--to-gguf"]), st.one_of(
        paths(), st.sampled_from(["openai-community/gpt2", "a/b/c", "a b", "~/nothing",
                                  "gpt2"]).map(
            lambda n: ("text", n))))),
       out=mostly(out_paths(), world_path("run", "hf", "data")), force=st.booleans())
def test_convert(world, capsys, offline, pair, out, force):
    if force and out[1] in ("run", "hf"):  # overwriting is --force's job; not here
        force = False
    direction, source = pair
    argv = ["convert", direction, resolve(world, source), "--out", resolve(world, out)]
    check(world, capsys, argv + (["--force"] if force else []))


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
@fuzz(30)
@given(run=RUNS, opts=argsets(
    valid=dict(text_file=world_path("short", "short", "small"), out=out_paths(),
               top=ints(0, 1), ablate=st.sampled_from(["zero", "mean"]), seq_len=ints(2, 8),
               seed=ints(0, 2**64 - 1)),
    hostile=dict(text_file=paths(), text=TEXT, out=st.one_of(out_paths(), paths()),
                 ablate=st.one_of(TEXT, st.just("resample")))))
def test_heads(world, capsys, offline, run, opts):
    if _int_in(opts.get("top"), 2, 2**70):
        opts = {**opts, "top": "1"}  # a heatmap per head: valid, but each costs a PNG
    check(world, capsys, ["heads", *flags(world, opts), resolve(world, run)])


TOKENS = st.one_of(st.sampled_from(["e", " ", ":", "id:0", "id:99", "id:100", "id:-1", "id:x",
                                    "ab", "", "\\n"]), TEXT)
SAME_LENGTH = st.sampled_from([("First Citizen", "First Citizan"), ("ROMEO:", "JULIET"),
                               ("abc", "abd"), ("a", "b")])


@fuzz(20)
@given(run=RUNS, text=mostly(PROMPTS, TEXT), opts=argsets(
    valid=dict(last=ints(1, 20), top=ints(1, 100), out=out_paths()),
    hostile=dict(out=st.one_of(out_paths(), paths()))))
def test_lens(world, capsys, offline, run, text, opts):
    check(world, capsys, ["lens", resolve(world, run), f"--text={text}", *flags(world, opts)])


@fuzz(20)
@given(run=RUNS, text=mostly(PROMPTS, TEXT), target=TOKENS, opts=argsets(
    valid=dict(versus=TOKENS, position=ints(-20, 20), out=out_paths()),
    hostile=dict(versus=TEXT, out=st.one_of(out_paths(), paths()))))
def test_attribute(world, capsys, offline, run, text, target, opts):
    check(world, capsys, ["attribute", resolve(world, run), f"--text={text}",
                          f"--target={target}", *flags(world, opts)])


@fuzz(20)
@given(run=RUNS, texts=mostly(SAME_LENGTH, st.tuples(PROMPTS, TEXT)), opts=argsets(
    valid=dict(metric=st.sampled_from(["logit-diff", "logit", "prob"]), target=TOKENS,
               versus=TOKENS, sweep=st.sampled_from(["resid", "head", "mlp", "all"]),
               out=out_paths()),
    hostile=dict(metric=TEXT, sweep=TEXT, out=st.one_of(out_paths(), paths()))))
def test_patch(world, capsys, offline, run, texts, opts):
    clean, corrupt = texts
    check(world, capsys, ["patch", resolve(world, run), f"--clean={clean}",
                          f"--corrupt={corrupt}", *flags(world, opts)])


@pytest.fixture
def no_training(monkeypatch):
    """train() is stubbed: what is checked is everything before it."""
    from gptlab.training import run as training_run

    calls = []

    def fake_train(model_config, train_config, data, out, **kwargs):
        calls.append((model_config, train_config))
        return training_run.TrainResult(Path(out), step=0, status="finished", train_loss=None,
                                        val_loss=None, best_val_loss=float("nan"),
                                        elapsed_s=0.0)

    monkeypatch.setattr(training_run, "train", fake_train)
    return calls


TRAIN_VALID = dict(
    batch_size=ints(1, 4), gradient_accumulation_steps=ints(1, 2), max_iters=ints(1, 5),
    learning_rate=floats(1e-5, 0.1), min_lr=floats(0, 1e-5), warmup_iters=ints(0, 1),
    lr_decay_iters=ints(1, 10), weight_decay=floats(0, 0.5), beta1=floats(0, 0.99),
    beta2=floats(0, 0.999), grad_clip=floats(0, 2), eval_interval=ints(1, 5),
    eval_iters=ints(1, 3), log_interval=ints(1, 5), checkpoint_interval=ints(1, 5),
    optimizer=st.sampled_from(["adamw", "muon"]), muon_lr=floats(1e-4, 0.1),
    muon_momentum=floats(0, 0.99), muon_weight_decay=floats(0, 0.5),
    muon_dtype=st.sampled_from(["auto", "float32", "bfloat16"]),
    lr_schedule=st.sampled_from(["cosine", "wsd"]), cooldown_frac=floats(0, 1),
    seed=ints(0, 2**32), batch_rng=st.sampled_from(["separate", "nanogpt"]),
    dtype=st.sampled_from(["auto", "float32", "bfloat16"]), compile=SWITCH,
    device=st.sampled_from(["cpu", "auto"]),
    n_layer=ints(1, 2), n_head=st.sampled_from(["1", "2"]), n_kv_head=st.sampled_from(["1"]),
    n_embd=st.sampled_from(["16", "32"]), block_size=ints(8, 32), ffn_hidden=ints(8, 64),
    dropout=floats(0, 0.5), recipe=st.sampled_from(["shakespeare-char-cpu", "nope"]),
    train_config=world_path("run/train.json"), resume=st.just(False),
    no_progress=SWITCH,
)


@fuzz(80)
@given(model=st.one_of(
    st.fixed_dictionaries({"preset": st.one_of(st.sampled_from(sorted(PRESETS)), TEXT)}),
    st.fixed_dictionaries({"config": mostly(world_path("config"), paths())}), st.just({})),
    data=mostly(world_path("data"), paths()),
    out=st.one_of(out_paths("run", "data")),
    opts=argsets(TRAIN_VALID, hostile=dict(train_config=paths(), device=DEVICES,
                                           resume=st.just(True)), max_hostile=3),
    bias=st.sampled_from([[], ["--bias"], ["--no-bias"]]))
def test_train_arguments(world, capsys, offline, no_training, model, data, out, opts, bias):
    argv = ["train", *flags(world, {**model, **opts, "data": data, "out": out}), *bias]
    check(world, capsys, argv)


@fuzz(30)
@given(opts=argsets(dict(data=out_paths("data"), out=out_paths("run"), seed=ints(0, 2**32),
                         no_progress=SWITCH, max_iters=ints(1, 3000))))
def test_demo_arguments(world, capsys, offline, monkeypatch, opts):
    """demo up to its training run (stubbed, as its data preparation)."""
    from gptlab.cli import demo
    from gptlab.training import run as training_run

    class Reached(Exception):
        pass

    def fake_train(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(demo, "ensure_data", lambda path: None)
    monkeypatch.setattr(training_run, "train", fake_train)
    try:
        check(world, capsys, ["demo", *flags(world, opts)])
    except Reached:
        capsys.readouterr()  # valid arguments: training would start here


@fuzz(40)
@given(name=st.one_of(st.sampled_from(["context", "norm", "scale", "heads", "phase"]), TEXT),
       out=out_paths("run", "data", "empty"),
       opts=argsets(dict(data=world_path("data", "small"), quick=SWITCH, steps=ints(1, 10**6),
                         seed=ints(0, 2**32), progress=SWITCH)))
def test_experiment_arguments(world, capsys, offline, monkeypatch, name, out, opts):
    """experiment up to its folder, claimed and made for real; what it would train next is
    stubbed."""
    from gptlab.experiments import grid

    class Reached(Exception):
        pass

    real = grid.experiment_folder

    def folder_then_stop(*args, **kwargs):
        real(*args, **kwargs)
        raise Reached

    # undone after each example (hypothesis runs them all inside one test call)
    with monkeypatch.context() as patched:
        patched.setattr(grid, "experiment_folder", folder_then_stop)
        try:
            check(world, capsys, ["experiment", name, *flags(world, {**opts, "out": out})])
        except Reached:
            capsys.readouterr()  # valid arguments: training would start here


# What kind of folder each command writes (gptlab.files.kinds), and its argv given the folder.
FOLDER_COMMANDS = {
    "train": (kinds.RUN, lambda w, f: ["train", "--config", str(w.config), "--data",
                                        str(w.data), "--out", f, "--max-iters", "2"]),
    "train --resume": (kinds.RUN, lambda w, f: ["train", "--data", str(w.data), "--out", f,
                                                 "--resume"]),
    "prepare": (kinds.DATA, lambda w, f: ["prepare", "--input", str(w.short), "--out", f]),
    "demo --out": (kinds.RUN, lambda w, f: ["demo", "--data", resolve(w, ("world", "fresh")),
                                            "--out", f, "--max-iters", "2"]),
    "demo --data": (kinds.DATA, lambda w, f: ["demo", "--data", f, "--out",
                                              resolve(w, ("world", "fresh")), "--max-iters",
                                              "2"]),
    "convert --from-hf": (kinds.MODEL, lambda w, f: ["convert", "--from-hf", str(w.hf),
                                                     "--out", f]),
    "convert --to-hf": (kinds.EXPORT, lambda w, f: ["convert", "--to-hf", str(w.run), "--out",
                                                    f]),
}
FOLDERS = ["data", "run", "hf", "model", "experiment", "mine", "data-old", "run-old", "hf-old",
           "best"]


@fuzz(70)
@given(command=st.sampled_from(sorted(FOLDER_COMMANDS)), folder=st.sampled_from(FOLDERS),
       force=st.booleans(), no_progress=st.booleans())
def test_no_command_changes_a_folder_of_another_kind_or_the_users(world, capsys, offline,
                                                                  monkeypatch, command, folder,
                                                                  force, no_progress):
    """Issue 23's class of bug: every command that writes a folder, pointed at each kind of
    folder (marked, or as an earlier version left it; a run's best/; the user's own files):
    refused in one line and nothing changed, --force or not, unless the folder is of the
    kind the command writes. There, --force replacing it is that command's own test's
    business; here it is left out, and a command that may write its own kind without force
    (a resume, data prepared again with the same tokenizer) stops before training (stubbed)
    or is left out."""
    from gptlab.cli import demo
    from gptlab.training import run as training_run

    class Reached(Exception):
        """Training would start here: every check passed."""

    def carry_out(plan, watch):
        raise Reached

    kind, make_argv = FOLDER_COMMANDS[command]
    path = world.folders[folder]
    same = kinds.kind_of(path) == kind and folder != "best"
    if command == "prepare" and same:
        return  # the same tokenizer is prepared again by design (tests/data, tests/cli)
    monkeypatch.setattr(training_run, "_carry_out", carry_out)
    monkeypatch.setattr(demo, "ensure_data", lambda path: None)
    argv = make_argv(world, str(path)) + (["--force"] if force and not same else []) + (
        ["--no-progress"] if no_progress and command.startswith(("train", "demo")) else [])
    before = snapshot(world)
    try:
        code, _, err = check(world, capsys, argv)
    except Reached:
        capsys.readouterr()
        assert same, f"{argv}: reached training on a folder of another kind"
        assert snapshot(world) == before
        return
    assert code == 2, (argv, err)  # refused (one line: check), the folder as it was


@fuzz(40)
@given(opts=argsets(dict(host=st.sampled_from(["127.0.0.1", "localhost", "::1", "0.0.0.0"]),
                         port=ints(1, 65535), runs=world_path("root", "empty", "missing")),
                    hostile=dict(runs=paths(), host=st.one_of(TEXT, st.just("bad host")))))
def test_lab_arguments(world, capsys, offline, monkeypatch, opts):
    from gptlab.lab import server

    monkeypatch.setattr(server, "serve", lambda *args, **kwargs: None)
    check(world, capsys, ["lab", *flags(world, opts)])


@fuzz(40)
@given(folder=mostly(world_path("root", "empty", "missing", "run", "file"), paths()),
       opts=argsets(dict(sort=st.sampled_from(["name", "best-val", "changed", "status"]),
                         reverse=SWITCH, json=SWITCH, force=SWITCH,
                         plot=st.lists(st.sampled_from(["run", "data", "nope", "run/best"]),
                                       min_size=1, max_size=3),
                         out=st.one_of(st.sampled_from(["c.png", "c.svg", "c.pdf"]),
                                       out_paths()))))
def test_runs(world, capsys, offline, folder, opts):
    """The table, --json and --plot (a figure into the scratch folder), for real."""
    check(world, capsys, ["runs", resolve(world, folder), *flags(world, opts)])


@fuzz(40)
@given(opts=argsets(
    dict(quick=SWITCH, smoke=SWITCH,
         only=st.lists(st.sampled_from(["mfu", "train_step,generation", "lab_latency"]),
                       max_size=2),
         out=out_paths("empty"), text=world_path("small"), threads=ints(1, 8),
         seeds=ints(1, 5)),
    hostile=dict(only=st.lists(st.one_of(TEXT, st.just(",")), min_size=1, max_size=3),
                 text=paths(), out=st.one_of(out_paths(), paths()))))
def test_bench_arguments(world, capsys, offline, monkeypatch, opts):
    """`python -m bench`'s own checks, up to its runner (stubbed)."""
    from bench import run as bench_run

    monkeypatch.setattr(bench_run, "run_all", lambda *args, **kwargs: {})
    check(world, capsys, flags(world, opts), run=bench_run.main, prog="python -m bench")


@fuzz(60)
@given(argv=st.lists(st.one_of(TEXT, st.sampled_from(
    ["sample", "params", "prepare", "convert", "heads", "lens", "attribute", "patch", "train",
     "runs", "lab", "demo", "--help", "--version", "--out", "--seed", "--", "gpt2"])),
    max_size=5))
def test_any_argument_vector(world, capsys, offline, monkeypatch, argv):
    """Whatever the words, main() answers in one line or does its job; what would start
    real work (a server, training) is stubbed."""
    from gptlab.cli import demo
    from gptlab.lab import server
    from gptlab.training import run as training_run

    stub = SimpleNamespace(is_main=False)
    monkeypatch.setattr(server, "serve", lambda *args, **kwargs: None)
    monkeypatch.setattr(demo, "ensure_data", lambda path: None)
    monkeypatch.setattr(training_run, "train", lambda *args, **kwargs: stub)
    if argv[:1] == ["demo"]:
        argv = [*argv, "--max-iters=0"]  # the real demo would prepare and train for minutes
    check(world, capsys, argv)


# ----------------------------------------------------------------------------- main() itself


def test_an_oserror_that_escapes_a_command_is_one_line_exit_1(world, capsys, monkeypatch):
    from gptlab.cli import params

    def disk_gone(args):
        raise OSError(5, "Input/output error", "/some/file")

    monkeypatch.setattr(params, "run", disk_gone)
    parser_func = params.register

    def register(subparsers):
        parser_func(subparsers)
        subparsers.choices["params"].set_defaults(func=disk_gone)

    monkeypatch.setattr(params, "register", register)
    assert main(["params", "gpt2"]) == 1
    err = capsys.readouterr().err
    assert err == "gptlab params: error: /some/file: Input/output error\n"


def test_a_message_holding_a_newline_stays_on_one_line(world, capsys):
    code, _, err = check(world, capsys, ["sample", "no\nsuch\rrun"])
    assert code == 2 and "no\\nsuch\\rrun" in err


def test_a_path_that_is_not_utf8_is_printed_escaped(world, capsys):
    """Python hands argv bytes that are not UTF-8 over as lone surrogates; printing such a
    path back, in an error or in "wrote ...", raised UnicodeEncodeError."""
    code, _, err = check(world, capsys, ["sample", "run\udcff"])
    # (not a Hugging Face hub name either: those are ASCII)
    assert code == 2 and "no such run or model directory: run\\udcff" in err
    assert err.count("\n") == 1
    out_dir = world.scratch / "data\udcff"
    code, out, _ = check(world, capsys, ["prepare", "--input", str(world.short), "--out",
                                         str(out_dir)])
    assert code == 0 and "data\\udcff/" in out and (out_dir / "meta.json").is_file()


def test_nothing_in_the_world_changed_by_this_module(world):
    """The snapshot compares contents, modes and times; make sure it sees something."""
    files = snapshot(world)
    assert any(p.endswith("model.safetensors") for p in files) and len(files) >= 10
    assert not any("heads" in Path(p).parts for p in files)  # where `heads` writes by design
