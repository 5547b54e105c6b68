"""Timing probes (gptlab.probe): a budgeted median on a clock the test controls, and the
cache in probes.json, keyed by kind and key, that a torn or unwritable file cannot break,
that keeps only what was measured on a quiet machine with steady timings, and that
forgets an answer after MAX_AGE_DAYS or a new gptlab version. The wall clock and the load
average are the test's (no timing is asserted)."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest
import torch

import gptlab
from gptlab import GPTConfig, probe

pytestmark = pytest.mark.usefixtures("probing")  # see conftest.py


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


@pytest.fixture
def machine(monkeypatch):
    """The probe's wall clock and load average, as the test sets them: machine.at (seconds
    since the epoch), machine.load."""
    state = SimpleNamespace(at=1_800_000_000.0, load=0.5)
    monkeypatch.setattr(probe, "now", lambda: state.at)
    monkeypatch.setattr(probe, "machine_load", lambda: state.load)
    monkeypatch.setattr(probe, "cores", lambda: 2)
    return state


def test_cached_measures_once_per_kind_and_key(cache, machine):
    measured = []

    def measure(value):
        def run():
            measured.append(value)
            return {"ms": value}
        return run

    def probed(kind, key, value):
        result, how = probe.cached(kind, key, measure(value))
        return result, how.cached

    assert probed("decode", "cpu A", 1.0) == ({"ms": 1.0}, False)
    assert probed("decode", "cpu A", 2.0) == ({"ms": 1.0}, True)
    assert probed("decode", "cpu B", 3.0) == ({"ms": 3.0}, False)
    assert probed("train_dtype", "cpu A", 4.0) == ({"ms": 4.0}, False)
    assert measured == [1.0, 3.0, 4.0]
    when = {"at": machine.at, "load": 0.5, "cores": 2, "spread": 0.0,
            "gptlab": gptlab.__version__}
    assert json.loads(cache.read_text()) == {
        "decode": {"cpu A": {"result": {"ms": 1.0}, **when},
                   "cpu B": {"result": {"ms": 3.0}, **when}},
        "train_dtype": {"cpu A": {"result": {"ms": 4.0}, **when}}}


@pytest.mark.parametrize("content", ["{torn", "[1, 2]", '{"decode": [1]}',
                                     '{"decode": {"k": {"ms": 9.0}}}'])  # before the rules
def test_a_broken_or_old_cache_is_probed_again_and_replaced(cache, machine, content):
    cache.write_text(content)
    assert probe.cached("decode", "k", lambda: {"ms": 5.0})[0] == {"ms": 5.0}
    result, how = probe.cached("decode", "k", lambda: {"ms": 6.0})
    assert result == {"ms": 5.0} and how.cached


def test_a_cache_that_cannot_be_written_is_no_error(monkeypatch, tmp_path, machine):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "a-file" / "cache"))
    calls = []
    for _ in range(2):
        result, how = probe.cached("decode", "k", lambda: calls.append(1) or {"ms": 1.0})
        assert result == {"ms": 1.0} and not how.cached
    assert len(calls) == 2  # probed each time instead


def test_a_busy_machine_times_nothing_caches_nothing_and_says_why(cache, machine):
    """A probe taken while a test suite ran (load 5.3 on 2 cores) said bf16 was 7.73x fp32;
    quiet, it was 0.54x: such a timing decides nothing, so on a busy machine none is taken
    (a `gptlab sample` under load 3-8 spent 9.9 of its 13.1 s timing what it then did not
    use, on every call, for nothing was cached). The caller takes its default."""
    machine.load = 5.3
    calls = []
    result, how = probe.cached("muon_dtype", "k", lambda: calls.append(1) or {"float32": 1.0})
    assert result == {} and calls == [] and not how.timed and not how.trusted
    assert how.describe() == "not timed, load average 5.30 on 2 cores"
    assert not cache.exists()
    machine.load = 2.0  # no more than the cores: timed, and kept
    result, how = probe.cached("muon_dtype", "k", lambda: {"float32": 5.4, "bfloat16": 10.0})
    assert how.timed and how.trusted and not how.cached and how.describe() == "probed now"
    machine.load = 7.0  # busy again: what was kept answers
    result, how = probe.cached("muon_dtype", "k", lambda: {})
    assert result == {"float32": 5.4, "bfloat16": 10.0} and how.cached


def test_probe_off_times_nothing_on_a_quiet_machine_and_says_why(cache, machine,
                                                                  monkeypatch):
    """GPTLAB_PROBE=off: a script's (or this suite's) output must not follow the machine's
    load, which decides whether a probe runs and is announced."""
    monkeypatch.setenv("GPTLAB_PROBE", "off")
    heard, calls = [], []
    with probe.announced(heard.append):
        result, how = probe.cached("decode", "k", lambda: calls.append(1) or {"ms": 1.0})
    assert result == {} and calls == [] and heard == [] and not how.timed
    assert how.describe() == "not timed, GPTLAB_PROBE=off" and not cache.exists()


def test_a_probe_that_runs_is_announced_once_and_a_cached_or_skipped_one_is_not(cache,
                                                                                machine):
    heard = []
    with probe.announced(heard.append):
        probe.cached("decode", "k", lambda: {"ms": 1.0}, what="2 decoding kernels (a, b)")
        probe.cached("decode", "k", lambda: {"ms": 2.0}, what="2 decoding kernels (a, b)")
        machine.load = 9.0
        probe.cached("decode", "other", lambda: {"ms": 3.0})
    assert heard == [f"timing 2 decoding kernels (a, b) on this machine, once (cached in "
                     f"{cache} when the timings are steady)"]
    machine.load = 0.5
    probe.cached("decode", "third", lambda: {"ms": 3.0})  # nobody listens: nothing said
    assert len(heard) == 1


def test_lookup_gives_only_a_usable_entry(cache, machine):
    assert probe.lookup("decode", "k") is None
    probe.cached("decode", "k", lambda: {"ms": 1.0})
    result, how = probe.lookup("decode", "k")
    assert result == {"ms": 1.0} and how.cached
    machine.at += (probe.MAX_AGE_DAYS + 1) * probe.DAY_S
    assert probe.lookup("decode", "k") is None


def test_scattered_timings_are_not_cached(cache, machine, monkeypatch):
    """Calls of 10 ms and 30 ms in turn: the quartiles lie 100% of the median apart (more
    than MAX_SPREAD), so the result is not kept; calls of a steady 10 ms are."""
    clock = [0.0]
    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=lambda: clock[0],
                                                       time=lambda: machine.at))

    def work(costs):
        def call() -> None:
            clock[0] += next(costs)
        return lambda: {"ms": probe.budgeted_ms(call, budget_s=10.0, max_reps=4)}

    _, how = probe.cached("decode", "k", work(itertools.cycle([0.01, 0.03])))
    assert how.spread == pytest.approx(1.0) and not how.trusted and not cache.exists()
    assert "timings spread 100% (more than 25%)" in how.describe()
    _, how = probe.cached("decode", "k", work(itertools.repeat(0.01)))
    assert how.spread == 0.0 and how.trusted and cache.exists()


def test_relative_spread_is_the_interquartile_range_over_the_median():
    assert probe.relative_spread([1.0]) == 0.0
    assert probe.relative_spread([1.0, 1.0, 1.0, 1.0, 9.0]) == 0.0  # one outlier: no matter
    assert probe.relative_spread([1.0, 2.0, 3.0]) == pytest.approx(0.5)


def test_an_answer_expires_after_max_age_and_with_another_version(cache, machine,
                                                                   monkeypatch):
    calls = []

    def measure():
        calls.append(1)
        return {"ms": float(len(calls))}

    probe.cached("decode", "k", measure)
    machine.at += (probe.MAX_AGE_DAYS - 1) * probe.DAY_S
    result, how = probe.cached("decode", "k", measure)
    assert result == {"ms": 1.0} and how.describe() == (
        f"cached probe, {probe.MAX_AGE_DAYS - 1} days old")
    machine.at += 2 * probe.DAY_S  # too old now: probed again, then cached
    assert probe.cached("decode", "k", measure)[0] == {"ms": 2.0}
    assert probe.cached("decode", "k", measure)[0] == {"ms": 2.0}
    monkeypatch.setattr(probe, "__version__", "9.9.9")  # another gptlab: probed again
    assert probe.cached("decode", "k", measure)[0] == {"ms": 3.0}
    assert json.loads(cache.read_text())["decode"]["k"]["gptlab"] == "9.9.9"
    assert len(calls) == 3


def test_an_expired_entry_is_dropped_when_the_cache_is_written(cache, machine):
    probe.cached("decode", "old", lambda: {"ms": 1.0})
    machine.at += (probe.MAX_AGE_DAYS + 1) * probe.DAY_S
    probe.cached("decode", "new", lambda: {"ms": 2.0})
    assert list(json.loads(cache.read_text())["decode"]) == ["new"]


def test_clear_forgets_one_kind_or_all(cache, machine):
    for kind in ("decode", "train_dtype"):
        probe.cached(kind, "k", lambda: {"ms": 1.0})
    assert [(k, key) for k, key, _, _ in probe.entries()] == [("decode", "k"),
                                                              ("train_dtype", "k")]
    assert probe.clear("decode") == 1
    assert [k for k, *_ in probe.entries()] == ["train_dtype"]
    assert probe.clear() == 1 and not cache.exists() and probe.entries() == []
    assert probe.clear() == 0


def test_the_keys_name_what_makes_a_timing_hold():
    key = probe.machine_key(torch.device("cpu"))
    assert probe.cpu_name() in key and torch.__version__ in key
    assert f"{torch.get_num_threads()} threads" in key
    small, large = GPTConfig.from_preset("tiny-gpt2"), GPTConfig.from_preset("tiny-llama")
    assert probe.config_key(small) != probe.config_key(large)
    assert probe.config_key(small) == probe.config_key(GPTConfig.from_preset("tiny-gpt2"))
    assert probe.config_key(small) != probe.config_key(GPTConfig.from_preset(
        "tiny-gpt2", vocab_size=98))


def test_the_cache_is_shown_from_the_home_folder():
    from pathlib import Path

    assert probe.shown(Path.home() / ".cache" / "gptlab" / probe.PROBES_FILE) == (
        "~/.cache/gptlab/probes.json")
    assert probe.shown(Path("/elsewhere/probes.json")) == "/elsewhere/probes.json"
