"""Views 8 (next token) and 9 (watch it learn) in real headless Chromium (Playwright, sync
API; the session's browser, tests/conftest.py): the bars against gptlab.inference.sampling, the
sliders, append / undo against `gptlab sample --greedy`, a training started and stopped
from the page, phone width and axe-core."""

from __future__ import annotations

import pytest
import torch

from gptlab.lab.runs import Runs
from gptlab.lab.server import BackgroundServer
from gptlab.model import decoding
from gptlab.model.decoding import SamplingSettings

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TEXT = "the cat sat on the m"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, copy_tiny_run):
    """This module's runs folder, a copy of the tiny run in it: the live training writes
    its own run beside it."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    return root

@pytest.fixture(scope="module")
def lab(runs):
    with BackgroundServer(runs) as url:
        yield url + "?run=tiny"  # not the shipped model, listed first

@pytest.fixture(scope="module")
def page(lab, open_lab):
    with open_lab(lab + "#nexttoken", "[data-testid=nt-lines]",
                  viewport={"width": 1280, "height": 900}) as opened:
        yield opened.page

def bars(page) -> list[dict]:
    return page.eval_on_selector_all("[data-testid^=nt-bar-]", """gs => gs.map(g => ({
        id: +g.dataset.id, final: +g.dataset.final, kept: g.dataset.kept === "true"}))""")


def set_slider(page, name: str, value: float) -> None:
    """Move a range input and wait for the bars that answer it to be drawn."""
    with page.expect_response("**/api/next_token"):
        page.eval_on_selector(f"#nt-{name}", """(el, v) => { el.value = v;
            el.dispatchEvent(new Event("input", {bubbles: true})); }""", value)
    page.wait_for_function("window.__inflight === 0")

def library_distribution(runs, text, settings) -> torch.Tensor:
    run = Runs(runs).load("tiny")
    with torch.no_grad():
        logits, _ = run.model.eval()(torch.tensor([run.tokenizer.encode(text)]))
    return torch.softmax(decoding.filter_logits(logits[:, -1], settings).double(), -1)[0]


def test_bars_sum_to_one_and_match_gptlab_sampling(page, runs):
    set_slider(page, "temp", 1.5)
    set_slider(page, "topp", 0.9)
    set_slider(page, "topk", 6)
    shown = bars(page)
    kept = [b for b in shown if b["kept"]]
    assert sum(b["final"] for b in kept) == pytest.approx(1.0, abs=1e-12)
    want = library_distribution(runs, TEXT, SamplingSettings(1.5, 6, 0.9))
    assert len(kept) == int((want > 0).sum()) <= 6
    for b in shown:
        assert b["final"] == pytest.approx(float(want[b["id"]]), abs=1e-12)
    set_slider(page, "topk", 1)
    kept = [b for b in bars(page) if b["kept"]]
    assert len(kept) == 1 and kept[0]["final"] == 1.0
    assert "1 pass top-p" in page.text_content("[data-testid=nt-summary]")
    set_slider(page, "topk", 0)
    set_slider(page, "topp", 1)


def test_append_greedy_equals_gptlab_sample_greedy_and_undo(page, runs, capsys):
    from gptlab.cli.main import main

    capsys.readouterr()
    assert main(["sample", str(runs / "tiny"), "--prompt", TEXT, "--greedy",
                 "--max-new-tokens", "1", "--no-prompt"]) == 0
    want = capsys.readouterr().out.removesuffix("\n")
    with page.expect_response("**/api/next_token"):
        page.click("[data-testid=nt-greedy]")
    assert page.input_value("[data-testid=nt-text]") == TEXT + want
    assert f'"{want}"' in page.text_content("[data-testid=nt-appended]")
    with page.expect_response("**/api/next_token"):
        page.click("[data-testid=nt-sample]")
    assert "seed 0" in page.text_content("[data-testid=nt-appended]")
    assert page.input_value("[data-testid=nt-seed]") == "1"  # the next sample's seed
    assert len(page.input_value("[data-testid=nt-text]")) == len(TEXT) + 2
    for expected in (TEXT + want, TEXT):
        with page.expect_response("**/api/next_token"):
            page.click("[data-testid=nt-undo]")
        assert page.input_value("[data-testid=nt-text]") == expected
    assert page.is_disabled("[data-testid=nt-undo]")


def attribute_of_lines(page, which: str, name: str) -> list[str]:
    return page.eval_on_selector_all(f"[data-testid=nt-lines] {which}",
                                     f"ls => ls.map(l => l.dataset.{name})")


def test_lines_one_colour_per_head_and_hover(page):
    page.select_option("[data-testid=nt-layer]", "1")
    page.select_option("[data-testid=nt-head]", "all")
    heads = attribute_of_lines(page, "line", "head")
    assert set(heads) == {"0", "1", "2", "3"}
    page.hover("[data-testid=nt-key-2]")
    assert "token 2" in page.text_content("#nt-hover")
    on = attribute_of_lines(page, "line.on", "key")
    assert on and set(on) == {"2"}
    # regression: the tokens were <text> with an aria-label but no role, inside an image;
    # now buttons in a group, and a tap (or Enter) pins a token's lines (a phone has no hover)
    assert page.get_attribute("[data-testid=nt-lines]", "role") == "group"
    assert page.get_attribute("[data-testid=nt-key-2]", "role") == "button"
    page.click("[data-testid=nt-key-2]")
    assert page.get_attribute("[data-testid=nt-key-2]", "aria-pressed") == "true"
    page.hover("[data-testid=nt-summary]")
    assert set(attribute_of_lines(page, "line.on", "key")) == {"2"}
    page.focus("[data-testid=nt-key-4]")
    page.keyboard.press("Enter")
    assert page.get_attribute("[data-testid=nt-key-4]", "aria-pressed") == "true"
    assert page.get_attribute("[data-testid=nt-key-2]", "aria-pressed") == "false"
    page.keyboard.press("Enter")  # again: unpinned
    assert page.get_attribute("[data-testid=nt-key-4]", "aria-pressed") == "false"
    page.select_option("[data-testid=nt-head]", "3")
    heads = attribute_of_lines(page, "line", "head")
    assert set(heads) == {"3"}


def test_greedy_is_named_and_cut_tokens_show_their_probability(page):
    # regression: at temperature 0 with top-k 5 the summary said "1 of 14 tokens pass
    # top-k" and 13 bars said "cut: top-k", with no probability unless hovered
    set_slider(page, "temp", 0)
    set_slider(page, "topk", 5)
    summary = page.text_content("[data-testid=nt-summary]")
    assert "greedy" in summary and "pass top-k" not in summary
    rows = page.eval_on_selector_all("[data-testid^=nt-bar-]", """gs => gs.map(g => [
        g.dataset.cut, +g.dataset.p, g.querySelector('[data-testid^=nt-note-]').textContent])""")
    assert rows[0][0] == "" and {cut for cut, _, _ in rows[1:]} == {"greedy"}
    assert all(note == f"{p:.3f} cut: greedy" for _, p, note in rows[1:])
    assert sum(p for _, p, _ in rows) == pytest.approx(1.0, abs=1e-6)  # the model's own
    set_slider(page, "temp", 1)
    rows = page.eval_on_selector_all("[data-testid^=nt-bar-]", """gs => gs.map(g => [
        g.dataset.cut, +g.dataset.p, g.querySelector('[data-testid^=nt-note-]').textContent])""")
    assert [cut for cut, _, _ in rows] == [""] * 5 + ["top_k"] * (len(rows) - 5)
    assert all(note == f"{p:.3f} cut: top-k" for _, p, note in rows[5:])
    assert "5 of 14 tokens pass top-k" in page.text_content("[data-testid=nt-summary]")
    set_slider(page, "topk", 0)


def test_an_error_clears_the_bars(page):
    # regression: emptying the text showed the error under the old 14 bars
    with page.expect_response("**/api/next_token"):
        page.fill("[data-testid=nt-text]", "")
    page.get_by_test_id("error").wait_for(state="visible")
    assert "empty" in page.get_by_test_id("error").inner_text()
    assert page.locator("[data-testid^=nt-bar-], [data-testid=nt-lines]").count() == 0
    assert page.text_content("[data-testid=nt-summary]") == ""
    with page.expect_response("**/api/next_token"):
        page.fill("[data-testid=nt-text]", TEXT)
    page.wait_for_selector("[data-testid=nt-bar-0]")
    page.get_by_test_id("error").wait_for(state="hidden")


def test_live_training_streams_and_stops_on_request(page, runs, lab, open_lab):
    page.click("#tab-live")
    page.fill("[data-testid=live-steps]", "2000")
    page.fill("[data-testid=live-every]", "10")
    page.click("[data-testid=live-start]")
    page.wait_for_function("""() => {
        const s = document.querySelector('[data-testid=fig-live-loss]');
        return s && +s.dataset.points >= 3; }""", timeout=120_000)
    # regression: a second page following the run showed its own default, "steps 1500"
    with open_lab(lab + "#live", "[data-testid=fig-live-loss]") as second:
        assert second.page.input_value("[data-testid=live-steps]") == "2000"
        assert second.page.input_value("[data-testid=live-every]") == "10"
    # regression: the loss axis started at 0, flattening the early fall
    assert float(page.get_attribute("[data-testid=fig-live-loss]", "data-ymin")) > 1
    page.click("[data-testid=live-stop]")
    page.wait_for_selector("[data-testid=live-status][data-status]", timeout=60_000)
    status = page.get_attribute("[data-testid=live-status]", "data-status")
    assert status == "interrupted", page.text_content("[data-testid=live-status]")
    assert "--resume" in page.text_content("[data-testid=live-status]")
    assert page.is_enabled("[data-testid=live-start]")
    assert page.is_disabled("[data-testid=live-stop]")
    assert page.query_selector("[data-testid=fig-live-induction]") is not None
    assert "live-induction" in Runs(runs).list()
    # regression: the run pickers kept the list of the page's load; view 8's lists the run
    page.wait_for_function("[...document.querySelectorAll('#nt-run option')]"
                           ".some(o => o.value === 'live-induction')")
    assert page.input_value("[data-testid=nt-run]") == "tiny"


@pytest.mark.parametrize("view", ["nexttoken", "live"])
def test_phone_width_and_axe(page, view, fits_a_phone):
    page.click(f"#tab-{view}")
    # the live charts redraw for the new width, a frame after the resize
    redrawn = f"""[...document.querySelectorAll('#view-{view} svg[data-testid^=fig-live]')]
        .every((s) => +s.getAttribute('width')
               === Math.min(460, document.documentElement.clientWidth - 48))"""
    with fits_a_phone(page, redrawn):
        pass
