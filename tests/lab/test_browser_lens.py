"""View 10 (logit lens) in real headless Chromium (the session's browser and lab,
tests/conftest.py): the grid has a cell per depth and position and its last
row is the model's prediction, a click (or Enter on a focused cell) lists that cell's top
tokens, the attribution's bars sum to the model's logit, and at phone width nothing
overflows and axe-core finds no serious problem."""

from __future__ import annotations

import pytest
import torch

import gptlab

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TEXT = "the cat sat on the m"  # the page's default text


@pytest.fixture(scope="module")
def page(lab_url, open_lab):
    with open_lab(lab_url + "#lens", "[data-testid=lens-dla]",
                  viewport={"width": 1280, "height": 900}) as opened:
        yield opened.page

def model_logits(run) -> torch.Tensor:
    model, tokenizer = gptlab.load(run)
    with torch.no_grad():
        logits, _ = model(torch.tensor([tokenizer.encode(TEXT)]))
    return logits[0]  # (T, vocab)

def test_grid_has_a_cell_per_depth_and_position(page, tiny_run):
    logits = model_logits(tiny_run)
    T, rows = logits.shape[0], 3  # tiny-gpt2: embed, block 0, block 1
    cells = page.eval_on_selector_all(".lens-cell", "cs => cs.map(c => c.dataset.testid)")
    assert len(cells) == rows * T
    last = page.eval_on_selector_all(f"[data-testid^=lens-cell-{rows - 1}-]",
                                     "cs => cs.map(c => [+c.dataset.id, +c.dataset.p])")
    own = torch.softmax(logits.double(), -1).max(-1)
    assert [i for i, _ in last] == own.indices.tolist()
    assert [p for _, p in last] == pytest.approx(own.values.tolist(), abs=1e-6)


def test_click_and_enter_show_a_cells_top_tokens(page):
    page.click("[data-testid=lens-cell-1-3]")
    items = page.eval_on_selector_all("[data-testid=lens-topk] li",
                                      "ls => ls.map(l => [+l.dataset.id, +l.dataset.p])")
    assert len(items) == 10
    assert items[0][0] == int(page.get_attribute("[data-testid=lens-cell-1-3]", "data-id"))
    assert [p for _, p in items] == sorted((p for _, p in items), reverse=True)
    assert "block 0" in page.text_content("#lens-cell-title")
    page.focus("[data-testid=lens-cell-0-5]")
    page.keyboard.press("Enter")
    assert "embed" in page.text_content("#lens-cell-title")
    assert "position 5" in page.text_content("#lens-cell-title")
    assert page.eval_on_selector("[data-testid=lens-cell-0-5]", "c => c.classList.contains('on')")


def dla(page) -> tuple[list[float], float, float]:
    values = page.eval_on_selector_all("[data-testid^=lens-part-]",
                                       "gs => gs.map(g => +g.dataset.value)")
    shown = page.eval_on_selector("[data-testid=lens-sum]",
                                  "p => [+p.dataset.sum, +p.dataset.logit]")
    return values, *shown


def test_attribution_bars_sum_to_the_logit_for_the_chosen_token(page, tiny_run):
    logits = model_logits(tiny_run)
    values, total, logit = dla(page)
    assert len(values) == 14  # embed, pos_embed, 2 x (4 heads + mlp), 2 biases
    top = int(logits[-1].argmax())
    assert page.input_value("[data-testid=lens-target]") == str(top)
    assert abs(sum(values) - logit) < 1e-5 and abs(total - logit) < 1e-5
    assert logit == pytest.approx(float(logits[-1, top]), abs=1e-5)
    text = page.text_content("[data-testid=lens-sum]")
    assert f"{total:.4f}" in text and f"{logit:.4f}" in text
    other = page.eval_on_selector_all("[data-testid=lens-target] option",
                                      "os => os.map(o => o.value)")[3]
    with page.expect_response("**/api/lens"):
        page.select_option("[data-testid=lens-target]", other)
    page.wait_for_function("window.__inflight === 0")  # the answer is drawn
    values, total, logit = dla(page)
    assert logit == pytest.approx(float(logits[-1, int(other)]), abs=1e-5)
    assert abs(sum(values) - logit) < 1e-5


def test_phone_width_and_axe(page, fits_a_phone):
    with fits_a_phone(page):
        unnamed = page.eval_on_selector_all(
            "#view-lens button, #view-lens select, #view-lens input",
            "els => els.filter(e => !(e.getAttribute('aria-label') || e.labels?.length "
            "|| e.textContent.trim())).map(e => e.id || e.dataset.testid)")
        assert not unnamed, unnamed

def test_next_token_view_sends_its_chosen_token_to_the_attribution(page, tiny_run):
    """View 8's "why this token?" opens view 10 on the same run and text, attributing the
    token picked among view 8's bars."""
    logits = model_logits(tiny_run)
    page.click("#tab-nexttoken")
    page.wait_for_selector("[data-testid=nt-bar-0]")
    ids = page.eval_on_selector_all("[data-testid=nt-why] option", "os => os.map(o => o.value)")
    bars = page.eval_on_selector_all("[data-testid^=nt-bar-]", "gs => gs.map(g => g.dataset.id)")
    assert ids == bars  # one choice per bar, in the bars' order
    chosen = ids[2]
    page.select_option("[data-testid=nt-why]", chosen)
    with page.expect_response("**/api/lens"):
        page.click("[data-testid=nt-attribute]")
    page.wait_for_function(
        "id => document.querySelector('[data-testid=lens-target]').value === id", arg=chosen)
    assert page.is_visible("#view-lens") and not page.is_visible("#view-nexttoken")
    assert page.input_value("#lens-text") == page.input_value("[data-testid=nt-text]") == TEXT
    values, total, logit = dla(page)
    assert logit == pytest.approx(float(logits[-1, int(chosen)]), abs=1e-5)
    assert abs(sum(values) - logit) < 1e-5


def test_the_embed_row_says_why_it_predicts_the_current_token(page, tiny_run):
    # regression: with tied embeddings the embed row "predicts" the token it sits on, and
    # nothing said why
    assert gptlab.load(tiny_run)[0].config.tie_embeddings
    note = page.text_content("[data-testid=lens-embed-note]")
    assert "ties" in note and "current token" in note


def test_on_a_phone_the_selected_cell_is_in_view(lab_url, open_lab):
    # regression: at 390 px the grid scrolls sideways and the selected cell (the last
    # position's) sat off-screen to the right
    with open_lab(lab_url + "#lens", "[data-testid=lens-dla]",
                  viewport={"width": 390, "height": 844}) as opened:
        page = opened.page

        def cell_in_view() -> bool:
            return page.evaluate("""() => { const g = document.getElementById('lens-grid'),
                c = g.querySelector('.lens-cell.on'), a = g.getBoundingClientRect(),
                b = c.getBoundingClientRect();
                return g.scrollWidth > g.clientWidth
                       && b.left >= a.left && b.right <= a.right; }""")

        assert cell_in_view()
        with page.expect_response("**/api/lens"):
            page.fill("[data-testid=lens-text]", TEXT + "a")
        page.wait_for_function("window.__inflight === 0")
        assert cell_in_view()


def test_an_error_clears_the_grid_and_attribution(page):
    with page.expect_response("**/api/lens"):
        page.fill("[data-testid=lens-text]", "")
    page.get_by_test_id("error").wait_for(state="visible")
    assert page.locator("[data-testid=lens-grid], [data-testid=lens-dla]").count() == 0
    with page.expect_response("**/api/lens"):
        page.fill("[data-testid=lens-text]", TEXT)
    page.wait_for_selector("[data-testid=lens-dla]")
    page.get_by_test_id("error").wait_for(state="hidden")
