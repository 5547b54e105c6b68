"""`gptlab heads`: a row per head that is the saved scores, heatmaps where asked, text or
random input, and every bad input or option in one line, before any work."""

import json

import pytest

from gptlab.cli.main import main


@pytest.fixture
def run_dir(char_model):
    """The model's directory (written into by the tests that say so)."""
    return char_model[0]


def heads(*argv):
    return main(["heads", *map(str, argv)])


def table_rows(stdout):
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["layer", "head"])
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_random_input_prints_a_row_per_head_and_writes_heatmaps(run_dir, tmp_path, capsys,
                                                                png_magic):
    out = tmp_path / "out"
    assert heads(run_dir, "--out", out, "--top", 2) == 0
    stdout = capsys.readouterr().out
    assert "no --text given" in stdout and "random tokens, each repeated" in stdout
    assert "repeated half" in stdout
    rows = table_rows(stdout)
    assert [(r[0], r[1]) for r in rows] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    report = json.loads((out / "scores.json").read_text())
    for row in rows:  # the printed table is the saved one
        layer, head = int(row[0]), int(row[1])
        assert float(row[2]) == pytest.approx(report["scores"]["previous_token"][layer][head],
                                              abs=5e-4)
        assert float(row[4]) == pytest.approx(report["scores"]["induction"][layer][head],
                                              abs=5e-4)
        assert float(row[5]) == pytest.approx(report["ablation"]["loss_delta"][layer][head],
                                              abs=5e-5)
    assert len(report["strongest"]) == 2
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 3 and "scores.png" in pngs
    for name in pngs:
        assert (out / name).read_bytes().startswith(png_magic)
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temp files


def test_default_out_is_inside_the_run_dir(run_dir, capsys):
    assert heads(run_dir, "--top", 1, "--seq-len", 4, "--seed", 3) == 0
    assert (run_dir / "heads" / "scores.png").is_file()
    assert "seed 3" in capsys.readouterr().out


def test_text_input_and_mean_ablation(run_dir, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat. the cat sat.")
    out = tmp_path / "out"
    assert heads(run_dir, "--text-file", text, "--out", out, "--ablate", "mean", "--top",
                 0) == 0
    stdout = capsys.readouterr().out
    assert "25 tokens" in stdout and "dloss(mean)" in stdout
    assert len(table_rows(stdout)) == 4
    assert sorted(p.name for p in out.iterdir()) == [".gptlab.json", "scores.json",
                                                     "scores.png"]  # marked as figures


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("a", "at least 2"),
    ("abcdefghij" * 4, "40 tokens, longer than the model's context of 32"),
    ("hello WORLD", "not in the vocabulary"),
])
def test_bad_text_is_a_one_line_error(run_dir, tmp_path, capsys, content, message):
    text = tmp_path / "text.txt"
    text.write_text(content)
    assert heads(run_dir, "--text-file", text, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["--top", "-1"], "--top: must be >= 0"),
    (["--seq-len", "17"], "at most 16"),
    (["--seq-len", "1"], "argument --seq-len: must be >= 2, got 1"),
    (["--text-file", "missing.txt"], "not found"),
    (["--text", "ZZ"], "not in the vocabulary"),
    (["--text", "a", "--text-file", "t.txt"], "not allowed with argument"),
])
def test_bad_options_are_one_line_errors(run_dir, capsys, argv, message):
    assert heads(run_dir, *argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--seed", str(2**64)], "argument --seed: must be between 0 and 2**64 - 1"),
    (["--seed", "-1"], "argument --seed: must be between 0 and 2**64 - 1, got -1"),
])
def test_a_seed_beyond_64_bits_is_an_argparse_error(run_dir, capsys, argv, message):
    code = heads(run_dir, *argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_an_out_that_cannot_be_created_is_said_before_the_work(run_dir, tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for out, message in ((a_file, "exists and is not a directory"),
                         (a_file / "sub", f"{a_file} is a file"),
                         (run_dir, "is a model directory (config.json, model.safetensors, "
                                   "tokenizer.json): give the figures a folder of their own")):
        assert heads(run_dir, "--out", out) == 2
        captured = capsys.readouterr()
        assert message in captured.err and len(captured.err.strip().splitlines()) == 1
        assert captured.out == ""  # no scores printed: nothing was computed
    assert a_file.read_text() == "x"


def test_missing_run_dir_and_tokenizer(tmp_path, run_dir, capsys):
    assert heads(tmp_path / "nope", "--out", tmp_path / "o") == 2
    assert "no such run or model directory" in capsys.readouterr().err
    assert heads(tmp_path / "nope") == 2  # no MODEL/heads to default to: what is not there
    assert "no such run or model directory" in capsys.readouterr().err
    (run_dir / "tokenizer.json").unlink()
    assert heads(run_dir, "--text", "abc") == 2
    assert "tokenizer.json" in capsys.readouterr().err
    # Random tokens need no tokenizer: heatmap labels fall back to ids.
    assert heads(run_dir, "--out", tmp_path / "o", "--top", 1) == 0


def test_module_entry_point_without_traceback(run_dir, tmp_path, gptlab_process):
    text = tmp_path / "t.txt"
    text.write_text("")
    result = gptlab_process("heads", run_dir, "--text-file", text)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("gptlab heads: error:")


def test_text_is_the_text_and_the_old_text_file_still_works(run_dir, tmp_path, capsys):
    """--text is the text itself, as in lens, attribute and eval; `--text FILE` (the old
    spelling) still reads the file, and warns after the table."""
    text = tmp_path / "text.txt"
    text.write_text("the cat sat. the cat sat.")
    tables = []
    for argv in (["--text", "the cat sat. the cat sat."], ["--text-file", text],
                 ["--text", text]):
        assert heads(run_dir, *argv, "--out", tmp_path / "out", "--top", 0) == 0
        captured = capsys.readouterr()
        assert "25 tokens" in captured.out
        tables.append(table_rows(captured.out))
        assert ("--text FILE is deprecated" in captured.err) == (argv == ["--text", text])
    assert tables[0] == tables[1] == tables[2]


def test_a_model_gptlab_load_takes_a_hugging_face_directory(run_dir, tmp_path, capsys):
    """heads reads what gptlab.load reads: here the model exported to Hugging Face."""
    pytest.importorskip("transformers")
    assert main(["convert", "--to-hf", str(run_dir), "--out", str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    assert heads(tmp_path / "hf", "--seq-len", 4, "--top", 0) == 0
    hf_rows = table_rows(capsys.readouterr().out)
    assert heads(run_dir, "--seq-len", 4, "--top", 0) == 0
    assert table_rows(capsys.readouterr().out) == hf_rows
