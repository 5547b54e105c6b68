"""`gptlab lens`, `attribute` and `patch` on a small saved model: what they print is what
the library computes, files appear only with --out, bad input is one line."""

import json

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.cli.main import main
from gptlab.data.tokenizer import CharTokenizer
from gptlab.files.model_dir import save_model
from gptlab.interp.lens import logit_lens
from test_hf import widen

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALPHABET = "abcdefghijklmnopqrstuvwxyz .,\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    torch.manual_seed(0)
    tokenizer = CharTokenizer.from_text(ALPHABET)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=32, n_layer=2, n_head=2,
                          n_embd=16)).eval()
    widen(model, 0)  # confident predictions, so the tables are not all ties
    directory = tmp_path_factory.mktemp("cli") / "run"
    save_model(model, directory)
    tokenizer.save(directory / "tokenizer.json")
    return directory, model, tokenizer


def gptlab(capsys, *argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_lens_prints_each_depth_and_writes_png_and_json(run_dir, tmp_path, capsys,
                                                       one_thread):
    directory, model, tokenizer = run_dir
    code, out, _ = gptlab(capsys, "lens", directory, "--text", "the cat sat", "--out",
                          tmp_path / "lens")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "input: 11 tokens; each cell: the top next token and its probability"
    assert [line.split()[0] for line in lines[2:5]] == ["embed", "block", "block"]
    idx = torch.tensor([tokenizer.encode("the cat sat")])
    rows = logit_lens(model, idx)
    report = json.loads((tmp_path / "lens" / "lens.json").read_text())
    assert report["rows"] == ["embed", "block 0", "block 1"]
    # The last depth's top token at each position is the model's own argmax, in table and JSON.
    assert [r[0] for r in report["top_ids"][-1]] == rows[-1, 0].argmax(-1).tolist()
    last_cells = lines[4].split()[2:]
    expected = tokenizer.decode([int(rows[-1, 0, -1].argmax())]).replace(" ", "\u2423")
    assert last_cells[-2] == expected.replace("\n", "\\n")
    probs = torch.softmax(rows[:, 0, :-1], -1).gather(-1, idx[0, 1:, None].expand(3, -1, 1))
    torch.testing.assert_close(torch.tensor(report["next_token_probs"]), probs[..., 0])
    assert (tmp_path / "lens" / "lens.png").read_bytes().startswith(PNG_MAGIC)
    assert "wrote" in out
    code, out, _ = gptlab(capsys, "lens", directory, "--text", "a")
    assert code == 0 and "probability of the actual next token" not in out  # one token


def test_attribute_parts_sum_to_the_printed_logit(run_dir, tmp_path, capsys, one_thread):
    directory, model, tokenizer = run_dir
    code, out, _ = gptlab(capsys, "attribute", directory, "--text", "the cat", "--target", "s",
                          "--versus", "id:0", "--out", tmp_path / "attr")
    assert code == 0
    idx = torch.tensor([tokenizer.encode("the cat")])
    with torch.no_grad():
        logits, _ = model(idx)
    s = tokenizer.encode("s")[0]
    expected = float(logits[0, -1, s] - logits[0, -1, 0])
    first = out.splitlines()[0]
    assert first.startswith("logit(s) - logit(\\n) after 'the␣cat' (position 6): ")
    assert float(first.rsplit(" ", 1)[1]) == pytest.approx(expected, abs=1e-4)
    report = json.loads((tmp_path / "attr" / "attribution.json").read_text())
    assert sum(report["parts"].values()) == pytest.approx(expected, abs=1e-5)
    assert list(report["parts"])[:3] == ["embed", "pos_embed", "L0H0"]
    assert (tmp_path / "attr" / "attribution.png").read_bytes().startswith(PNG_MAGIC)


def test_patch_restores_all_of_the_gap_where_it_should(run_dir, tmp_path, capsys,
                                                       one_thread):
    directory, *_ = run_dir
    # The texts differ only in the last token: its stream at block 0 carries everything.
    code, out, _ = gptlab(capsys, "patch", directory, "--clean", "the cat", "--corrupt",
                          "the car", "--target", "s", "--versus", "e", "--out",
                          tmp_path / "patch")
    assert code == 0
    report = json.loads((tmp_path / "patch" / "patch.json").read_text())
    resid = report["restored"]["resid"]
    assert resid[0][6] == pytest.approx(1.0, abs=1e-6)
    assert all(v == pytest.approx(0.0, abs=1e-6) for v in resid[0][:6])  # nothing differs
    assert len(report["restored"]["head"]) == 2 and len(report["restored"]["head"][0]) == 2
    assert "residual stream (block input): share of the gap restored" in out
    assert (tmp_path / "patch" / "patch.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("argv, message", [
    (["attribute", "--text", "the", "--target", "id:30"],
     "--target id:30 is outside the vocabulary (0..29)"),
    (["attribute", "--text", "the", "--target", "id:-1"], "outside the vocabulary"),
    (["attribute", "--text", "the", "--target", "ab"], "is 2 tokens, not one"),
    (["attribute", "--text", "the", "--target", "Q"], "not in the vocabulary: 'Q'"),
    (["attribute", "--text", "the", "--target", "a", "--versus", "a"], "the same token"),
    (["attribute", "--text", "the", "--target", "a", "--position", "3"],
     "--position 3 is out of range for 3 tokens"),
    (["patch", "--clean", "the cat", "--corrupt", "the cats"],
     "--clean is 7 tokens and --corrupt 8: they must be the same length"),
    (["patch", "--clean", "the cat", "--corrupt", "the cat", "--metric", "logit"],
     "give the same metric"),
    (["patch", "--clean", "ab", "--corrupt", "ab", "--target", "c", "--versus", "c"],
     "target and versus are the same token"),
    (["patch", "--clean", "ab", "--corrupt", "cd", "--metric", "prob", "--versus", "a"],
     "--versus is for --metric logit-diff"),
    (["lens", "--text", ""], "--text is empty"),
    (["lens", "--text", "x" * 33], "longer than the model's context of 32"),
])
def test_bad_input_is_one_line(run_dir, tmp_path, capsys, argv, message):
    directory, *_ = run_dir
    code, out, err = gptlab(capsys, argv[0], directory, *argv[1:], "--out", tmp_path / "o")
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
