"""View 14 (experiments) in real headless Chromium (the session's browser), over a runs
folder holding a quick norm experiment: the tables are the API's, the figure is the PNG the
experiment drew, shown with a text alternative, the claims' computed verdicts above them,
each run of the grid opens in the heads view; at phone width nothing overflows and axe-core
finds nothing serious."""

from __future__ import annotations

import json
import shutil

import pytest

from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]


UNDECIDED = ("this --quick run is too small to decide anything: the 2-layer model did not "
             "learn the task (loss 4.16, needs < 2.08); run without --quick for verdicts")
VERDICT_LINES = ["undecided: the 2-layer model did not learn the task (loss 4.16, needs < 2.08)",
                 "held weakly: +0.4 (one seed: no spread, at most held weakly; needs ≥ 0.05)"]


def with_verdict_lines(folder) -> None:
    """results.json as the experiments write it now: each claim's precondition, units and
    verdict line, and the run's undecided line."""
    path = folder / "results.json"
    results = json.loads(path.read_text())
    results["undecided_line"] = UNDECIDED
    results["threads"] = 1
    for k, c in enumerate(results["claims"]):
        c["units"] = "seeds 1337"
        c["precondition"] = None
        if k < 2:
            c["precondition"] = {"text": "the 2-layer model learned the task", "value": 4.16,
                                 "threshold": 2.08, "met": k == 1}
            c["verdict"] = VERDICT_LINES[k].split(":")[0]
            c["verdict_line"] = VERDICT_LINES[k]
    path.write_text(json.dumps(results))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, norm_experiment, open_lab):
    """(page, address) of view 14 over a runs folder holding the experiment as 'norm', and
    as 'norm-new' with results.json's newer fields."""
    root = tmp_path_factory.mktemp("experiment-runs")
    shutil.copytree(norm_experiment, root / "norm")
    shutil.copytree(norm_experiment, root / "norm-new")
    with_verdict_lines(root / "norm-new")
    with BackgroundServer(root) as url:
        with open_lab(f"{url}#experiments", "[data-testid=exp-figure]",
                      viewport={"width": 1280, "height": 900}) as opened:
            yield opened.page, url


def test_the_tables_and_figure_are_the_reports(lab, settle):
    page, _ = lab
    settle(page)
    assert page.input_value("[data-testid=exp-experiment]") == "norm"
    assert "Pre-LN against Post-LN" in page.text_content("[data-testid=exp-title]")
    rows = page.eval_on_selector_all("[data-testid=exp-table-0] tr",
                                     "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")
    assert rows[0][:5] == ["depth", "lr", "warm-up", "Pre-LN loss", "Post-LN loss"]
    assert len(rows) == 1 + 8
    image = page.eval_on_selector("[data-testid=exp-figure]",
                                  "i => [i.naturalWidth, i.alt, i.dataset.file]")
    assert image[0] > 300 and "norm.png" in image[1] and image[2] == "norm.png"


def test_the_claims_table_shows_each_claims_computed_verdict(lab, settle):
    page, _ = lab
    settle(page)
    rows = page.eval_on_selector_all("[data-testid=exp-claims] tr",
                                     "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")
    assert rows[0] == ["the claim", "the paper", "this run", "verdict"]
    assert len(rows) == 1 + 5  # norm's five claims
    verdicts = page.eval_on_selector_all("[data-testid=exp-verdict] strong",
                                         "ss => ss.map(s => s.textContent)")
    assert len(verdicts) == 5
    assert set(verdicts) <= {"held", "held weakly", "not seen", "contradicted", "undecided"}
    # --quick is one seed: no spread, so at most held weakly
    assert "held" not in verdicts and "contradicted" not in verdicts


def test_the_legend_names_every_verdict(lab):
    page, _ = lab
    terms = page.eval_on_selector_all("[data-testid=exp-legend] dt",
                                      "ds => ds.map(d => d.textContent)")
    assert terms == ["held", "held weakly", "not seen", "contradicted", "undecided"]
    assert "precondition" in page.text_content("[data-testid=exp-legend]")


def test_the_verdicts_words_are_shown_as_written(lab, settle):
    # results.json's verdict lines, preconditions, units and undecided line (the experiments
    # write them now); a file without them (norm) is shown as before
    page, _ = lab
    page.select_option("[data-testid=exp-experiment]", "norm-new")
    page.wait_for_function(
        "document.querySelectorAll('[data-testid=exp-precondition]').length > 0")
    settle(page)
    rows = page.eval_on_selector_all("[data-testid=exp-claims] tr",
                                     "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")
    assert rows[0] == ["the claim", "the paper", "this run", "precondition", "verdict"]
    assert [r[4] for r in rows[1:3]] == VERDICT_LINES
    assert [r[3] for r in rows[1:4]] == ["not met: the 2-layer model learned the task",
                                         "met: the 2-layer model learned the task", "—"]
    assert all(r[2].startswith("seeds 1337: ") for r in rows[1:])
    assert page.text_content("[data-testid=exp-quick-note]").startswith(UNDECIDED)
    assert page.text_content("[data-testid=exp-timing]").endswith(
        "Its models trained at 1 torch thread.")
    page.select_option("[data-testid=exp-experiment]", "norm")
    page.wait_for_function(
        "document.querySelectorAll('[data-testid=exp-precondition]').length == 0")
    settle(page)


def test_prose_reads_from_the_left_numbers_from_the_right(lab, settle):
    # regression: every cell but the first was right-aligned, the claims' sentences included
    page, _ = lab
    settle(page)
    align = "e => getComputedStyle(e).textAlign"
    cells = page.locator("[data-testid=exp-claims] td")
    assert {cells.nth(i).evaluate(align) for i in range(cells.count())} == {"left"}
    table = page.locator("[data-testid=exp-table-0] tr").nth(1).locator("td")
    texts = table.all_text_contents()
    aligned = [table.nth(i).evaluate(align) for i in range(len(texts))]
    pairs = list(zip(texts, aligned, strict=True))
    assert {a for t, a in pairs if t in ("yes", "no", "none")} == {"left"}
    assert {a for t, a in pairs if t[0] in "0123456789+-"} == {"right"}


def test_a_run_of_the_grid_opens_in_the_heads_view(lab, settle):
    page, _ = lab
    link = page.locator("[data-testid=exp-runs] a", has_text="heads").first
    href = link.get_attribute("href")
    assert href.startswith("?run=norm%2Fruns%2F") and href.endswith("#heads")
    link.click()
    page.wait_for_selector("#view-heads:not([hidden])")
    settle(page)
    run = href.split("=", 1)[1].split("#")[0].replace("%2F", "/")
    assert page.input_value("[data-testid=heads-run]") == run
    page.goto(page.url.split("?")[0] + "#experiments")
    page.wait_for_selector("[data-testid=exp-figure]")


def test_phone_width_and_axe(lab, fits_a_phone):
    with fits_a_phone(lab[0]):
        assert lab[0].is_visible("[data-testid=exp-figure]")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, open_lab):
    """(page, address) of view 14 over an empty runs folder: a fresh install."""
    root = tmp_path_factory.mktemp("fresh-runs")
    with BackgroundServer(root) as url:
        with open_lab(f"{url}#experiments", "[data-testid=exp-figure]",
                      viewport={"width": 1280, "height": 900}) as opened:
            yield opened.page, url


def test_a_fresh_lab_shows_the_shipped_results_labelled(fresh, settle):
    from gptlab.experiments import catalog, shipped_results

    page, _ = fresh
    settle(page)
    options = page.eval_on_selector_all("[data-testid=exp-experiment] option",
                                        "os => os.map(o => [o.value, o.textContent])")
    assert options == [[f"shipped:{n}", f"{n} (shipped results)"] for n in catalog.NAMES]
    label = page.text_content("[data-testid=exp-shipped]")
    results = shipped_results.load(catalog.NAMES[0])
    assert page.is_visible("[data-testid=exp-shipped]")
    assert f"These are {shipped_results.label(results)}" in label
    assert "measured on 2 CPU cores" in label and results["machine"]["date"] in label
    assert page.eval_on_selector_all("[data-testid=exp-verdict]", "vs => vs.length") \
        == len(results["claims"])
    assert "results gptlab ships" in page.text_content("[data-testid=exp-status]")
    # another experiment: its own figure and label; and the --quick button names it
    page.select_option("[data-testid=exp-experiment]", "shipped:heads")
    page.wait_for_selector("[data-testid=exp-figure][data-file='heads-pruning.png']")
    settle(page)
    assert page.text_content("[data-testid=exp-quick]") == \
        "Run gptlab experiment heads --quick here"
    assert "gptlab experiment heads at its default size" in \
        page.text_content("[data-testid=exp-shipped]")


def test_a_fresh_lab_at_phone_width_and_axe(fresh, fits_a_phone):
    with fits_a_phone(fresh[0]):
        assert fresh[0].is_visible("[data-testid=exp-shipped]")


def test_a_quick_run_from_the_page_is_listed_beside_the_shipped(tmp_path, open_lab, settle):
    """memory --quick (nothing trained: the shipped model measured), run from view 14: its
    progress is shown, and its results are their own entry, marked quick, with the line
    that says how little so small a run decides; the shipped results stay selectable
    (regression: they were replaced)."""
    with BackgroundServer(tmp_path) as url:
        with open_lab(f"{url}#experiments", "[data-testid=exp-figure]",
                      viewport={"width": 1280, "height": 900}) as opened:
            page = opened.page
            settle(page)
            page.select_option("[data-testid=exp-experiment]", "shipped:memory")
            settle(page)
            page.click("[data-testid=exp-quick]")
            page.wait_for_function("document.querySelector('[data-testid=exp-quick-status]')"
                                   ".textContent.startsWith('running gptlab experiment memory')"
                                   " || document.querySelector('[data-testid=exp-quick-status]')"
                                   ".textContent.startsWith('memory --quick')")
            assert page.is_disabled("[data-testid=exp-quick]")
            page.wait_for_selector("[data-testid=exp-quick-status][data-status=finished]",
                                   timeout=300_000)
            page.wait_for_function("document.querySelector('[data-testid=exp-experiment]')"
                                   ".value === 'memory-quick'")
            settle(page)
            assert page.is_hidden("[data-testid=exp-shipped]")
            options = dict(page.eval_on_selector_all("[data-testid=exp-experiment] option",
                                                     "os => os.map(o => [o.value, o.text])"))
            assert options["memory-quick"] == "memory-quick (memory, quick run)"
            assert options["shipped:memory"] == "memory (shipped results)"
            assert "shipped:norm" in options
            note = page.get_by_test_id("exp-quick-note")
            assert note.is_visible() and "stay in the list" in note.inner_text()
            assert "a --quick run" in page.text_content("[data-testid=exp-title]")
            assert (tmp_path / "memory-quick" / "results.json").is_file()
            page.select_option("[data-testid=exp-experiment]", "shipped:memory")
            page.get_by_test_id("exp-shipped").wait_for(state="visible")
            assert page.is_hidden("[data-testid=exp-quick-note]")
