"""bench.step_between: two checkouts' steps, launch by launch in turns, read from the runs'
own metrics.jsonl."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import bench.step_between as between
import pytest

from gptlab.model.config import GPTConfig
from gptlab.training.config import recipe


def test_the_checkouts_take_turns_and_the_ratio_is_of_their_medians(monkeypatch, tmp_path):
    order = []

    def fake_step_ms(checkout, preset, data_dir, out_dir, steps, warmup):
        order.append((checkout.name, preset))
        return [10.0, 12.0, 11.0] if checkout.name == "before" else [15.0, 16.0, 17.0]

    monkeypatch.setattr(between, "step_ms", fake_step_ms)
    data = between.compare(tmp_path / "before", tmp_path / "after", "abc " * 500, rounds=2,
                           steps=5, warmup=1, log=lambda _: None)
    first = between.PRESETS[0]
    assert order[:4] == [("before", first), ("after", first), ("after", first),
                         ("before", first)]
    result = data["presets"][first]
    assert result["before_ms"] == statistics.median([10.0, 12.0, 11.0] * 2) == 11.0
    assert result["after_over_before"] == pytest.approx(16.0 / 11.0)
    assert result["launch_medians_ms"] == {"before": [11.0, 11.0], "after": [16.0, 16.0]}


@pytest.mark.slow
def test_one_launch_reads_its_steps_from_the_run(tmp_path):
    """A real `gptlab train` of the 1.88 preset from this checkout: every step after the
    warm-up, as tokens per step over the logged tokens/s."""
    from bench.first_step import prepare_data

    text = Path("tests/assets/tinyshakespeare/input.txt").read_text()[:200_000]
    data = prepare_data(text, tmp_path / "data")
    preset = between.PRESETS[1]
    times = between.step_ms(between.HERE, preset, data, tmp_path / "run", steps=6, warmup=2)
    records = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text()
               .splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r.get("kind") == "train" and r["step"] > 2]
    cfg, model = recipe(preset), GPTConfig.from_preset(preset)
    tokens = cfg.batch_size * model.block_size
    assert times == pytest.approx([1e3 * tokens / s for s in speeds]) and len(times) == 4
