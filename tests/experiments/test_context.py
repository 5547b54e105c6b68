"""`gptlab experiment context` at its --quick size (the session's context_experiment,
tests/conftest.py), checked only for what must hold whatever the models learned: learned
positions refuse by name, every 1x loss is `gptlab eval`'s, every scaling at factor 1 is
RoPE unscaled, the by-position means give the overall loss back, every other encoding
evaluates and samples at 4x its training length, and a second run reuses the first's."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gptlab.cli.main import main
from gptlab.experiments import context
from gptlab.experiments.claims import evaluate
from gptlab.model_dir import load_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def results(context_experiment):
    return json.loads((context_experiment / "results.json").read_text())


def row(results, method):
    return next(r for r in results["rows"] if r["method"] == method)


def test_the_folder_holds_runs_results_report_and_figures(context_experiment, results,
                                                          png_magic):
    for name in ("report.md", "eval.txt", context.FIGURE_LENGTHS, context.FIGURE_POSITIONS):
        assert (context_experiment / name).is_file(), name
    for name in (context.FIGURE_LENGTHS, context.FIGURE_POSITIONS):
        assert (context_experiment / name).read_bytes().startswith(png_magic)
    assert results["lengths"] == [64, 128, 256, 512] and results["trained_length"] == 64
    assert [r["method"] for r in results["rows"]] == [*context.ENCODINGS, *context.SCALINGS,
                                                      "pi-ft"]
    assert set(results["runs"]) == {*context.ENCODINGS, "rope-pi-x2", "rope-pi-x4",
                                    "rope-pi-x8"}
    for run in results["runs"].values():  # ordinary runs: loadable, resumable
        run_dir = context_experiment / run["dir"]
        assert (run_dir / "state.pt").is_file() and run["seed"] == 1337
        assert load_model(run_dir).config.pos_encoding in context.ENCODINGS
    report = (context_experiment / "report.md").read_text()
    assert "seed 1337 for every run" in report and "| RoPE + YaRN |" in report


def test_learned_positions_refuse_every_longer_length(results):
    cells = row(results, "learned")["cells"]
    assert "refused" not in cells[0]
    for cell in cells[1:]:
        assert "learned positions are a table with one trained row per position" in \
            cell["refused"] and "there is no row for position 64" in cell["refused"]


def test_one_x_losses_equal_gptlab_evals(context_experiment, results, capsys):
    """Each encoding's 1x cell, in both modes, is what `gptlab eval` prints for the run on
    eval.txt with the same window and stride: the same functions, the same number."""
    text = context_experiment / context.EVAL_TEXT
    for enc in context.ENCODINGS:
        cell = row(results, enc)["cells"][0]
        for mode in context.MODES:
            stride = cell[mode]["stride"]
            assert main(["eval", str(context_experiment / "runs" / enc), "--text-file", str(text),
                         "--context", "64", "--stride", str(stride), "--json"]) == 0
            printed = json.loads(capsys.readouterr().out)
            assert printed["loss"] == cell[mode]["loss"], (enc, mode)
            assert printed["tokens_scored"] == cell[mode]["tokens_scored"]


def test_every_scaling_at_factor_one_is_rope_unscaled(results):
    rope = row(results, "rope")["cells"][0]
    for kind in context.SCALINGS:
        cell = row(results, kind)["cells"][0]
        assert cell["rope_scaling"] == f"{kind}:1"
        for mode in context.MODES:
            assert cell[mode]["loss"] == rope[mode]["loss"], kind


def test_by_position_means_equal_the_overall_loss(results):
    checked = 0
    for r in results["rows"]:
        for cell in r["cells"]:
            if cell is None or "refused" in cell:
                continue
            for mode in context.MODES:
                for parts in (cell[mode]["by_length"], cell[mode]["by_position"]):
                    tokens = sum(p["tokens"] for p in parts)
                    mean = math.fsum(p["loss"] * p["tokens"] for p in parts if p["tokens"])
                    assert tokens == cell[mode]["tokens_scored"]
                    assert mean / tokens == pytest.approx(cell[mode]["loss"], rel=1e-12)
                    checked += 1
    assert checked == 2 * 2 * (1 + 4 * 8 + 3)


@pytest.mark.parametrize("encoding", ["rope", "sinusoidal", "alibi", "none"])
def test_models_trained_at_64_evaluate_and_sample_at_256(encoding, context_experiment,
                                                         results, capsys):
    for cell in row(results, encoding)["cells"][1:]:
        assert cell["length"] >= 128 and math.isfinite(cell["non-overlapping"]["loss"])
    run_dir = context_experiment / "runs" / encoding
    code = main(["sample", str(run_dir), "--context", "256", "--max-new-tokens", "300",
                 "--seed", "1", "--prompt", "the", "--no-prompt"])
    out, err = capsys.readouterr()
    assert code == 0 and len(out) >= 300
    assert err == ("gptlab sample: warning: context 256 is longer than the 64 positions the "
                   "model was trained on (block_size): it never saw positions 64..255\n")


def test_a_second_run_reuses_every_finished_run(context_experiment, rerun):
    torch.set_num_threads(2)  # the one_thread fixture restores its own count after
    again = rerun(context_experiment, "context")
    assert again.code == 0
    # the command trains at one thread (--threads), records it, and gives the process its
    # count back
    assert again.results["threads"] == again.results["machine"]["torch_threads"] == 1
    assert torch.get_num_threads() == 2
    assert again.out.count("reusing the finished run") == 8
    assert "loss (nats/token), non-overlapping windows" in again.out and "refused" in again.out
    assert again.grid_after == again.grid_before
    assert all(r["reused"] for r in again.results["runs"].values())


def test_a_folder_of_something_else_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code = main(["experiment", "context", "--quick", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "holds files gptlab did not write" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_claims_on_hand_made_results():
    """One seed: every verdict at most held weakly."""
    losses = {"sinusoidal": [2.6, 3.4, 4.1, 4.5], "rope": [1.87, 1.92, 2.08, 2.26],
              "alibi": [1.95, 1.94, 1.94, 1.93], "linear": [1.87, 2.58, 3.07, 3.22],
              "ntk": [1.87, 1.90, 2.01, 2.26], "pi-ft": [None, 1.90, 2.08, 2.23]}

    def cell(loss):
        return None if loss is None else {"non-overlapping": {"loss": loss}}
    rows = [{"method": "learned", "cells": [cell(2.0)] + [{"refused": "no"}] * 3}]
    rows += [{"method": m, "cells": [cell(v) for v in values]}
             for m, values in losses.items()]
    results = {"trained_length": 64, "lengths": [64, 128, 256, 512], "rows": rows,
               "runs": {"rope": {"seed": 1337}}, "baselines": {"bigram": 3.0}}
    judged = {c["key"]: c for c in evaluate(context.CLAIMS, results)}
    assert {k: c["verdict"] for k, c in judged.items()} == {
        "learned_dies": "held weakly", "sinusoidal": "held weakly",
        "rope_gentle": "held weakly", "alibi_flat": "held weakly",
        "pi_without_finetune": "held weakly", "pi_finetune": "held weakly",
        "ntk_beats_pi": "held weakly"}
    # every claim but the refusal reads how a model uses positions: each names the models
    # it reads, their loss at 1x against the bigram table's
    assert "precondition" not in judged["learned_dies"]
    assert judged["rope_gentle"]["precondition"] == {
        "text": "every seed's sinusoidal and RoPE models read their context (highest loss "
                "at 1x 2.6, needs < 3: a bigram table's loss)",
        "value": 2.6, "threshold": 3.0, "met": True}
    assert judged["alibi_flat"]["precondition"]["value"] == 1.95
    assert all(c["seeds"] == [1337] and c["spread"] is None for c in judged.values())
    assert judged["sinusoidal"]["mean"] == pytest.approx(math.exp(0.8) - 1)
    assert judged["pi_finetune"]["mean"] == pytest.approx(2.58 - 1.90)
    rows[5]["cells"][1] = cell(2.6)  # NTK worse than PI at 2x: one seed never contradicts
    assert evaluate(context.CLAIMS, results)[-1]["verdict"] == "not seen"


def test_positions_are_not_read_off_a_model_that_did_not_learn_its_text():
    # a sinusoidal model worse at its trained length than a bigram table: how it
    # extrapolates says nothing about sinusoidal positions; the others are judged
    def cell(loss):
        return None if loss is None else {"non-overlapping": {"loss": loss}}
    losses = {"sinusoidal": [2.8, 3.4, 4.1, 4.5], "rope": [1.87, 1.92, 2.08, 2.26],
              "alibi": [1.95, 1.94, 1.94, 1.93], "linear": [1.87, 2.58, 3.07, 3.22],
              "ntk": [1.87, 1.90, 2.01, 2.26], "pi-ft": [None, 1.90, 2.08, 2.23]}
    rows = [{"method": "learned", "cells": [cell(2.0)] + [{"refused": "no"}] * 3}]
    rows += [{"method": m, "cells": [cell(v) for v in values]} for m, values in losses.items()]
    results = {"trained_length": 64, "lengths": [64, 128, 256, 512], "rows": rows,
               "runs": {"rope": {"seed": 1337}}, "baselines": {"bigram": 2.47}}
    judged = {c["key"]: c for c in evaluate(context.CLAIMS, results)}
    assert judged["sinusoidal"]["verdict"] == judged["rope_gentle"]["verdict"] == "undecided"
    assert judged["sinusoidal"]["verdict_line"] == (
        "undecided: precondition not met: every seed's sinusoidal model reads its context "
        "(highest loss at 1x 2.8, needs < 2.47: a bigram table's loss)")
    assert all(judged[k]["verdict"] == "held weakly" for k in
               ("learned_dies", "alibi_flat", "pi_without_finetune", "pi_finetune",
                "ntk_beats_pi"))


def test_every_seed_has_its_own_runs_the_first_named_plainly():
    specs = context._specs(context.SIZES["default"], 1337, 65)
    names = [s.name for s in specs]
    assert context.SIZES["default"].seeds == 3 and len(names) == len(set(names)) == 3 * 8
    assert names[:8] == [*context.ENCODINGS, "rope-pi-x2", "rope-pi-x4", "rope-pi-x8"]
    later = {s.name: s for s in specs[8:]}
    assert set(later) == {f"{n}-s{seed}" for n in names[:8] for seed in (1338, 1339)}
    assert later["rope-pi-x4-s1339"].start == "rope-s1339"
    assert {s.train.seed for s in specs} == {1337, 1338, 1339}
    assert all(s.train.seed == int(s.name[-4:]) for s in specs[8:])


def test_the_claims_are_judged_seed_by_seed():
    """Three seeds' rows: each claim's effect is each seed's own, the loss table their
    mean ± half their range."""
    def rows(shift):
        def cell(loss):
            return None if loss is None else {"non-overlapping": {"loss": loss + shift}}
        values = {"sinusoidal": [2.6, 3.4, 4.1, 4.5], "rope": [1.87, 1.92, 2.08, 2.26],
                  "alibi": [1.95, 1.94, 1.94, 1.93], "linear": [1.87, 2.58, 3.07, 3.22],
                  "ntk": [1.87, 1.90, 2.01, 2.26], "pi-ft": [None, 1.90, 2.08, 2.23]}
        out = [{"method": "learned", "label": "learned",
                "cells": [cell(2.0)] + [{"refused": "no"}] * 3}]
        # the seeds differ in PI's fine-tune only: its effect moves, the others' do not
        pi_ft = 0.02 * shift * 10
        return out + [{"method": m, "label": m,
                       "cells": [cell(None if v is None else v + (pi_ft if m == "pi-ft"
                                                                   else 0))
                                 for v in vs]} for m, vs in values.items()]
    by_seed = {"1337": rows(0.0), "1338": rows(0.1), "1339": rows(0.2)}
    results = {"trained_length": 64, "lengths": [64, 128, 256, 512], "rows": by_seed["1337"],
               "rows_by_seed": by_seed, "runs": {"rope": {"seed": 1337}},
               "baselines": {"bigram": 3.0}}
    judged = {c["key"]: c for c in evaluate(context.CLAIMS, results)}
    assert all(c["seeds"] == [1337, 1338, 1339] for c in judged.values())
    assert judged["sinusoidal"]["spread"] == pytest.approx(0, abs=1e-12)
    assert judged["sinusoidal"]["verdict"] == "held"
    assert judged["pi_finetune"]["effects"] == pytest.approx([0.68, 0.66, 0.64])
    assert judged["pi_finetune"]["spread"] == pytest.approx(0.04)
    assert judged["pi_finetune"]["verdict"] == "held"  # 0.66 > 2 x 0.04
    assert judged["pi_finetune"]["units"] == "seeds 1337/1338/1339"
    assert "seeds" not in judged["pi_finetune"]["this_run"]  # the units say it, once
    header, table = context.table(results, "non-overlapping")
    assert table[1][1] == "2.700 ± 0.100"  # sinusoidal at 1x: 2.6 + 0, 0.1, 0.2
