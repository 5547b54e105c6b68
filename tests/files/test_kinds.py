"""What a folder holds (gptlab.files.kinds): a Hugging Face model directory is told from a
gptlab one by its config.json alone; every kind of folder, marked or as an earlier version
left it; and the rule every writer of a folder follows (claim)."""

import json

import pytest

from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.kinds import is_hf_dir
from gptlab.files.model_dir import save_model
from gptlab.model.gpt import GPT


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
    for kind in ("run", "model", "export"):
        for path in (folders[kind], folders[f"{kind}-unmarked"]):
            with pytest.raises(UsageError, match="already holds .*: --force replaces it"):
                kinds.claim(path, kind)
            assert kinds.claim(path, kind, force=True).kind == kind
    with pytest.raises(UsageError, match="already holds an experiment \\(report.md\\)"):
        kinds.claim(folders["experiment"], "experiment")
    # a data directory is prepared again (gptlab.data.prepared checks its tokenizer)
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


def test_loose_files_never_go_into_a_kind_of_folder(folders, tmp_path):
    for path in folders.values():
        if kinds.kind_of(path) is None:
            assert kinds.check_loose(path) == path
        else:
            with pytest.raises(UsageError, match="give these files a folder of their own"):
                kinds.check_loose(path)
    assert kinds.check_loose(folders["run"] / "heads") == folders["run"] / "heads"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError, match="exists and is not a directory"):
        kinds.claim(tmp_path / "a-file", "run")
