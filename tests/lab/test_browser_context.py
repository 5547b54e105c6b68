"""View 11 (longer than trained) in real headless Chromium (the session's browser),
over a runs folder holding a quick context experiment: one line per method that has a
loss at the chosen length, learned positions named as refused, the training length
marked; a run live at 256 draws its loss by position and one head's attention at a
position it never saw, as the API computes them; at phone width nothing overflows and
axe-core finds nothing serious."""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest

from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def page(tmp_path_factory, context_experiment, open_lab):
    """The view, served over a runs folder that holds the experiment as 'ctx'."""
    root = tmp_path_factory.mktemp("context-runs")
    shutil.copytree(context_experiment, root / "ctx")
    ready, size = "[data-testid=fig-ctx-experiment]", {"width": 1280, "height": 900}
    with BackgroundServer(root) as url, open_lab(url + "#context", ready, viewport=size) as lab:
        yield lab.page


def series(page) -> dict[str, list]:
    return dict(page.eval_on_selector_all(
        "[data-testid=fig-ctx-experiment] [data-testid=series]",
        "gs => gs.map(g => [g.dataset.name, JSON.parse(g.dataset.points)])"))


def test_one_line_per_method_with_the_training_length_marked(page, settle):
    settle(page)
    lines = series(page)
    assert len(lines) == 9 and "learned" not in lines  # 512: learned refuses
    assert "RoPE + PI, fine-tuned (6 steps at each length)" in lines
    assert all(x < 512 for points in lines.values() for x, _ in points)
    mark = page.get_attribute("[data-testid=fig-ctx-experiment] [data-testid=trained-mark]",
                              "data-position")
    assert mark == "64"
    assert "learned: context 512 needs position 64" in page.text_content(
        "[data-testid=ctx-refused]")
    page.select_option("[data-testid=ctx-length]", "64")
    settle(page)
    lines = series(page)
    assert "learned" in lines and len(lines) == 9  # no fine-tune at 1x
    assert page.text_content("[data-testid=ctx-refused]") == ""


def test_a_run_live_at_a_position_it_never_saw(page, settle):
    assert page.input_value("[data-testid=ctx-run]") == "ctx/runs/alibi"
    page.fill("[data-testid=ctx-context]", "256")
    page.fill("[data-testid=ctx-position]", "200")
    page.click("[data-testid=ctx-go]")
    page.wait_for_selector("[data-testid=fig-ctx-attention]")
    settle(page)
    body = json.dumps({"run": "ctx/runs/alibi", "context": 256, "position": 200}).encode()
    request = urllib.request.Request(page.url.split("#")[0] + "api/context", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        expected = json.load(answer)
    status = page.text_content("[data-testid=ctx-status]")
    assert "never saw positions 64..255" in status
    assert float(page.get_attribute("[data-testid=ctx-status]", "data-loss")) == expected["loss"]
    weights = page.eval_on_selector_all("[data-testid=attention-bar]",
                                        "bs => bs.map(b => +b.dataset.weight)")
    assert weights == pytest.approx(expected["attention"]["weights"], abs=1e-12)
    assert len(weights) == 201 and sum(weights) == pytest.approx(1.0, abs=1e-5)
    assert "never seen in training" in page.text_content("[data-testid=fig-ctx-attention]")


def test_a_quick_run_is_listed_beside_the_shipped_results(page, settle):
    # regression: a --quick run (the 'ctx' here) replaced the shipped "context" entry
    from gptlab.experiments import shipped_results

    settle(page)
    options = page.eval_on_selector_all("[data-testid=ctx-experiment] option",
                                        "os => os.map(o => [o.value, o.text])")
    assert options == [["ctx", "ctx (quick run)"], ["shipped:context", "context (shipped results)"]]
    label = page.get_by_test_id("ctx-shipped")
    assert label.is_visible() and label.inner_text().startswith("ctx is a --quick run: ")
    assert "The shipped results stay in the list." in label.inner_text()
    page.select_option("[data-testid=ctx-experiment]", "shipped:context")
    page.wait_for_function("document.querySelector('[data-testid=ctx-shipped]')"
                           ".textContent.startsWith('These are shipped results')")
    settle(page)
    shipped = shipped_results.load("context")
    mark = page.get_attribute("[data-testid=fig-ctx-experiment] [data-testid=trained-mark]",
                              "data-position")
    assert mark == str(shipped["trained_length"])
    page.select_option("[data-testid=ctx-experiment]", "ctx")
    page.wait_for_function("document.querySelector('[data-testid=ctx-shipped]')"
                           ".textContent.startsWith('ctx is')")
    page.select_option("[data-testid=ctx-length]", "512")
    settle(page)


def test_phone_width_and_axe(page, fits_a_phone):
    with fits_a_phone(page):  # axe's own rules include a name for every control
        assert page.is_visible("[data-testid=fig-ctx-attention]")


def test_learned_positions_refuse_in_the_error_box(page, settle):
    page.select_option("[data-testid=ctx-run]", "ctx/runs/learned")
    page.fill("[data-testid=ctx-context]", "128")
    page.fill("[data-testid=ctx-position]", "")
    page.click("[data-testid=ctx-go]")
    settle(page)
    assert "there is no row for position 64" in page.text_content("[data-testid=error]")
    assert page.text_content("#ctx-live") == ""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, open_lab):
    """The view over an empty runs folder: a fresh install shows the shipped results."""
    root = tmp_path_factory.mktemp("fresh-runs")
    ready, size = "[data-testid=fig-ctx-experiment]", {"width": 1280, "height": 900}
    with BackgroundServer(root) as url, open_lab(url + "#context", ready, viewport=size) as lab:
        yield lab.page


def test_a_fresh_lab_shows_the_shipped_results_labelled(fresh, settle):
    from gptlab.experiments import shipped_results

    settle(fresh)
    results = shipped_results.load("context")
    assert fresh.input_value("[data-testid=ctx-experiment]") == "shipped:context"
    assert fresh.text_content("[data-testid=ctx-experiment] option") == \
        "context (shipped results)"
    label = fresh.text_content("[data-testid=ctx-shipped]")
    assert fresh.is_visible("[data-testid=ctx-shipped]")
    assert f"These are {shipped_results.label(results)}" in label
    assert results["machine"]["date"] in label
    # the lines drawn are the shipped numbers: rope's loss at the longest length
    lines = series(fresh)
    length = int(fresh.input_value("[data-testid=ctx-length]"))
    at = results["lengths"].index(length)
    rope = next(r for r in results["rows"] if r["method"] == "rope")
    buckets = rope["cells"][at]["non-overlapping"]["by_position"]
    assert [y for _, y in lines[rope["label"]]] == [b["loss"] for b in buckets
                                                    if b["loss"] is not None]
    assert fresh.is_enabled("[data-testid=ctx-quick]")


def test_a_fresh_lab_at_phone_width_and_axe(fresh, fits_a_phone):
    with fits_a_phone(fresh):
        assert fresh.is_visible("[data-testid=ctx-shipped]")


def test_a_fresh_lab_runs_its_live_panel_at_its_defaults(fresh, settle):
    # regression: the defaults (context 256, no text) answered 400 for the shipped model
    settle(fresh)
    assert fresh.input_value("[data-testid=ctx-run]") == "shakespeare"
    fresh.click("[data-testid=ctx-go]")
    fresh.wait_for_selector("[data-testid=fig-ctx-attention]")
    settle(fresh)
    assert fresh.is_hidden("[data-testid=error]")
    status = fresh.text_content("[data-testid=ctx-status]")
    assert "shakespeare (learned, trained at 128) on the embedded Shakespeare's validation " \
           "tenth" in status and "windows of 128" in status
    assert len(fresh.query_selector_all("[data-testid=attention-bar]")) == 128
