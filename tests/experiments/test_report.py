"""What every experiment writes and prints (gptlab.experiments.report): a cell over its
seeds (spread) and whether two cells differ beyond it (beyond_spread), edge cases included
(one seed, equal means, a diverged run); the cells, tables, report.md and the timing line
as documented."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from gptlab.experiments import report

MACHINE = {"cpus": 2, "torch_threads": 1, "load_average": [1.234, 1.0, 0.5]}
TIMING = {"training_s": 12.4, "eval_s": 3.0, "total_s": 15.6}


def test_spread_is_the_mean_and_the_range_over_the_seeds():
    cell = report.spread([1.0, 2.0, 4.5])
    assert cell == {"mean": pytest.approx(2.5), "spread": 3.5, "values": [1.0, 2.0, 4.5]}
    assert report.spread([3.0]) == {"mean": 3.0, "spread": 0.0, "values": [3.0]}


@pytest.mark.parametrize("values", [[1.0, None], [math.nan, 2.0], [math.inf, 1.0]])
def test_a_diverged_seed_leaves_no_mean_and_stays_strict_json(values):
    cell = report.spread(values)
    assert cell["mean"] is None and cell["spread"] is None and cell["values"] == values
    if None in values:
        json.dumps(cell, allow_nan=False)  # what results.json holds


def test_beyond_spread_compares_the_gap_with_the_larger_spread():
    a, b = report.spread([1.0, 1.2]), report.spread([1.5, 1.6])  # gap 0.45, spreads 0.2 0.1
    assert report.beyond_spread(a, b) is True and report.beyond_spread(b, a) is True
    wide = report.spread([1.0, 2.0])  # mean 1.5, spread 1.0
    assert report.beyond_spread(wide, b) is False
    # equal means never differ, not even with no spread at all
    assert report.beyond_spread(report.spread([2.0, 2.0]), report.spread([2.0, 2.0])) is False
    # exactly the spread is not beyond it
    assert report.beyond_spread(report.spread([0.0, 1.0]), report.spread([1.0, 2.0])) is False


@pytest.mark.parametrize("a, b", [
    ([1.0], [5.0, 5.1]),  # one seed: no spread to compare with
    ([1.0, 1.1], [9.0]),
    ([1.0, None], [5.0, 5.1]),  # a diverged run: no mean
    ([1.0, 1.1], [math.nan, 5.1]),
])
def test_beyond_spread_says_none_where_it_cannot_tell(a, b):
    assert report.beyond_spread(report.spread(a), report.spread(b)) is None
    assert report.verdict_cell(None) == "—"


def test_verdicts_as_cells():
    assert [report.verdict_cell(v) for v in (True, False, None)] == ["yes", "no", "—"]


def test_loss_and_difference_cells():
    assert report.loss_cell(report.spread([1.0, 1.5]), [None, None]) == "1.250 ± 0.250"
    assert report.loss_cell(report.spread([2.0]), [None]) == "2.000"  # one seed: no ±
    assert report.loss_cell(report.spread([2.0, None]), [None, "nan at step 3"]) == \
        "NaN (1/2 diverged)"
    assert report.difference_cell(report.spread([1.0]), report.spread([0.75])) == "-0.250"
    assert report.difference_cell(report.spread([1.0]), report.spread([None])) == "—"


def test_tables_in_markdown_and_for_a_terminal():
    rows = [["pre", 1.5, "yes"], ["post-norm", 12.25, "no"]]
    assert report.markdown_table(["norm", "loss", "ok"], rows).splitlines() == [
        "| norm | loss | ok |", "| --- | ---: | ---: |", "| pre | 1.5 | yes |",
        "| post-norm | 12.25 | no |"]
    assert report.markdown_table(["a", "b"], [], align="rl").splitlines()[1] == "| ---: | --- |"
    assert report.text_table(["norm", "loss", "ok"], rows).splitlines() == [
        "norm        loss   ok", "pre          1.5  yes", "post-norm  12.25   no"]


def test_the_timing_line_names_the_phases_the_machine_and_its_load():
    assert report.timing_line(TIMING, MACHINE) == (
        "16 s in all (training 12 s, eval 3 s) on 2 CPU cores, 1 torch thread(s), load "
        "average 1.2 at the end; a shared machine's times are indicative only")
    assert "load average" not in report.timing_line(TIMING, {**MACHINE, "load_average": None})


def test_seeds_line():
    same = {"a": SimpleNamespace(seed=7), "b": SimpleNamespace(seed=7)}
    assert report.seeds_line(same) == "seed 7 for every run"
    assert report.seeds_line({**same, "c": SimpleNamespace(seed=8)}) == "seeds: a 7, b 7, c 8"


def test_find_gives_the_cell_with_the_values_asked_for():
    cells = [{"norm": "pre", "depth": 1}, {"norm": "pre", "depth": 2}]
    assert report.find(cells, norm="pre", depth=2) is cells[1]
    with pytest.raises(StopIteration):
        report.find(cells, norm="post")


def test_finish_writes_results_and_report(tmp_path, capsys):
    records = {"a": SimpleNamespace(train_s=1.26, seed=1), "b": SimpleNamespace(train_s=2.0,
                                                                               seed=1)}
    timer = report.Timer()
    timer.add("training_s", 1.0)
    timer.add("training_s", 0.5)
    results = report.finish(tmp_path, {"cells": [1]}, records, timer, "A title",
                            lambda r: [("Cells", f"{r['cells']}\n"), *report.closing(r, "x.png")])
    assert results["training_time_s"] == 3.3 and results["timing"]["training_s"] == 1.5
    assert json.loads((tmp_path / report.RESULTS_FILE).read_text()) == results
    md = (tmp_path / report.REPORT_FILE).read_text()
    assert md.startswith("# A title\n\n## Cells\n\n[1]\n\n## Figure\n\n![x](x.png)\n")
    assert md.rstrip().endswith("Training the grid took 3 s when it was trained.")
    report.print_tables(results, "out", [("Losses:", (["a"], [[1]]))], ["x.png"], ["a note"])
    printed = capsys.readouterr().out
    assert "\nLosses:\na\n1\n\na note\n" in printed
    assert printed.endswith("wrote out/results.json, out/report.md, out/x.png\n")


def test_the_claims_come_first_where_results_judged_claims(capsys):
    from gptlab.experiments.claims import Claim, Measured, evaluate

    judged = evaluate([Claim("k", "a claim", "a paper", "q",
                             lambda r: Measured([1, 2], [1.0, 1.1], "it rose"))], {})
    assert report.claims_text({}) == ""  # results.json from before claims were judged
    printed = report.claims_text({"claims": judged})
    assert printed.splitlines()[1:] == [
        "the claims, judged:", "- a claim", "    the paper: a paper",
        "    this run: seeds 1/2: it rose",
        "    verdict: held: +1.05 (needs > 0.2, twice the spread over seeds, and ≥ 0)"]
    heading, body = report.claims_section({"claims": judged})
    assert ("| a claim | a paper | seeds 1/2: it rose | held: +1.05 (needs > 0.2, twice the "
            "spread over seeds, and ≥ 0) |") in body and "twice the spread" in body


def test_a_run_that_decides_nothing_prints_one_line_instead_of_its_claims(tmp_path, capsys):
    from gptlab.experiments.claims import Claim, Measured, Precondition

    learned = Precondition("the model learned the task", "final loss", lambda r: r["loss"],
                           lambda r: 2.0, below=True)
    claims = [Claim(k, f"claim {k}", "a paper", "q",
                    lambda r: Measured([1, 2], [1.0, 1.1], "it rose"), precondition=learned)
              for k in ("a", "b")]
    results = report.finish(tmp_path, {"size": "quick", "loss": 4.16}, {}, report.Timer(),
                            "A title", lambda r: [("Setup", "s")], claims)
    assert [c["verdict"] for c in results["claims"]] == ["undecided", "undecided"]
    line = results["undecided_line"]
    assert line.startswith("this --quick run is too small to decide anything: not met: the "
                           "model learned the task (final loss 4.16, needs < 2)")
    assert results["threads"] >= 1
    assert json.loads((tmp_path / report.RESULTS_FILE).read_text())["undecided_line"] == line
    md = (tmp_path / report.REPORT_FILE).read_text()
    assert "**This --quick run is too small to decide anything: " in md
    assert "| precondition |" in md
    report.print_tables(results, "out", [], [])
    printed = capsys.readouterr().out
    assert "the claims, judged" not in printed and "claim a" not in printed
    assert " ".join(printed.split()).startswith(line)
    assert max(len(row) for row in report.claims_text(results).splitlines()) <= 100
    assert f"Its models trained at {results['threads']} torch thread" in printed


def test_table_sections_title_each_table_capitalised_without_its_colon():
    sections = report.table_sections([("loss by seed:", (["seed", "loss"], [[1, 2.5]])),
                                      ("", (["a"], [[1]]))])
    assert [title for title, _ in sections] == ["Loss by seed", ""]
    assert sections[0][1] == report.markdown_table(["seed", "loss"], [[1, 2.5]])
