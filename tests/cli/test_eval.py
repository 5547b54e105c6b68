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
    assert main(["eval", str(run), "--text", str(text), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens_scored"] == out["tokens"] - 1 == 4 * 38 - 1
    assert out["perplexity"] == pytest.approx(math.exp(out["loss"]))
    assert out["bits_per_char"] == pytest.approx(out["loss"] / math.log(2))  # char-level
    assert main(["eval", str(run), "--data", str(data), "--stride", "16"]) == 0
    printed = capsys.readouterr().out
    assert "tokens scored" in printed and "perplexity" in printed and "bits/char" in printed


@pytest.mark.parametrize("argv, message", [
    (["--text", "{empty}"], "the text is empty"),
    (["--text", "{alien}"], "not in the vocabulary"),
    (["--text", "{text}", "--stride", "0"], "stride must be between 1 and the context (16)"),
    (["--text", "{text}", "--stride", "17"], "stride must be between 1 and the context (16)"),
    (["--text", "{text}", "--context", "99"], "there is no row for position 16"),
    (["--text", "{text}", "--context", "0"], "--context: must be >= 1"),
    (["--text", "{text}", "--rope-scaling", "linear:2"], "pos_encoding is 'learned'"),
    (["--text", "{text}", "--rope-scaling", "cubic:2"], "KIND:FACTOR"),
    (["--text", "{text}", "--plot", "x.png"], "give --by-position with it"),
    (["--text", "{text}", "--batch-size", "0"], "batch_size must be >= 1"),
    (["--text", "{missing}"], "input not found"),
])
def test_bad_input_is_one_line(trained_run, text, tmp_path, capsys, argv, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "alien.txt").write_text("ZZZ")
    paths = dict(empty=tmp_path / "empty.txt", alien=tmp_path / "alien.txt", text=text,
                 missing=tmp_path / "nope.txt")
    argv = [a.format(**paths) for a in argv]
    code = main(["eval", str(trained_run), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
