"""`gptlab demo` (what `make demo` runs), tiny: prepare, train, sample, say where it is."""

from __future__ import annotations

import json

import pytest

from gptlab.cli.main import main

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@pytest.mark.slow
def test_demo_end_to_end_and_reuses_its_data(tmp_path, capsys):
    data, run = tmp_path / "demo-data", tmp_path / "demo"
    argv = ["demo", "--data", str(data), "--out", str(run), "--max-iters", "4", "--no-progress"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "prepared the embedded Shakespeare" in out
    meta = json.loads((data / "meta.json").read_text())
    assert meta["source"] == "shakespeare" and meta["tokenizer"] == "char"
    assert "trained 4 steps" in out and "A sample" in out
    sample = out.split("400 characters):\n\n", 1)[1].split("\n\nThe run lives in")[0]
    assert len(sample) >= 390  # 400 characters after the "\n" prompt
    assert f"gptlab sample {run}" in out and f"{run}/loss.png" in out
    for name in ("model.safetensors", "state.pt", "loss.png", "metrics.jsonl", "best/config.json"):
        assert (run / name).is_file(), name
    assert "step 4: train loss" in err

    # again: the corpus is reused, the run replaced
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "reusing the prepared corpus" in out and "prepared the embedded" not in out
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[0] == 0 and max(steps) == 4 and steps.count(0) == 1


def test_demo_refuses_foreign_data(tmp_path, capsys):
    from gptlab.data.prepared import prepare
    from gptlab.data.tokenizer import CharTokenizer

    prepare("some other text " * 100, tmp_path / "d", CharTokenizer.from_text("some other text"),
            source="mine")
    code = main(["demo", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "r"),
                 "--max-iters", "2", "--no-progress"])
    assert code == 2 and "holds other data ('mine')" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
