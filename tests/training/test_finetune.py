"""Fine-tuning (gptlab.training.run with init_from, `train --init-from`): a model trained on
most of the embedded Shakespeare, then fine-tuned on one play it never saw, beats the same
steps from scratch, and its step-0 loss is `gptlab eval`'s. Its bad combinations:
tests/cli/test_train.py."""

from __future__ import annotations

import json

import pytest

from gptlab import model_dir
from gptlab.cli.main import main
from gptlab.data.corpus import play_files, play_to_text, shakespeare_text
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training.config import recipe
from gptlab.training.run import train

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

STEPS = 150  # fine-tuning steps, and the same number from scratch


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two data dirs with one char tokenizer: all plays but one, and the held-out play."""
    root = tmp_path_factory.mktemp("ft")
    plays = play_files()
    held_out = play_to_text(plays[-1].read_text(encoding="utf-8"))
    rest = "".join(play_to_text(p.read_text(encoding="utf-8")) for p in plays[:8])
    tokenizer = CharTokenizer.from_text(shakespeare_text())
    prepare(rest, root / "base-data", tokenizer, source="plays")
    prepare(held_out, root / "play-data", tokenizer, source="held-out play")
    return root


def demo_model() -> GPTConfig:
    return GPTConfig.from_preset("shakespeare-char-cpu")


@pytest.fixture(scope="module")
def base_run(corpus):
    run = corpus / "base"
    train(demo_model(), recipe("shakespeare-char-cpu-fast", max_iters=400, eval_interval=400,
                               eval_iters=5, whole_val=False),
          corpus / "base-data", run, progress=False)
    return run


def test_fine_tuning_beats_scratch_and_starts_where_eval_says(corpus, base_run, capsys):
    play = corpus / "play-data"
    settings = ["--max-iters", str(STEPS), "--eval-interval", str(STEPS), "--eval-iters", "5",
                "--learning-rate", "1e-3", "--warmup-iters", "10", "--no-progress"]
    assert main(["train", "--init-from", str(base_run), "--data", str(play), "--out",
                 str(corpus / "tuned"), *settings]) == 0
    out, err = capsys.readouterr()
    assert "optimizer and the learning-rate schedule start fresh" in err
    assert main(["train", "--preset", "shakespeare-char-cpu", "--data", str(play), "--out",
                 str(corpus / "scratch"), *settings]) == 0
    capsys.readouterr()

    def whole_val(run):
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return {r["step"]: r["loss"] for r in records if r["kind"] == "whole_val"}

    tuned, scratch = whole_val(corpus / "tuned"), whole_val(corpus / "scratch")
    assert tuned[STEPS] < scratch[STEPS] - 0.1, (tuned, scratch)
    # Its loss before the first step is what `gptlab eval` says of the starting model.
    assert main(["eval", str(base_run), "--data", str(play), "--json"]) == 0
    assert tuned[0] == pytest.approx(json.loads(capsys.readouterr().out)["loss"], rel=1e-9)
    assert tuned[STEPS] < tuned[0]
    assert model_dir.load_config(corpus / "tuned") == model_dir.load_config(base_run)
    settings = json.loads((corpus / "tuned/train.json").read_text())
    assert settings["init_from"] == str(base_run)

