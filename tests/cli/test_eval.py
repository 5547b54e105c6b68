"""`gptlab eval` on a trained run: the figures for a text file and for a data directory's
validation split, and every bad input in one line."""

from __future__ import annotations

import json
import math

import pytest

from gptlab.cli.main import main


@pytest.fixture
def text(tmp_path):
    """Four lines in the trained run's vocabulary (38 characters each)."""
    path = tmp_path / "text.txt"
    path.write_text("the king and queen said my good lord.\n" * 4)
    return path


def test_cli_on_text_and_data(trained_run, text, capsys):
    run, data = trained_run, trained_run.parent / "data"
    assert main(["eval", str(run), "--text-file", str(text), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens_scored"] == out["tokens"] - 1 == 4 * 38 - 1
    assert out["perplexity"] == pytest.approx(math.exp(out["loss"]))
    assert out["bits_per_char"] == pytest.approx(out["loss"] / math.log(2))  # char-level
    assert main(["eval", str(run), "--data", str(data), "--stride", "16"]) == 0
    printed = capsys.readouterr().out
    assert "tokens scored" in printed and "perplexity" in printed and "bits/char" in printed


@pytest.mark.parametrize("argv, message", [
    (["--text-file", "{empty}"], "the text is empty"),
    (["--text-file", "{alien}"], "not in the vocabulary"),
    (["--text", "ZZZ"], "not in the vocabulary"),
    (["--text-file", "{text}", "--stride", "0"], "argument --stride: must be >= 1, got 0"),
    (["--text-file", "{text}", "--stride", "17"],
     "stride must be between 1 and the context (16)"),
    (["--text-file", "{text}", "--context", "99"],
     "context must be between 2 and the model's"),
    # a window of one token predicts nothing (it was a ZeroDivisionError)
    (["--text-file", "{text}", "--context", "1"], "argument --context: must be >= 2, got 1"),
    (["--text-file", "{text}", "--batch-size", "0"], "argument --batch-size: must be >= 1"),
    (["--text-file", "{missing}"], "input not found"),
    (["--text-file", "{dir}"], "is a directory; give text files"),
    (["--text", "the king", "--split", "train"], "--split chooses a split of --data"),
])
def test_bad_input_is_one_line(trained_run, text, tmp_path, capsys, argv, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "alien.txt").write_text("ZZZ")
    paths = dict(empty=tmp_path / "empty.txt", alien=tmp_path / "alien.txt", text=text,
                 missing=tmp_path / "nope.txt", dir=tmp_path)
    argv = [a.format(**paths) for a in argv]
    code = main(["eval", str(trained_run), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_text_is_the_text_itself_and_text_file_a_file(trained_run, text, capsys):
    """--text means the text in every command; --text-file a file. The old `--text FILE`
    still reads the file, and says so after its figures (its errors stay one line)."""
    line = "the king and queen said my good lord.\n"
    figures = []
    for argv in (["--text", line.replace("\n", "\\n") * 4], ["--text-file", str(text)],
                 ["--text", str(text)]):
        assert main(["eval", str(trained_run), *argv, "--json"]) == 0
        captured = capsys.readouterr()
        figures.append(json.loads(captured.out)["loss"])
        legacy = argv == ["--text", str(text)]
        assert ("--text FILE is deprecated" in captured.err) == legacy, captured.err
        assert (f"give --text-file {text}" in captured.err) == legacy
    assert figures[0] == figures[1] == figures[2]
