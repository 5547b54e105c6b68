"""The --out check of the commands that write figures (gptlab.cli.outdir): a new or empty
folder, or one of gptlab's figures, right inside a model's folder at most; anything else is
refused in one line before any work, and open_out_dir makes and marks the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from gptlab.cli.outdir import check_out_dir, open_out_dir
from gptlab.errors import UsageError
from gptlab.files import kinds


def test_a_new_or_empty_folder_is_taken_and_nothing_is_made(tmp_path):
    assert check_out_dir(str(tmp_path / "new")) == tmp_path / "new"
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert check_out_dir(tmp_path / "empty") == tmp_path / "empty"


def test_open_out_dir_makes_and_marks_a_folder_of_figures(tmp_path):
    out = open_out_dir(tmp_path / "figs", by="heads")
    assert kinds.read_marker(out) == {"kind": kinds.FIGURES, "version": kinds.MARKER_VERSION,
                                      "by": "heads"}
    assert check_out_dir(out) == out  # gptlab's folder of figures: written again
    assert open_out_dir(out, by="lens") == out and kinds.read_marker(out)["by"] == "lens"
    (out / "scores.png").write_bytes(b"not drawn by gptlab")  # no mark of its own
    with pytest.raises(UsageError, match=r"holds files gptlab did not write \(scores.png\)"):
        check_out_dir(out)


@pytest.mark.parametrize("kind", [kinds.RUN, kinds.DATA, kinds.EXPERIMENT])
def test_another_kind_of_folder_is_refused_in_one_line(tmp_path, kind):
    kinds.mark(tmp_path / "other", kind, by="test")
    (tmp_path / "other" / "notes.txt").write_text("work")
    with pytest.raises(UsageError) as error:
        check_out_dir(tmp_path / "other")
    assert kinds.DESCRIPTION[kind] in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(UsageError):
        open_out_dir(tmp_path / "other", by="heads")
    assert kinds.read_marker(tmp_path / "other")["kind"] == kind  # left as it was


def test_a_folder_of_someone_elses_files_is_refused(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep me")
    with pytest.raises(UsageError, match="notes"):
        open_out_dir(tmp_path / "notes", by="heads")
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["mine.txt"]


def test_right_inside_a_runs_folder_but_no_deeper(tmp_path):
    kinds.mark(tmp_path / "run", kinds.RUN, by="train")
    assert check_out_dir(tmp_path / "run" / "heads") == tmp_path / "run" / "heads"
    with pytest.raises(UsageError):
        check_out_dir(tmp_path / "run" / "heads" / "deeper")


def test_a_models_own_figures_go_into_the_folder_it_resolves_to(tmp_path, monkeypatch,
                                                                 save_char_model):
    """`gptlab heads shakespeare` with a run of the user's in ./shakespeare wrote the
    shipped model's figures into ./shakespeare/heads: the default follows the resolver."""
    from gptlab.cli.outdir import beside_model

    run, *_ = save_char_model(tmp_path / "shakespeare", "abc\n", preset="tiny-gpt2")
    monkeypatch.chdir(tmp_path)
    assert beside_model("./shakespeare", "heads") == Path("shakespeare") / "heads"
    assert beside_model(str(run), "heads") == run / "heads"
    with pytest.raises(UsageError, match=r"^shakespeare is the model gptlab ships, not a folder "
                                         r"of yours, .* give --out DIR \(the folder "
                                         r"shakespeare here is another model"):
        beside_model("shakespeare", "heads")
    with pytest.raises(UsageError, match="no such run or model directory: nothere"):
        beside_model("nothere", "heads")
    with pytest.raises(UsageError, match="^someone/model is not a local directory"):
        beside_model("someone/model", "heads")
