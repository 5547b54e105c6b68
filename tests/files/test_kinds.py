"""What a folder holds (gptlab.files.kinds): a Hugging Face model directory is told from a
gptlab one by its config.json alone; every kind of folder, marked or as an earlier version
left it; and the rule every writer of a folder follows (claim)."""

import json

import pytest

from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.kinds import is_hf_dir
from gptlab.model.gpt import GPT
from gptlab.model_dir import save_model


def test_a_hugging_face_directory_is_told_from_a_gptlab_one(tmp_path, tiny_model,
                                                            random_hf_model):
    random_hf_model("gpt2-tied-3heads").save_pretrained(tmp_path / "hf")
    save_model(GPT(tiny_model()), tmp_path / "ours")
    assert is_hf_dir(tmp_path / "hf") and is_hf_dir(str(tmp_path / "hf"))
    assert not is_hf_dir(tmp_path / "ours")


@pytest.mark.parametrize("config", [
    None,  # no config.json at all
    "{not json",
    "[1, 2]",
    json.dumps({"n_layer": 2}),  # no model_type
    json.dumps({"model_type": "gpt2", "pos_encoding": "learned"}),  # one of gptlab's fields
])
def test_anything_else_is_not_a_hugging_face_directory(tmp_path, config):
    if config is not None:
        (tmp_path / "config.json").write_text(config)
    assert not is_hf_dir(tmp_path)
    assert not is_hf_dir(tmp_path / "missing")


# --- the folder rule (gptlab.files.kinds.claim) ---------------------------------------------


def gptlab_figure(path):
    from gptlab.plots import Figure, new_figure

    return Figure(new_figure(figsize=(1, 1))).save(path)


def matplotlib_figure(path):
    from gptlab.plots import new_figure

    new_figure(figsize=(1, 1)).savefig(path)
    return path


@pytest.fixture
def folders(tmp_path, tiny_model, random_hf_model):
    """One folder of each kind as gptlab writes it today (marked) and as an earlier version
    left it (the same files, no mark), plus a user's folder and an empty one."""
    made = {}
    for marked in (True, False):
        tag = "" if marked else "-unmarked"
        run = tmp_path / f"run{tag}"
        for name, text in (("config.json", json.dumps(tiny_model().to_dict())),
                           ("train.json", "{}"), ("tokenizer.json", "{}")):
            run.mkdir(exist_ok=True)
            (run / name).write_text(text)
        save_model(GPT(tiny_model()), run)
        (run / "state.pt").write_bytes(b"state")
        save_model(GPT(tiny_model()), run / "best")
        data = tmp_path / f"data{tag}"
        data.mkdir()
        (data / "meta.json").write_text(json.dumps({"version": 1, "vocab_size": 3,
                                                    "train_tokens": 4, "val_tokens": 1}))
        (data / "train.bin").write_bytes(b"\0" * 8)
        model = tmp_path / f"model{tag}"
        save_model(GPT(tiny_model()), model)
        export = tmp_path / f"export{tag}"
        random_hf_model("gpt2-tied-3heads").save_pretrained(export)
        for kind, path in (("run", run), ("data", data), ("model", model), ("export", export)):
            if marked:
                kinds.mark(path, kind, "test")
            made[kind + tag] = path
    figures, older = tmp_path / "figures", tmp_path / "figures-unmarked"
    kinds.mark(figures, "figures", "test")
    gptlab_figure(figures / "scores.png")
    (figures / "scores.json").write_text('{"scores": {}}\n')
    older.mkdir()
    matplotlib_figure(older / "lens.png")  # as gptlab drew them before its mark
    (older / "lens.json").write_text('{"rows": []}\n')
    made["figures"], made["figures-unmarked"] = figures, older
    experiment = tmp_path / "experiment"
    kinds.mark(experiment, "experiment", "test")
    (experiment / "report.md").write_text("# results\n")
    made["experiment"] = experiment
    mine = tmp_path / "mine"  # the user's own files, as in issue 23's reproduction 4
    mine.mkdir()
    for name in ("config.json", "train.json", "metrics.jsonl"):
        (mine / name).write_text('{"mine": true}\n')
    made["mine"] = mine
    (tmp_path / "empty").mkdir()
    made["empty"] = tmp_path / "empty"
    return made


def test_every_kind_is_told_marked_or_by_the_files_an_earlier_version_wrote(folders):
    for name, path in folders.items():
        expected = None if name in ("mine", "empty") else name.removesuffix("-unmarked")
        assert kinds.kind_of(path) == expected, name
    assert kinds.recognise(folders["empty"]).empty
    assert kinds.recognise(folders["mine"]).entries == ("config.json", "metrics.jsonl",
                                                       "train.json")
    assert kinds.recognise(folders["run"]).by == "test"
    assert kinds.read_marker(folders["run"]) == {"kind": "run", "version": 1, "by": "test"}


@pytest.mark.parametrize("kind", kinds.KINDS)
@pytest.mark.parametrize("force", [False, True])
def test_another_kind_or_a_users_folder_is_refused_even_with_force(folders, kind, force, tree):
    for name, path in folders.items():
        there = kinds.kind_of(path)
        if name == "empty" or there == kind:
            continue
        before = tree(path)
        with pytest.raises(UsageError) as refused:
            kinds.claim(path, kind, force=force)
        message = str(refused.value)
        assert "\n" not in message and str(path) in message
        if there is None:
            assert "holds files gptlab did not write (config.json, metrics.jsonl, train.json)" \
                in message
        else:
            assert f"is {kinds.DESCRIPTION[there]}" in message
        assert tree(path) == before


def test_the_same_kind_is_replaced_only_with_force_where_it_holds_work(folders, tmp_path):
    for kind in ("run", "data", "model", "export"):
        for path in (folders[kind], folders[f"{kind}-unmarked"]):
            with pytest.raises(UsageError, match="already holds .*: --force replaces it"):
                kinds.claim(path, kind)
            assert kinds.claim(path, kind, force=True).kind == kind
    # figures are drawn again from the model: written again without force
    for path in (folders["figures"], folders["figures-unmarked"]):
        assert kinds.claim(path, "figures").kind == "figures"
    with pytest.raises(UsageError, match="already holds an experiment \\(report.md\\)"):
        kinds.claim(folders["experiment"], "experiment")
    # a data directory whose tokens are gone (a prepare that stopped early) holds no work
    (folders["data"] / "train.bin").unlink()
    assert kinds.claim(folders["data"], "data").kind == "data"
    # a run that kept nothing (what a crash before its first checkpoint leaves) is not work
    leftovers = tmp_path / "leftovers"
    kinds.mark(leftovers, "run", "train")
    (leftovers / "train.json").write_text("{}")
    assert kinds.claim(leftovers, "run").work() == []
    # absent and empty folders take any kind, and nothing is created by a claim
    for kind in kinds.KINDS:
        assert kinds.claim(tmp_path / "new" / "deeper", kind).empty
        assert kinds.claim(folders["empty"], kind).empty
    assert not (tmp_path / "new").exists() and not any(folders["empty"].iterdir())


def test_a_folder_inside_a_run_is_the_runs(folders, tmp_path):
    for run in (folders["run"], folders["run-unmarked"]):
        with pytest.raises(UsageError, match="is part of the training run in"):
            kinds.claim(run / "best", "model", force=True)
    assert kinds.claim(tmp_path / "empty" / "best", "model").empty  # not a run: fine


def test_a_lock_or_desktop_clutter_leaves_a_folder_empty(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / ".lock").write_text("123\n")
    (tmp_path / "f" / ".DS_Store").write_bytes(b"")
    assert kinds.claim(tmp_path / "f", "run").empty


def test_a_path_that_is_a_file_is_no_folder(tmp_path):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError, match="exists and is not a directory"):
        kinds.claim(tmp_path / "a-file", "run")


# --- a folder of figures (gptlab heads, lens, patch, attribute --out) ------------------------


def test_figures_may_go_in_a_models_folder_and_in_no_other_folder_of_a_kind(folders, tmp_path,
                                                                             tree):
    for run in (folders["run"], folders["run-unmarked"]):
        assert kinds.claim(run / "heads", "figures").empty  # `gptlab heads RUN`'s default
    old_heads = folders["run"] / "heads"
    old_heads.mkdir()
    matplotlib_figure(old_heads / "layer0_head1.png")  # as an earlier `gptlab heads` left it
    assert kinds.claim(old_heads, "figures").kind == "figures"
    for model in (folders["run"] / "best", folders["model-unmarked"], folders["export"]):
        assert kinds.claim(model / "lens", "figures").empty  # a model's own figures too
    for inside in (folders["data"] / "figs", folders["run"] / "best" / "figs" / "deeper",
                   folders["run"] / "figs" / "deeper", folders["data-unmarked"] / "figs",
                   folders["experiment"] / "figs", folders["model-unmarked"] / "a" / "b"):
        before = tree(tmp_path)
        with pytest.raises(UsageError, match=r"is inside .*: give the figures a folder of"):
            kinds.claim(inside, "figures")
        assert tree(tmp_path) == before and not inside.exists()


def test_a_folder_of_figures_holds_nothing_of_the_users(folders, tmp_path):
    figures = folders["figures"]
    notes = tmp_path / "notes.png"
    notes.write_bytes(b"the user's own")
    (figures / "lens.png").symlink_to(notes)  # a same-named file through a symlink
    with pytest.raises(UsageError, match=r"holds files gptlab did not write \(lens.png\)"):
        kinds.claim(figures, "figures")
    (figures / "lens.png").unlink()
    (figures / "lens.png").write_bytes(b"not a figure")  # the user's, under gptlab's name
    with pytest.raises(UsageError, match=r"holds files gptlab did not write \(lens.png\)"):
        kinds.claim(figures, "figures")
    (figures / "lens.png").unlink()
    (figures / "notes.txt").write_text("mine\n")
    with pytest.raises(UsageError, match=r"holds files gptlab did not write \(notes.txt\)"):
        kinds.claim(figures, "figures")
    # without the mark, gptlab's names holding anything but its figures are the user's
    mine = tmp_path / "mine-figures"
    mine.mkdir()
    (mine / "scores.png").write_bytes(b"\x89PNG not really")
    assert kinds.kind_of(mine) is None
    with pytest.raises(UsageError, match="holds files gptlab did not write"):
        kinds.claim(mine, "figures")


def test_a_symlink_to_a_folder_is_judged_by_where_it_leads(folders, tmp_path):
    for name in ("run", "data", "mine", "export"):
        link = tmp_path / f"link-to-{name}"
        link.symlink_to(folders[name], target_is_directory=True)
        with pytest.raises(UsageError):
            kinds.claim(link, "figures")
    into_best = tmp_path / "link-into-best"
    into_best.symlink_to(folders["run"] / "best", target_is_directory=True)
    with pytest.raises(UsageError, match="is inside"):
        kinds.claim(into_best / "figs" / "deeper", "figures")


# --- one file (gptlab.files.kinds.claim_file) ----------------------------------------------


PROTECTED = [("run", "state.pt"), ("run", "model.safetensors"), ("run", "best/config.json"),
             ("run-unmarked", "state.pt"), ("data", "train.bin"), ("data-unmarked", "meta.json"),
             ("export", "config.json"), ("export-unmarked", "config.json"),
             ("model", "model.safetensors"), ("experiment", "report.md"),
             ("figures", "scores.png"), ("run", "new.gguf"), ("data", "new.png")]


@pytest.mark.parametrize("output,suffix", [("figure", ".png"), ("gguf", ".gguf")])
@pytest.mark.parametrize("force", [False, True])
def test_no_file_inside_a_folder_of_a_kind_even_with_force(folders, tmp_path, tree, output,
                                                           suffix, force):
    for name, inside in PROTECTED:
        target = folders[name] / inside
        if output == "figure" and target.suffix not in (".png", ".svg"):
            target = target.with_name(target.name + ".png")  # the suffix aside, the same place
        link = tmp_path / f"link{suffix}"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        before = tree(tmp_path)
        for path in (target, link):
            with pytest.raises(UsageError) as refused:
                kinds.claim_file(path, output, force=force)
            message = str(refused.value)
            assert "\n" not in message and message.startswith(f"--out {path}")
            assert "is inside" in message or "symbolic link" in message
        assert tree(tmp_path) == before


def test_an_existing_file_is_replaced_only_with_force_and_only_if_gptlab_wrote_it(tmp_path,
                                                                                 write_gguf):
    ours = gptlab_figure(tmp_path / "ours.png")
    ours_svg = gptlab_figure(tmp_path / "ours.svg")
    older = matplotlib_figure(tmp_path / "older.png")
    notes = tmp_path / "notes.png"
    notes.write_text("the user's notes\n")
    model = write_gguf(tmp_path / "model.gguf", **{"gptlab.version": "test"})
    foreign = write_gguf(tmp_path / "foreign.gguf", **{"general.author": "test"})
    for path, output in ((ours, "figure"), (ours_svg, "figure"), (model, "gguf")):
        with pytest.raises(UsageError, match="already exists: --force replaces it"):
            kinds.claim_file(path, output)
        assert kinds.claim_file(path, output, force=True) == path
    for path, output in ((older, "figure"), (notes, "figure"), (foreign, "gguf"),
                         (ours, "gguf"), (model.rename(tmp_path / "model.png"), "figure")):
        for force in (False, True):
            what = {"figure": "figure", "gguf": "GGUF file"}[output]
            with pytest.raises(UsageError, match=f"is not a {what} gptlab wrote"):
                kinds.claim_file(path, output, force=force)
    fresh = tmp_path / "new" / "deeper" / "fig.svg"
    assert kinds.claim_file(fresh, "figure") == fresh and not (tmp_path / "new").exists()


def test_a_file_is_never_its_source_nor_a_directory_nor_a_bad_figure_name(folders, tmp_path):
    source = gptlab_figure(tmp_path / "source.png")
    with pytest.raises(UsageError, match="is .*source.png, what the figure is made from"):
        kinds.claim_file(source, "figure", force=True, sources=(source,))
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    with pytest.raises(UsageError, match="is inside .*src, what the GGUF file is made from"):
        kinds.claim_file(src_dir / "x.gguf", "gguf", sources=(src_dir, "not-a-path"))
    with pytest.raises(UsageError, match="is a directory"):
        kinds.claim_file(folders["empty"], "gguf", force=True)
    with pytest.raises(UsageError, match=r"a figure is written as \.png or \.svg"):
        kinds.claim_file(tmp_path / "fig.jpg", "figure")
    dangling = tmp_path / "dangling.png"
    dangling.symlink_to(tmp_path / "nowhere.png")
    with pytest.raises(UsageError, match="is a symbolic link"):
        kinds.claim_file(dangling, "figure")
    with pytest.raises(UsageError, match="--plot .*is a symbolic link"):
        kinds.claim_file(dangling, "figure", flag="--plot")


def test_no_folder_of_a_kind_is_made_inside_another_but_an_experiments(folders):
    assert kinds.enclosing(folders["run"] / "best" / "x") == ("model", folders["run"] / "best")
    assert kinds.enclosing(folders["data-unmarked"] / "a" / "b") == ("data",
                                                                     folders["data-unmarked"])
    assert kinds.enclosing(folders["mine"] / "x") is None
    for host in ("data", "export", "model-unmarked", "run"):
        for kind in ("run", "data", "model", "export", "experiment"):
            with pytest.raises(UsageError, match="is inside .*: give the .* a folder of its own"):
                kinds.claim(folders[host] / "new" / "deeper", kind)
    experiment = folders["experiment"]
    assert kinds.claim(experiment / "runs" / "rope", "run").empty  # gptlab.experiments.grid
    assert kinds.claim(experiment / "data", "data").empty
    with pytest.raises(UsageError, match="is inside"):
        kinds.claim(experiment / "export", "export")
