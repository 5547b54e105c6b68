"""Whether gptlab wrote a file, from the file's own metadata (gptlab.files.authorship)."""

import pytest

from gptlab.files import authorship
from gptlab.plots import Figure, new_figure


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_a_figure_gptlab_drew_carries_its_mark(tmp_path, suffix):
    ours = Figure(new_figure(figsize=(1, 1))).save(tmp_path / f"ours{suffix}")
    theirs = tmp_path / f"theirs{suffix}"
    new_figure(figsize=(1, 1)).savefig(theirs)  # matplotlib's own mark
    assert authorship.figure_creator(ours) == authorship.FIGURE_CREATOR
    assert authorship.written_by_gptlab(ours, "figure")
    assert authorship.figure_creator(theirs).startswith("Matplotlib")
    assert not authorship.is_gptlab_figure(theirs)
    assert authorship.is_gptlab_figure(theirs, earlier=True)
    assert not authorship.written_by_gptlab(ours, "gguf")


def test_anything_else_is_not_ours(tmp_path):
    notes = tmp_path / "notes.png"
    notes.write_text("a text under a figure's name\n")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    for path in (notes, truncated, tmp_path / "missing.png", tmp_path / "missing.svg"):
        assert authorship.figure_creator(path) is None
        assert not authorship.written_by_gptlab(path, "figure")
        assert not authorship.written_by_gptlab(path, "gguf")
    with pytest.raises(ValueError, match="unknown kind of output"):
        authorship.written_by_gptlab(notes, "pdf")


def test_a_gguf_file_gptlab_exported_holds_its_key(tmp_path, write_gguf):
    ours = write_gguf(tmp_path / "ours.gguf", **{"gptlab.version": "1"})
    assert authorship.is_gptlab_gguf(ours)
    assert not authorship.is_gptlab_gguf(write_gguf(tmp_path / "llama.gguf",
                                                    **{"general.name": "x"}))
    (tmp_path / "cut.gguf").write_bytes(b"GGUF\3\0\0\0")
    assert not authorship.is_gptlab_gguf(tmp_path / "cut.gguf")


def test_without_the_gguf_package_nothing_is_taken_as_ours(tmp_path, monkeypatch, write_gguf):
    ours = write_gguf(tmp_path / "ours.gguf", **{"gptlab.version": "1"})
    monkeypatch.setitem(__import__("sys").modules, "gguf", None)  # import gguf fails
    assert not authorship.is_gptlab_gguf(ours)
