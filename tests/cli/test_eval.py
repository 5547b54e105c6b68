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
    (["--text-file", "{text}", "--context", "99"], "there is no row for position 16"),
    # a window of one token predicts nothing (it was a ZeroDivisionError)
    (["--text-file", "{text}", "--context", "1"], "argument --context: must be >= 2, got 1"),
    (["--text-file", "{text}", "--batch-size", "0"], "argument --batch-size: must be >= 1"),
    (["--text-file", "{missing}"], "input not found"),
    (["--text-file", "{dir}"], "is a directory; give text files"),
    (["--text", "the king", "--split", "train"], "--split chooses a split of --data"),
    (["--text-file", "{text}", "--rope-scaling", "linear:2"], "pos_encoding is 'learned'"),
    (["--text-file", "{text}", "--rope-scaling", "cubic:2"], "KIND:FACTOR"),
    (["--text-file", "{text}", "--plot", "x.png"], "give --by-position with it"),
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


def test_a_text_longer_than_any_file_name_is_scored_as_text(trained_run, capsys):
    # regression: a --text too long to be a path ("File name too long") failed the
    # old-style `--text FILE` check instead of being scored
    line = "the king and queen said my good lord. " * 20  # 760 characters: no path
    assert main(["eval", str(trained_run), "--text", line, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["tokens"] == len(line) and captured.err == ""


@pytest.fixture(scope="module")
def rope_run(tmp_path_factory, save_char_model):
    """A random-weight RoPE model of context 16 and the text it is scored on (200 chars)."""
    text = "the king and queen said my good lord. " * 6
    directory, _, _ = save_char_model(tmp_path_factory.mktemp("rope") / "run", text,
                                      block_size=16, n_layer=1, n_head=2, n_embd=16,
                                      pos_encoding="rope")
    path = directory.parent / "text.txt"
    path.write_text(text)
    return directory, path


def test_a_context_past_block_size_warns_once_and_scores(rope_run, gptlab):
    run, text = rope_run
    code, out, err = gptlab("eval", run, "--text-file", text, "--context", "64", "--json")
    assert code == 0 and err == ("gptlab eval: warning: context 64 is longer than the 16 "
                                 "positions the model was trained on (block_size): it never "
                                 "saw positions 16..63\n")
    assert json.loads(out)["context"] == 64


def test_by_position_in_both_modes_as_json_a_table_and_a_plot(rope_run, gptlab, tmp_path,
                                                              png_magic):
    run, text = rope_run
    for stride, mode in (("64", "non-overlapping"), ("8", "sliding")):
        code, out, _ = gptlab("eval", run, "--text-file", text, "--context", "64", "--stride",
                              stride, "--by-position", "--buckets", "4", "--json")
        figures = json.loads(out)
        by = figures["by_position"]
        assert code == 0 and by["mode"] == mode and len(by["buckets"]) == 4
        assert [(b["first"], b["last"]) for b in by["buckets"]] == [(0, 15), (16, 31), (32, 47),
                                                                    (48, 63)]
        mean = math.fsum(b["loss"] * b["tokens"] for b in by["buckets"] if b["tokens"])
        assert mean / figures["tokens_scored"] == pytest.approx(figures["loss"], rel=1e-12)
    plot = tmp_path / "by.png"
    code, out, _ = gptlab("eval", run, "--text-file", text, "--context", "64", "--stride", "64",
                          "--by-position", "--plot", plot)
    assert code == 0 and plot.read_bytes().startswith(png_magic)
    assert "by position (non-overlapping windows of 64, stride 64" in out
    lines = out.splitlines()
    first = next(line for line in lines if line.strip().startswith("0..7"))
    last = next(line for line in lines if line.strip().startswith("56..63"))
    assert not first.endswith("*") and last.endswith(" *")  # past the trained positions


def test_rope_scaling_at_inference_changes_the_loss_only_past_factor_one(rope_run, gptlab):
    """At factor 1 every rule is RoPE as trained, up to the trained length; past it, dynamic
    NTK at factor 1 still grows its base (transformers' formula), the others do not."""
    run, text = rope_run

    def loss(context, *extra):
        code, out, _ = gptlab("eval", run, "--text-file", text, "--context", context, "--json",
                              *extra)
        assert code == 0
        return json.loads(out)

    for context in ("16", "32"):
        plain = loss(context)
        assert plain["rope_scaling"] is None
        for kind in ("linear", "ntk", "yarn", "dynamic"):
            same = loss(context, "--rope-scaling", f"{kind}:1")["loss"] == plain["loss"]
            assert same == (kind != "dynamic" or context == "16"), (kind, context)
            stretched = loss(context, "--rope-scaling", f"{kind}:2")
            assert stretched["rope_scaling"] == f"{kind}:2"
            assert stretched["loss"] != plain["loss"] or (kind == "dynamic" and context == "16")


@pytest.mark.slow
def test_eval_sent_sigint_mid_scoring_exits_130_within_seconds(tmp_path, trained_run, signalled,
                                                               slowly_scoring):
    import signal

    mark = tmp_path / "scoring"
    code = slowly_scoring(mark, "eval", trained_run, "--data", trained_run.parent / "data")
    exit_code, out, err, seconds = signalled(code, mark.exists, signal.SIGINT)
    assert (exit_code, err.splitlines()[-1]) == (130, "interrupted"), err
    assert seconds < 15 and "Traceback" not in err  # a bound for a loaded machine
