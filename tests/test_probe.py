"""Timing probes (gptlab.probe): a budgeted median on a clock the test controls, and the
cache in probes.json, keyed by kind and key, that a torn or unwritable file cannot break."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest
import torch

from gptlab import GPTConfig, probe


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A fresh cache directory: probes.json lands there."""
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path))
    return tmp_path / probe.PROBES_FILE


def test_budgeted_ms_is_the_median_of_as_many_calls_as_the_budget_holds(monkeypatch):
    """Calls of 250 ms, one of them 1 s: the first (sizing) call says 250 ms, so a budget
    of 1.25 s holds 5 timed calls, and their median leaves the slow one out."""
    now, calls = [0.0], []
    costs = itertools.chain([0.25, 0.25, 0.25, 1.0], itertools.repeat(0.25))
    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def work() -> None:
        calls.append(1)
        now[0] += next(costs)

    assert probe.budgeted_ms(work, budget_s=1.25, max_reps=20) == 250.0
    assert len(calls) == 2 + 5  # a warm-up and a sizing call, then the budget's five
    calls.clear()
    probe.budgeted_ms(work, budget_s=100.0, max_reps=4)
    assert len(calls) == 2 + 4  # never more than max_reps
    calls.clear()
    probe.budgeted_ms(work, budget_s=0.0, max_reps=4)
    assert len(calls) == 2 + 3  # never fewer than three


def test_cached_measures_once_per_kind_and_key(cache):
    measured = []

    def measure(value):
        def run():
            measured.append(value)
            return {"ms": value}
        return run

    assert probe.cached("decode", "cpu A", measure(1.0)) == ({"ms": 1.0}, False)
    assert probe.cached("decode", "cpu A", measure(2.0)) == ({"ms": 1.0}, True)
    assert probe.cached("decode", "cpu B", measure(3.0)) == ({"ms": 3.0}, False)
    assert probe.cached("train_dtype", "cpu A", measure(4.0)) == ({"ms": 4.0}, False)
    assert measured == [1.0, 3.0, 4.0]
    assert json.loads(cache.read_text()) == {
        "decode": {"cpu A": {"ms": 1.0}, "cpu B": {"ms": 3.0}},
        "train_dtype": {"cpu A": {"ms": 4.0}}}


@pytest.mark.parametrize("content", ["{torn", "[1, 2]", '{"decode": [1]}'])
def test_a_broken_cache_is_probed_again_and_replaced(cache, content):
    cache.write_text(content)
    assert probe.cached("decode", "k", lambda: {"ms": 5.0}) == ({"ms": 5.0}, False)
    assert probe.cached("decode", "k", lambda: {"ms": 6.0}) == ({"ms": 5.0}, True)


def test_a_cache_that_cannot_be_written_is_no_error(monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "a-file" / "cache"))
    calls = []
    for _ in range(2):
        result = probe.cached("decode", "k", lambda: calls.append(1) or {"ms": 1.0})
        assert result == ({"ms": 1.0}, False)
    assert len(calls) == 2  # probed each time instead


def test_the_keys_name_what_makes_a_timing_hold():
    key = probe.machine_key(torch.device("cpu"))
    assert probe.cpu_name() in key and torch.__version__ in key
    assert f"{torch.get_num_threads()} threads" in key
    small, large = GPTConfig.from_preset("tiny-gpt2"), GPTConfig.from_preset("tiny-llama")
    assert probe.config_key(small) != probe.config_key(large)
    assert probe.config_key(small) == probe.config_key(GPTConfig.from_preset("tiny-gpt2"))
    assert probe.config_key(small) != probe.config_key(GPTConfig.from_preset(
        "tiny-gpt2", vocab_size=98))
