"""The speedrun harness (bench/speedrun.py) end to end at a tiny size, and its medians and
ratios on made-up runs. No timing is asserted: the smoke numbers mean nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench.common import SIZES, setup_threads
from bench.run import main  # python -m bench
from bench.speedrun import (
    CADENCE,
    DEFAULT_TEXT,
    PRECISION_SETTINGS,
    REFERENCE,
    eval_every,
    run_rungs,
    summarize,
)
from bench.speedrun_whole import CANDIDATES as WHOLE_CANDIDATES
from bench.speedrun_whole import SMOKE_TARGETS, command, target_of

from gptlab.training.config import recipe

CANDIDATE = "shakespeare-char-cpu-speedrun"  # the first lap's record
LAP2 = "shakespeare-char-cpu-speedrun-2"
TRACK_188 = "shakespeare-char-cpu-speedrun-188"  # the second lap's recipe on one block


# The tests that read the speedrun's smoke run (two seeds of four recipes, about 25 s) are
# in the slow tier.
smoke_run = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """The rung record's harness (laps 1 and 2), smoke-sized."""
    out = tmp_path_factory.mktemp("speedrun")
    setup_threads(1)
    run_rungs(SIZES["smoke"], out, log=lambda _: None, seeds=2)
    return out


@smoke_run
@pytest.mark.timeout(1800)
def test_the_whole_commands_run_and_are_scored_by_gptlab_eval(tmp_path):
    """`python -m bench --only speedrun`: each contender a whole `gptlab train` launched
    and timed to its exit, then scored by `gptlab eval`; candidates stop at their targets."""
    # one seed: six launches of gptlab (train, then eval) are most of a minute
    assert main(["--smoke", "--only", "speedrun", "--seeds", "1", "--threads", "1",
                 "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "speedrun_whole.json").read_text())
    assert data["benchmark"] == "speedrun_whole" and data["seed_values"] == [1337]
    assert set(data["runs"]) == {REFERENCE, *WHOLE_CANDIDATES}
    for name, runs in data["runs"].items():
        assert [r["seed"] for r in runs] == [1337]
        for r in runs:
            assert r["wall_s"] > 0 and r["eval_loss"] > 0
            if name == REFERENCE:
                assert r["target"] is None and r["step"] == 40
            else:  # stopped as the target was met (its line), or at the budget
                assert r["target"] == SMOKE_TARGETS[name]
                met_line = [line for line in r["stdout"] if line.startswith("val ")]
                assert len(met_line) == 1
                if "<=" in met_line[0]:
                    assert r["met"] and r["eval_loss"] <= r["target"]
                    assert met_line[0].endswith(f"at step {r['step']}")
    summary = data["summary"]
    assert summary[REFERENCE]["ratio_vs_peer"] == 1.0
    rows = (tmp_path / "speedrun_whole.md").read_text().splitlines()
    assert [r.split(" | ")[2] for r in rows[2:]] == [f"`{REFERENCE}`"] + [
        f"`{n}`" for n in WHOLE_CANDIDATES]


@smoke_run
def test_reference_and_candidate_both_ran_every_seed(smoke):
    data = json.loads((smoke / "speedrun.json").read_text())
    assert data["benchmark"] == "speedrun" and data["size"] == "smoke"
    assert data["reference"] == REFERENCE
    assert data["candidates"] == [CANDIDATE, LAP2, TRACK_188]
    assert data["seeds"] == 2 and data["seed_values"] == [1337, 1338]
    assert set(data["runs"]) == set(data["summary"]) == {REFERENCE, CANDIDATE, LAP2, TRACK_188}
    for runs in data["runs"].values():
        assert [r["settings"]["seed"] for r in runs] == [1337, 1338]
        for r in runs:
            assert r["steps"] > 0 and r["train_s"] > 0 and r["eval_s"] > 0
            # `gptlab train`'s start-up was measured in its own process, before step 1
            assert 0.5 < r["startup_s"] < 120 and 0 < r["step1_s"] < 10
            assert [c["step"] for c in r["curve"]] == sorted({c["step"] for c in r["curve"]})
            # a rung is the first evaluation at or below it, timed by training alone
            for rung, hit in r["rungs"].items():
                first = next(c for c in r["curve"] if c["val_loss"] <= float(rung))
                assert hit == first
    # each recipe trained as itself: nanoGPT's batch stream and AdamW; Muon with cosine and
    # its own preset's untied head (the smoke run shrinks the shape, not the head)
    ref = data["runs"][REFERENCE][0]["settings"]
    cand = data["runs"][CANDIDATE][0]["settings"]
    assert (ref["optimizer"], ref["batch_rng"], ref["lr_schedule"]) == (
        "adamw", "nanogpt", "cosine")
    assert (cand["optimizer"], cand["lr_schedule"]) == ("muon", "cosine")
    assert not data["runs"][CANDIDATE][0]["model"]["tie_embeddings"]
    assert data["runs"][REFERENCE][0]["model"]["tie_embeddings"]
    assert cand["muon_lr"] == recipe(CANDIDATE).speed.muon_lr
    # the second lap: its recipe, and its preset's model options on the smoke run's shape
    lap2 = data["runs"][LAP2][0]
    assert (lap2["settings"]["muon_lr"], lap2["settings"]["warmup_iters"]) == (0.04, 5)
    assert all(lap2["model"][k] for k in ("qk_norm", "zero_init_proj", "value_residual"))
    track = data["runs"][TRACK_188][0]
    assert lap2["settings"]["muon_split_qkv"] and not lap2["settings"]["eval_at_start"]
    # the 1.88 track: lap 2's earlier recipe (q, k and v together, Muon's momentum 0.95 of
    # before lap 3), its own target
    assert lap2["settings"]["muon_momentum"] == 0.85
    assert track["settings"] == lap2["settings"] | {
        "seed": track["settings"]["seed"], "muon_split_qkv": False, "stop_at_val": 1.88,
        "muon_momentum": 0.95}
    assert track["model"]["qk_norm"] and track["model"]["zero_init_proj"]
    for rung in map(str, data["rungs"]):
        assert data["summary"][REFERENCE][rung]["ratio_vs_reference"] in (1.0, None)
    # the probes decided each recipe's autos once, before anything trained: every seed
    # trained in what was decided
    for name, runs in data["runs"].items():
        decided = data["precision"][name]
        optimizer = runs[0]["settings"]["optimizer"]
        assert [decided[k] == "auto" for k in PRECISION_SETTINGS] == [
            False, False, optimizer != "muon"]  # AdamW alone has no Newton-Schulz to decide
        assert isinstance(decided["why"], list)
        for r in runs:
            assert {k: r["settings"][k] for k in PRECISION_SETTINGS} == {
                k: decided[k] for k in PRECISION_SETTINGS}


@smoke_run
def test_record_rows_name_both_recipes(smoke):
    rows = (smoke / "speedrun.md").read_text().splitlines()
    assert rows[0].startswith("| date | machine | recipe | seeds | time to 2.6 |")
    assert [r.split(" | ")[2] for r in rows[2:]] == [f"`{REFERENCE}`", f"`{CANDIDATE}`",
                                                     f"`{LAP2}`", f"`{TRACK_188}`"]
    assert all(r.split(" | ")[3] == "2" for r in rows[2:])


def run(t: float | None, total: float = 10.0, startup: float = 0.0) -> dict:
    """A made-up run: training time to rung 1.88 (None: missed), `total` seconds of
    training, `startup` seconds before its first step."""
    return {"train_s": total, "startup_s": startup,
            "rungs": {"1.88": {"step": 100, "train_s": t}} if t is not None else {}}


def test_medians_count_a_miss_as_infinitely_slow():
    runs = {REFERENCE: [run(4.0), run(6.0), run(5.0)],
            CANDIDATE: [run(1.0), run(None), run(3.0)]}
    s = summarize(runs, (1.88,), REFERENCE)
    assert s[CANDIDATE]["1.88"]["median_s"] == 3.0  # median of 1, 3, inf
    assert s[CANDIDATE]["1.88"]["ratio_vs_reference"] == pytest.approx(3.0 / 5.0)
    assert s[CANDIDATE]["1.88"]["seeds_reached"] == 2
    assert not s[CANDIDATE]["1.88"]["ratio_is_upper_bound"]
    runs[CANDIDATE] = [run(1.0), run(None), run(None)]
    assert summarize(runs, (1.88,), REFERENCE)[CANDIDATE]["1.88"]["ratio_vs_reference"] is None


def test_the_start_up_counts_in_every_time():
    runs = {REFERENCE: [run(4.0, startup=2.0), run(6.0, startup=2.0), run(5.0, startup=3.0)],
            CANDIDATE: [run(1.0, startup=1.5), run(2.0, startup=1.5), run(3.0, startup=1.5)]}
    s = summarize(runs, (1.88,), REFERENCE)
    assert s[REFERENCE]["1.88"]["median_s"] == 8.0  # 6, 8, 8
    assert s[CANDIDATE]["1.88"]["median_s"] == 3.5  # 2.5, 3.5, 4.5
    assert s[CANDIDATE]["1.88"]["ratio_vs_reference"] == pytest.approx(3.5 / 8.0)
    assert s[CANDIDATE]["1.88"]["median_startup_s"] == 1.5
    assert s[CANDIDATE]["1.88"]["median_total_s"] == 11.5


def test_a_reference_that_misses_gives_an_upper_bound():
    runs = {REFERENCE: [run(None, total=50.0), run(None, total=40.0), run(9.0, total=60.0)],
            CANDIDATE: [run(20.0), run(22.0), run(18.0)]}
    s = summarize(runs, (1.88,), REFERENCE)
    assert s[REFERENCE]["1.88"]["median_s"] is None
    # its whole training time (median of 50, 40, 9) stands in: the ratio is at most 20 / 40
    assert s[CANDIDATE]["1.88"]["ratio_vs_reference"] == pytest.approx(20.0 / 40.0)
    assert s[CANDIDATE]["1.88"]["ratio_is_upper_bound"]
    assert math.isclose(s[REFERENCE]["1.88"]["median_total_s"], 50.0)


def test_evaluations_come_closer_together_near_the_next_rung():
    assert [eval_every(gap, CADENCE) for gap in (0.5, 0.1, 0.05, 0.025, 0.0)] == [
        100, 25, 25, 10, 10]


def test_the_candidates_stop_at_their_targets_and_the_peer_runs_as_nanogpt():
    assert [target_of(n, smoke=False) for n in WHOLE_CANDIDATES] == [1.70, 1.88]
    assert target_of(REFERENCE, smoke=False) is None
    peer = command(REFERENCE, "d", "r", 1337, peer=True, smoke=False)
    assert peer[2:5] == ["gptlab", "train", "--preset"] and "--no-whole-val" in peer
    assert "--stop-at-val" not in peer and "--max-iters" not in peer  # the recipe as it is
    cand = command(WHOLE_CANDIDATES[0], "d", "r", 1338, peer=False, smoke=False)
    assert "--no-whole-val" not in cand and cand[cand.index("--seed") + 1] == "1338"


def test_bad_seeds_is_one_line(capsys, tmp_path):
    assert main(["--only", "speedrun", "--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--seeds" in err and "\n" not in err and "Traceback" not in err


def test_attention_dtype_bench_times_every_kernel_and_precision():
    """bench.attention_dtype end to end at a tiny attention shape and one training step per
    precision (the timings themselves are the bench's to report, not a test's)."""
    from bench.attention_dtype import KERNELS, measure

    data = measure(DEFAULT_TEXT, reps=1, log=lambda _: None, shapes=((2, 2, 8, 4),), steps=1)
    assert set(data["attention_ms"]["2x2x8x4"]) == set(KERNELS)
    assert set(data["step_ms"]) == {"float32", "bf16 autocast",
                                    "bf16 autocast, float32 attention"}
    assert all(ms > 0 for ms in data["step_ms"].values())


def test_a_lever_sweep_decides_every_levers_dtypes_before_anything_trains(monkeypatch):
    """bench.speedrun_levers: each lever's 'auto' dtypes are decided (probed) for all levers
    first, then each trains in what was decided (training faked here: the order and the
    settings are the point)."""
    import bench.speedrun_levers as levers

    events = []
    decide = levers.decide_precision

    def deciding(plan, config, vocab):
        events.append(("decide", config.n_layer))
        return decide(plan, config, vocab)

    def training(train, val, vocab, settings, config, rungs, cadence):
        events.append(("train", config.n_layer))
        assert {k: settings[k] for k in PRECISION_SETTINGS} == {
            "dtype": "float32", "attention_dtype": "autocast", "muon_dtype": "float32"}
        return {"train_s": 1.0, "steps": 10, "rungs": {}, "final_val_loss": 2.0}

    monkeypatch.setattr(levers, "decide_precision", deciding)
    monkeypatch.setattr(levers, "train_to_rungs", training)
    names = ["base", "lap2 adopted, 3 layers"]
    data = levers.run_levers(names, DEFAULT_TEXT, 1337, log=lambda _: None)
    assert events == [("decide", 4), ("decide", 3), ("train", 4), ("train", 3)]
    assert set(data["results"]) == set(names)
