"""Every command that writes, pointed at what is not its to write (issue 36, section 2): a
user's file, a user's folder of files, a run's state.pt and model.safetensors, its loss.png,
a data directory's train.bin, an export's config.json, a model's weights, an experiment, a
folder of figures' own files, a symlink to each, and the source the command reads, with and
without --force. For each:

- the exit code is 2 and the error one line on stderr, with no traceback;
- every file under the world keeps its sha256, every symlink its target, and nothing
  appears (a refusal writes nothing, not even an empty folder).

The writers: train, prepare, demo (its --out and its --data), convert --to-hf, --from-hf
and --to-gguf, eval --by-position --plot, runs --plot --out, heads, lens, patch and
attribute --out, experiment --out. (sample, params and eval without --plot write nothing;
probe writes only gptlab's cache; the lab's writes are its own tests'.) What --force is for
stays out: replacing a run with train, a data directory with prepare, an export with
--to-hf, a model with --from-hf, a run with demo, each its own kind.

Everything runs in this process (gptlab.cli.main.main) and is refused before any model
loads or trains. The issue's cases are the fast tier; every command at every target is the
slow one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from gptlab.cli.main import main
from gptlab.files import kinds
from gptlab.plots import new_figure

TINY_MODEL = {"vocab_size": 100, "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16,
              "mlp": "gelu_tanh"}  # one llama.cpp computes: --to-gguf exports it
TEXT = "First Citizen"


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_shakespeare, one_thread_module):
    """A folder of each kind gptlab writes, a user's files and folder, and a symlink to
    each, built once (the commands below never change it)."""
    root = tmp_path_factory.mktemp("writers")
    small = root / "small.txt"
    small.write_text(tiny_shakespeare.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    other = root / "other.txt"  # other text: other tokens, which replace data only by force
    other.write_text("Before we proceed any further, hear me speak.\n" * 20)
    config = root / "tiny.json"
    config.write_text(json.dumps(TINY_MODEL))
    data, run, export, model = root / "data", root / "run", root / "export", root / "model"
    assert main(["prepare", "--input", str(small), "--out", str(data)]) == 0
    assert main(["train", "--config", str(config), "--data", str(data), "--out", str(run),
                 "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1",
                 "--warmup-iters", "0", "--batch-size", "2", "--no-progress",
                 "--device", "cpu"]) == 0
    assert main(["convert", "--to-hf", str(run), "--out", str(export)]) == 0
    assert main(["convert", "--from-hf", str(export), "--out", str(model)]) == 0
    assert main(["heads", str(run), "--top", "1", "--seq-len", "4"]) == 0  # RUN/heads/
    experiment = root / "experiment"
    kinds.mark(experiment, kinds.EXPERIMENT, "experiment")
    (experiment / "experiment.json").write_text(json.dumps({  # the full size, recorded
        "kind": "experiment", "experiment": "norm",
        "configuration": {"quick": False, "steps": None, "seed": 1337, "data": None}}))
    (experiment / "report.md").write_text("# a 30-minute experiment's report\n")
    mine = root / "mine"  # the user's own folder, with files under gptlab's names
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes\n")
    (mine / "lens.png").write_bytes(b"my own lens.png")
    (mine / "config.json").write_text('{"mine": true}\n')
    notes = root / "notes.txt"
    notes.write_text("the user's notes\n")
    photo = root / "photo.png"
    new_figure(figsize=(1, 1)).savefig(photo)  # a real PNG, drawn by the user's matplotlib
    files = {"notes": notes, "photo": photo, "state": run / "state.pt",
             "weights": run / "model.safetensors", "loss-png": run / "loss.png",
             "heads-png": run / "heads" / "scores.png", "train-bin": data / "train.bin",
             "export-config": export / "config.json", "model-weights": model /
             "model.safetensors", "report": experiment / "report.md",
             "mine-lens": mine / "lens.png", "best-config": run / "best" / "config.json"}
    folders = {"mine": mine, "run": run, "data": data, "export": export, "model": model,
               "experiment": experiment, "best": run / "best"}
    links = root / "links"
    links.mkdir()
    for name, path in [*files.items(), *folders.items()]:
        (links / name).symlink_to(path, target_is_directory=path.is_dir())
    targets = {**files, **folders}
    targets.update({f"link-{name}": links / name for name in list(targets)})
    # new paths inside a folder of a kind, directly and through a symlinked folder
    targets.update({f"new-in-{name}": folders[name] / "new.png"
                    for name in ("data", "export", "experiment", "best")})
    targets.update({"new-in-link-data": links / "data" / "new.png",
                    "new-in-run-deeper": run / "sub" / "new.png"})
    scratch = tmp_path_factory.mktemp("cwd")
    before = Path.cwd()
    os.chdir(scratch)  # runs' default --out, and whatever else is relative
    yield SimpleNamespace(root=root, small=small, other=other, config=config, data=data, run=run,
                          export=export, targets=targets, fresh=itertools.count())
    os.chdir(before)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root: a file's sha256, a symlink's target, a folder's name."""
    seen = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(top, name)
            if path.is_symlink():
                seen[str(path)] = "-> " + os.readlink(path)
            elif path.is_dir():
                seen[str(path)] = "dir"
            else:
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


# Each writer: (argv with {out} for the target, whether it has --force, the kind of folder
# its --force replaces by design: its own kind, left out with --force).
WRITERS = {
    "convert-to-gguf": (["convert", "--to-gguf", "{run}", "--out", "{out}"], True, None),
    "eval-plot": (["eval", "{run}", "--text", TEXT, "--by-position", "--plot", "{out}"], True,
                  None),
    "runs-plot": (["runs", "{root}", "--plot", "run", "--out", "{out}"], True, None),
    "heads": (["heads", "{run}", "--top", "1", "--seq-len", "4", "--out", "{out}"], False,
              None),
    "lens": (["lens", "{run}", "--text", TEXT, "--out", "{out}"], False, None),
    "patch": (["patch", "{run}", "--clean", TEXT, "--corrupt", "First Citizan", "--out",
               "{out}"], False, None),
    "attribute": (["attribute", "{run}", "--text", TEXT, "--target", "e", "--out", "{out}"],
                  False, None),
    "train": (["train", "--config", "{config}", "--data", "{data}", "--out", "{out}",
               "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1",
               "--warmup-iters", "0", "--batch-size", "2", "--no-progress", "--device", "cpu"],
              True, "run"),
    "prepare": (["prepare", "--input", "{other}", "--out", "{out}"], True, "data"),
    "demo": (["demo", "--data", "{fresh}", "--out", "{out}", "--max-iters", "2",
              "--no-progress"], True, "run"),
    "demo-data": (["demo", "--data", "{out}", "--out", "{fresh}", "--max-iters", "2",
                   "--no-progress"], False, None),
    "convert-to-hf": (["convert", "--to-hf", "{run}", "--out", "{out}"], True, "export"),
    "convert-from-hf": (["convert", "--from-hf", "{export}", "--out", "{out}"], True, "model"),
    "experiment": (["experiment", "norm", "--quick", "--out", "{out}", "--data", "{data}"],
                   True, "experiment"),
}


FIGURE_WRITERS = ("heads", "lens", "patch", "attribute")
RUN_AND_DATA_WRITERS = ("train", "prepare", "demo", "demo-data")


def refused(world, capsys, writer: str, target: str, force: bool) -> str:
    """Run `writer` at `target`: assert the module's promises; its stderr."""
    argv, _, _ = WRITERS[writer]
    where = {"run": world.run, "root": world.root, "config": world.config, "data": world.data,
             "other": world.other, "export": world.export, "out": world.targets[target],
             "fresh": world.root / f"fresh-{next(world.fresh)}"}
    argv = [a.format(**{k: str(v) for k, v in where.items()}) for a in argv]
    argv += ["--force"] if force else []
    before = snapshot(world.root)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    shown = f"gptlab {' '.join(argv)}\nexit {code}\nstderr: {err}"
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, shown
    assert err.startswith("gptlab ") and " error: " in err, shown
    assert snapshot(world.root) == before, f"a file changed:\n{shown}"
    return err


def cases(writers=WRITERS, targets=None):
    """(writer, target, force) for every writer at every target, --force where it has one,
    but for what its --force is for."""
    names = targets or list(_TARGET_NAMES)
    for writer, (_, has_force, own) in writers.items():
        for target, force in itertools.product(names, (False, True)):
            if force and not has_force:
                continue
            if force and own is not None and target in (own, f"link-{own}"):
                continue
            if writer in FIGURE_WRITERS and target in ("new-in-export", "new-in-best"):
                continue  # a model's own figures, right inside its folder: by design
            if writer in RUN_AND_DATA_WRITERS and target == "new-in-experiment":
                continue  # an experiment's runs and data: by design
            yield writer, target, force


_FILES = ("notes", "photo", "state", "weights", "loss-png", "heads-png", "train-bin",
          "export-config", "model-weights", "report", "mine-lens", "best-config")
_FOLDERS = ("mine", "run", "data", "export", "model", "experiment", "best")
_NEW = (*(f"new-in-{n}" for n in ("data", "export", "experiment", "best")),
        "new-in-link-data", "new-in-run-deeper")
_TARGET_NAMES = (*_FILES, *_FOLDERS, *(f"link-{n}" for n in (*_FILES, *_FOLDERS)), *_NEW)

# The issue's cases, one by one: the fast tier.
ISSUE_CASES = [
    # 1. convert --to-gguf --out FILE --force over anything not a .gguf it exported
    *[("convert-to-gguf", t, True) for t in ("train-bin", "weights", "state", "export-config",
                                             "notes", "link-state", "run")],
    # 2. lens / heads / patch --out a folder of the user's files, also through a symlink
    *[(w, t, False) for w in ("lens", "heads", "patch", "attribute")
      for t in ("mine", "link-mine", "data", "best")],
    # 3. one rule for every figure: a run's loss.png, the user's own PNG
    *[(w, t, f) for w in ("eval-plot", "runs-plot") for t in ("loss-png", "photo", "link-photo")
      for f in (False, True)],
    # 4. prepare over a data directory without --force
    ("prepare", "data", False), ("prepare", "link-data", False),
    # 5. an experiment's folder holding another configuration's results (the full size)
    ("experiment", "experiment", False), ("experiment", "link-experiment", False),
]


@pytest.mark.parametrize(("writer", "target", "force"), ISSUE_CASES,
                         ids=[f"{w}-{t}{'-force' * f}" for w, t, f in ISSUE_CASES])
def test_the_issues_cases_are_refused_and_change_nothing(world, capsys, writer, target, force):
    refused(world, capsys, writer, target, force)


@pytest.mark.slow
def test_every_writer_at_every_protected_target(world, capsys):
    """About 1,000 refusals: every writer, every target, with and without --force."""
    done = 0
    for writer, target, force in cases():
        refused(world, capsys, writer, target, force)
        done += 1
    assert done > 800


def test_what_the_rule_lets_through(world, capsys, tmp_path):
    """The same commands where they may write: a new file, then the same one again only
    with --force; the same data prepared again; `gptlab heads RUN` into RUN/heads/ again."""
    figure = tmp_path / "by-position.png"
    gguf_file = tmp_path / "run.gguf"
    for argv, out in ((["eval", str(world.run), "--text", TEXT, "--by-position", "--plot"],
                       figure),
                      (["convert", "--to-gguf", str(world.run), "--out"], gguf_file)):
        assert main([*argv, str(out)]) == 0
        first = out.read_bytes()
        assert main([*argv, str(out)]) == 2
        assert "already exists: --force replaces it" in capsys.readouterr().err
        assert out.read_bytes() == first
        assert main([*argv, str(out), "--force"]) == 0
    before = snapshot(world.root)  # the data's own text again: the same tokens, unchanged
    assert main(["prepare", "--input", str(world.small), "--out", str(world.data)]) == 0
    assert "already holds these tokens: unchanged" in capsys.readouterr().out
    assert snapshot(world.root) == before
    heads = world.run / "heads"
    before = sorted(p.name for p in heads.iterdir())
    assert main(["heads", str(world.run), "--top", "1", "--seq-len", "4"]) == 0
    assert sorted(p.name for p in heads.iterdir()) == before  # the same figures, again
    assert kinds.kind_of(heads) == kinds.FIGURES and "scores.png" in before


# --- a shipped model's name, shadowed by a folder of the user's ----------------------------
# `gptlab heads shakespeare` with a run of the user's in ./shakespeare loaded the shipped
# model (its name wins: gptlab.loading.resolve) and wrote that model's figures into
# ./shakespeare/heads, replacing the run's scores.json and scores.png. Each figure writer
# is run on the shipped name with such a folder beside it: the folder keeps every byte, and
# each record names the model it describes.
SHADOWING = {
    "heads-default": (["heads", "shakespeare", "--top", "1", "--seq-len", "4"], None),
    "heads": (["heads", "shakespeare", "--top", "1", "--seq-len", "4", "--out", "figs"],
              "figs/scores.json"),
    "lens": (["lens", "shakespeare", "--text", TEXT, "--out", "figs"], "figs/lens.json"),
    "attribute": (["attribute", "shakespeare", "--text", TEXT, "--target", "e", "--out",
                   "figs"], "figs/attribution.json"),
    "patch": (["patch", "shakespeare", "--clean", TEXT, "--corrupt", "First Citizan",
               "--target", "s", "--versus", "e", "--out", "figs"], "figs/patch.json"),
    "eval-plot": (["eval", "shakespeare", "--text", TEXT, "--by-position", "--plot",
                   "by-position.png"], None),
    # runs names runs, not models: ./shakespeare is the user's run, read and never written
    "runs-plot": (["runs", ".", "--plot", "shakespeare", "--out", "curves.png"], None),
}


@pytest.fixture
def shadowing(world, tmp_path, monkeypatch):
    """A working folder holding ./shakespeare: a copy of the world's run, its heads/
    figures included."""
    import shutil

    here = tmp_path / "here"
    here.mkdir()
    shutil.copytree(world.run, here / "shakespeare", symlinks=True)
    assert (here / "shakespeare" / "heads" / "scores.json").is_file()
    monkeypatch.chdir(here)
    return here


def shipped_record() -> dict:
    from gptlab import pretrained

    return {"model": "shakespeare", "kind": "shipped",
            "path": str(pretrained.folder("shakespeare").resolve()),
            "sha256": {"model.safetensors":
                       pretrained.manifest("shakespeare")["sha256"]["model.safetensors"]}}


@pytest.mark.parametrize("writer", list(SHADOWING))
def test_a_folder_named_like_the_shipped_model_keeps_every_byte(shadowing, capsys, writer):
    argv, record = SHADOWING[writer]
    before = snapshot(shadowing / "shakespeare")
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert snapshot(shadowing / "shakespeare") == before, err
    if writer == "heads-default":  # no folder of the user's is the shipped model's
        assert code == 2 and err.count("\n") == 1, err
        assert err == ("gptlab heads: error: shakespeare is the model gptlab ships, not a "
                       "folder of yours, so there is no shakespeare/heads to write into: give "
                       "--out DIR (the folder shakespeare here is another model: write "
                       "./shakespeare to use it)\n")
        return
    assert code == 0, err
    if record is not None:
        assert json.loads((shadowing / record).read_text())["model"] == shipped_record()


def test_the_users_folder_written_as_a_path_gets_its_own_figures(shadowing, capsys):
    run = shadowing / "shakespeare"
    assert main(["heads", "./shakespeare", "--top", "1", "--seq-len", "4"]) == 0
    record = json.loads((run / "heads" / "scores.json").read_text())["model"]
    assert record == {"model": "./shakespeare", "kind": "gptlab", "path": str(run.resolve()),
                      "sha256": {"model.safetensors": hashlib.sha256(
                          (run / "model.safetensors").read_bytes()).hexdigest()}}
    assert record["sha256"] != shipped_record()["sha256"]
