"""docs/experiments.md's claims tables are what the committed results give
(tools.experiment_docs), and the tool's own behaviour."""

from __future__ import annotations

import json

import pytest

from gptlab.experiments import catalog
from tools import experiment_docs as docs


def test_the_page_agrees_with_the_committed_results():
    page = docs.PAGE.read_text(encoding="utf-8")
    assert docs.regenerate(page) == page, "run python -m tools.experiment_docs"


@pytest.mark.parametrize("name", catalog.NAMES)
def test_every_experiment_has_its_block_and_results(name):
    start, end = docs.markers(name)
    page = docs.PAGE.read_text(encoding="utf-8")
    assert start in page and end in page
    results = json.loads(docs.results_path(name).read_text())
    assert results["experiment"] == name
    # the file's own claims are the ones its numbers give today
    assert results["claims"] == docs.judged(name, results)


def test_the_results_have_one_home_the_package():
    # the shipped folder is the one copy; the old one in docs/ must not come back (a merge
    # of a branch that still writes there, say)
    old = docs.ROOT / "docs" / "experiments" / "results"
    assert not (old.is_dir() and list(old.glob("*.json"))), f"move {old}/*.json to {docs.RESULTS}"
    assert docs.RESULTS == docs.ROOT / "src" / "gptlab" / "experiments" / "shipped"
    for name in catalog.NAMES:
        assert docs.results_path(name).is_file(), name


def test_add_copies_the_results_with_their_date(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    results = _norm_results()
    results["machine"].pop("date", None)
    (run / "results.json").write_text(json.dumps({**results, "claims": []}))
    shipped = tmp_path / "shipped"
    path = docs.add("norm", run, shipped)
    written = json.loads(path.read_text())
    assert path == shipped / "norm.json"
    assert written["machine"]["date"] == docs.shipped_results.today()
    assert written["claims"] == docs.judged("norm", results)
    assert "undecided_line" in written and written["threads"] == results["threads"]
    with pytest.raises(SystemExit, match="not 'scale'"):
        docs.add("scale", run, shipped)


def test_rejudge_judges_the_shipped_numbers_again_in_place(tmp_path):
    results = _norm_results()
    stale = {**results, "claims": [], "undecided_line": "stale"}
    path = docs.results_path("norm", tmp_path)
    path.write_text(json.dumps(stale))
    assert docs.rejudge("norm", tmp_path) == path
    again = json.loads(path.read_text())
    assert again["claims"] == docs.judged("norm", results)
    assert again["undecided_line"] is None
    assert {k: v for k, v in again.items() if k not in ("claims", "undecided_line")} == \
        {k: v for k, v in results.items() if k not in ("claims", "undecided_line")}


def _norm_results():
    return json.loads(docs.results_path("norm").read_text())


def test_a_block_is_rewritten_and_anything_else_kept(tmp_path):
    results = _norm_results()
    path = docs.results_path("norm", tmp_path)
    path.write_text(json.dumps(results))
    start, end = docs.markers("norm")
    page = f"before\n{start}\nstale table\n{end}\nafter\n"
    fresh = docs.regenerate(page, tmp_path)
    assert "stale table" not in fresh
    assert fresh.startswith("before\n") and fresh.endswith("after\n")
    assert "| the claim | the paper | this run | verdict |" in fresh  # norm reads no mechanism
    assert docs.regenerate(fresh, tmp_path) == fresh


def test_a_block_names_the_thread_count_and_a_run_that_decides_nothing(tmp_path):
    results = _norm_results()
    assert f"its models trained at {results['threads']} torch thread" in \
        docs.block("norm", results)
    unknown = {k: v for k, v in results.items() if k != "threads"}
    assert "the torch threads its models trained at not recorded" in docs.block("norm", unknown)
    unmeasured = json.loads(json.dumps(results))
    for run in unmeasured["runs"].values():  # every run without a number: nothing decided
        run["final_loss"] = None
        run.pop("layer_grad_norms")
    block = docs.block("norm", unmeasured)
    assert "**This run decides none of its claims: " in block


def test_a_quick_run_says_so_and_a_missing_file_is_named(tmp_path):
    results = {**_norm_results(), "size": "quick"}
    assert "not the default size" in docs.block("norm", results)
    start, end = docs.markers("norm")
    with pytest.raises(SystemExit, match="does not exist"):
        docs.regenerate(f"{start}\n{end}\n", tmp_path)


def test_check_fails_on_a_disagreeing_page(tmp_path, monkeypatch, capsys):
    start, end = docs.markers("norm")
    page = tmp_path / "experiments.md"
    page.write_text(f"{start}\nheld, typed by hand\n{end}\n")
    monkeypatch.setattr(docs, "PAGE", page)
    assert docs.main(["--check"]) == 1
    assert "disagrees" in capsys.readouterr().err
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0


def test_a_block_names_the_seeds_its_units_came_from():
    assert "seeds 1337, 1338, 1339;" in docs.block("norm", _norm_results())
    # features' units are slices of text, its models one seed's: the block names that seed
    features = json.loads(docs.results_path("features").read_text())
    assert f"seed {features['seed']};" in docs.block("features", features)
