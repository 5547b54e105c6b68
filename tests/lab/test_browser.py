"""The lab end to end in real headless Chromium (Playwright, sync API): the five stages,
the mask switch, an edited cell, a trained model's heads, the other views, and exports.
(The session's browser and lab: tests/conftest.py.)"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gptlab.lab.quiz import ROW0_CHOICES
from gptlab.lab.schemas import AttentionRequest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

MINUS_INF = "\u2212\u221e"


@pytest.fixture(scope="module")
def page(lab_url, open_lab):
    with open_lab(lab_url, "[data-testid=fig-q]", timeout_ms=15_000, accept_downloads=True,
                  viewport={"width": 1280, "height": 900}) as opened:
        yield opened.page


def cell(page, name: str, i: int, j: int) -> str:
    return page.text_content(f"[data-testid={name}-{i}-{j}]")  # an SVG <text>


def matrix_text(page, name: str, rows: int, cols: int) -> list[list[str]]:
    return [[cell(page, name, i, j) for j in range(cols)] for i in range(rows)]


def fmt(x: float) -> str:
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


def test_five_stages_mask_switch_and_edit(page):
    stage = page.get_by_test_id("stage-label")
    assert "Stage 1 of 5" in stage.inner_text()
    assert page.get_by_test_id("mask-toggle").is_disabled()  # live at stages 3 and 4 only
    q_before = matrix_text(page, "q", 5, 4)

    for n in (2, 3):
        page.get_by_test_id("calc-next").click()
        assert f"Stage {n} of 5" in stage.inner_text()
    page.wait_for_selector("[data-testid=fig-masked]")
    toggle = page.get_by_test_id("mask-toggle")
    assert toggle.is_enabled() and toggle.is_checked()
    for i in range(5):  # the masked upper triangle
        for j in range(5):
            assert (cell(page, "masked", i, j) == MINUS_INF) == (j > i), (i, j)

    toggle.uncheck()  # off: no cell is masked
    page.wait_for_function("!document.querySelector('[data-testid=masked-0-1]')"
                           ".textContent.includes('\u221e')")
    assert all(MINUS_INF not in c for row in matrix_text(page, "masked", 5, 5) for c in row)
    toggle.check()
    page.wait_for_function("document.querySelector('[data-testid=masked-0-1]')"
                           ".textContent.includes('\u221e')")

    page.get_by_test_id("calc-next").click()
    assert "Stage 4 of 5" in stage.inner_text()
    assert cell(page, "weights", 0, 0) == "1.00"  # "cat" sees only itself
    assert [cell(page, "weights", 0, j) for j in range(1, 5)] == ["0.00"] * 4
    assert [cell(page, "rowsums", i, 0) for i in range(5)] == ["1.00"] * 5
    toggle.uncheck()  # BERT-style: row 0 spreads over every token
    page.wait_for_function("document.querySelector('[data-testid=weights-0-0]')"
                           ".textContent !== '1.00'")
    assert all(float(cell(page, "weights", 0, j)) > 0 for j in range(5))
    toggle.check()
    page.wait_for_function("document.querySelector('[data-testid=weights-0-0]')"
                           ".textContent === '1.00'")

    page.get_by_test_id("calc-next").click()
    assert "Stage 5 of 5" in stage.inner_text()
    assert page.get_by_test_id("calc-next").is_disabled() and toggle.is_disabled()
    out_before = matrix_text(page, "out", 5, 4)

    for _ in range(4):
        page.get_by_test_id("calc-back").click()
    assert "Stage 1 of 5" in stage.inner_text()
    page.get_by_test_id("x-cell-0-0").fill("2.5")
    page.get_by_test_id("x-cell-0-0").press("Enter")
    page.wait_for_function(
        f"document.querySelector('[data-testid=q-0-0]').textContent !== '{q_before[0][0]}'")
    # regression: editing one cell marked every cell of the matrix as edited
    edited = page.locator(".editgrid input.edited")
    assert edited.count() == 1 and edited.get_attribute("data-testid") == "x-cell-0-0"
    # the page shows what the library computes for the edited input
    body = json.dumps({"tokens": "cat sat on the mat", "d": 4, "seed": 0, "causal": True})
    data = page.evaluate(
        f"fetch('/api/attention', {{method: 'POST', body: '{body}', "
        "headers: {'Content-Type': 'application/json'}}).then(r => r.json())")
    x = np.array(data["x"])
    x[0, 0] = 2.5
    wq, wk, wv = (np.array(data[k]) for k in ("w_q", "w_k", "w_v"))
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ k.T / math.sqrt(4)
    s[np.triu_indices(5, 1)] = -np.inf
    w = np.exp(s - s.max(1, keepdims=True))
    out = (w / w.sum(1, keepdims=True)) @ v
    assert matrix_text(page, "q", 5, 4) == [[fmt(z) for z in row] for row in q]
    for _ in range(4):
        page.get_by_test_id("calc-next").click()
    out_after = matrix_text(page, "out", 5, 4)
    assert out_after != out_before
    assert out_after == [[fmt(z) for z in row] for row in out]


def test_bad_input_shows_a_message_not_a_crash(page):
    page.click("#tab-calc")
    # the field's range is the server's: one source, the request schema
    d = AttentionRequest.model_json_schema()["properties"]["d"]
    page.wait_for_function("document.querySelector('[data-testid=calc-d]').max !== ''")
    assert (page.get_by_test_id("calc-d").get_attribute("min"),
            page.get_by_test_id("calc-d").get_attribute("max")) == (str(d["minimum"]),
                                                                      str(d["maximum"]))
    page.get_by_test_id("calc-d").fill("99")
    page.get_by_test_id("calc-d").press("Enter")
    error = page.get_by_test_id("error")
    error.wait_for(state="visible")
    assert f"d must be between 1 and {d['maximum']}" in error.inner_text()
    # regression: the old figures stayed on screen under the error
    assert page.locator("#view-calc svg, #view-calc .editgrid").count() == 0
    page.get_by_test_id("calc-d").fill("4")
    page.get_by_test_id("calc-d").press("Enter")
    error.wait_for(state="hidden")
    page.wait_for_selector("#calc-figures svg")

    page.click("#tab-heads")
    page.wait_for_selector("[data-testid=fig-head-0-0]")
    page.get_by_test_id("heads-prompt").fill("")
    page.get_by_test_id("heads-prompt").press("Enter")
    error.wait_for(state="visible")
    assert "empty" in error.inner_text()
    assert page.locator("#view-heads svg").count() == 0
    assert page.get_by_test_id("heads-check").inner_text() == ""
    page.get_by_test_id("heads-prompt").fill("the cat sat on the mat")
    page.get_by_test_id("heads-prompt").press("Enter")
    error.wait_for(state="hidden")
    page.click("#tab-calc")


def test_mask_off_says_so_at_every_stage(page):
    # regression: with the mask off, stage 3 still said "else −∞" and stage 5 said nothing
    page.click("#tab-calc")
    for _ in range(4):
        page.get_by_test_id("calc-back").click()
    for _ in range(2):
        page.get_by_test_id("calc-next").click()
    assert MINUS_INF in page.get_by_test_id("calc-formula").inner_text()
    page.get_by_test_id("mask-toggle").uncheck()
    page.wait_for_function("document.querySelector('[data-testid=calc-formula]')"
                           ".textContent.includes('mask off')")
    assert MINUS_INF not in page.get_by_test_id("calc-formula").inner_text()
    page.get_by_test_id("calc-next").click()
    page.get_by_test_id("calc-next").click()
    assert "mask is off" in page.get_by_test_id("calc-changed").inner_text()
    page.get_by_test_id("calc-back").click()
    page.get_by_test_id("mask-toggle").check()
    page.wait_for_function("document.querySelector('[data-testid=masked-0-1]') === null")
    page.get_by_test_id("calc-next").click()
    assert "mask is off" not in page.get_by_test_id("calc-changed").inner_text()
    for _ in range(4):
        page.get_by_test_id("calc-back").click()


def test_heads_of_the_trained_model_and_png_export(page, tmp_path, png_magic):
    page.click("#tab-heads")
    page.wait_for_selector("[data-testid=fig-head-0-3]")  # the grid of all heads
    assert page.get_by_test_id("heads-run").input_value() == "tiny"
    page.get_by_test_id("heads-head").select_option("2")
    page.wait_for_selector("[data-testid=fig-head-0-2]")
    assert page.locator("[data-testid^=fig-head-]").count() == 1
    # regression: the layer menu did nothing to the grid while head = all
    page.get_by_test_id("heads-head").select_option("all")
    page.get_by_test_id("heads-layer").select_option("1")
    page.wait_for_selector("[data-testid=fig-head-1-3]")
    assert page.locator("[data-testid^=fig-head-0-]").count() == 0
    page.get_by_test_id("heads-layer").select_option("0")
    page.wait_for_selector("[data-testid=fig-head-0-3]")
    page.get_by_test_id("heads-head").select_option("2")
    page.wait_for_selector("[data-testid=fig-head-0-2]")
    assert cell(page, "head-0-2", 0, 0) == "1.00"  # causal: the first token sees itself
    page.locator("[data-testid=fig-head-0-2] rect[data-cell='3,1']").hover()
    assert "query" in page.get_by_test_id("heads-hover").inner_text()
    assert "matches" in page.get_by_test_id("heads-check").inner_text()
    page.wait_for_selector("[data-testid=fig-w_o]")

    with page.expect_download() as info:
        page.get_by_test_id("export-png-head-0-2").click()
    png = tmp_path / "head.png"
    info.value.save_as(png)
    assert info.value.suggested_filename == "gptlab-head-0-2.png"
    assert png.read_bytes()[:8] == png_magic and png.stat().st_size > 1000
    with page.expect_download() as info:
        page.get_by_test_id("export-svg-concat").click()
    svg = tmp_path / "concat.svg"
    info.value.save_as(svg)
    text = svg.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "<svg" in text and "<rect" in text


def test_other_views(page):
    page.click("#tab-scaling")
    page.wait_for_selector("[data-testid=fig-scaling-sweep]")
    assert float(page.get_by_test_id("scaling-2-1").inner_text()) > float(
        page.get_by_test_id("scaling-2-2").inner_text())  # saturation without the scale

    page.click("#tab-positions")
    page.wait_for_selector("[data-testid=rope-score-5]")
    assert page.get_by_test_id("rope-score-0").inner_text() == page.get_by_test_id(
        "rope-score-5").inner_text()

    page.click("#tab-params")
    total = page.get_by_test_id("params-total")
    total.wait_for()
    assert total.inner_text() == "124,439,808"
    page.get_by_test_id("param-n_layer").fill("24")
    page.wait_for_function(
        "document.querySelector('[data-testid=params-total]').textContent !== '124,439,808'")
    assert int(total.inner_text().replace(",", "")) == 124_439_808 + 12 * (
        4 * 768 * 768 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768)
    # regression: the summary said "68.98 B" and its chart "68.98 G": one unit
    page.get_by_test_id("params-preset").select_option("llama2-70b")
    page.wait_for_function("document.querySelector('[data-testid=params-total]')"
                           ".textContent === '68,976,648,192'")
    assert "(68.98 B)" in page.get_by_test_id("params-summary").inner_text()
    title = page.locator("[data-testid=fig-params-breakdown] text").first.text_content()
    assert "68.98 B" in title and " G" not in page.locator(
        "[data-testid=fig-params-breakdown]").text_content()

    page.click("#tab-scores")
    page.wait_for_selector("[data-testid=fig-scores-induction]")
    page.locator("[data-testid=fig-scores-induction] rect[data-cell='1,2']").click()
    page.wait_for_selector("[data-testid=fig-scored-head]")
    page.get_by_test_id("ablate-head").click()
    page.wait_for_function(
        "document.querySelector('[data-testid=scores-ablation]').textContent.includes('loss')")
    assert "L1 H2" in page.get_by_test_id("scores-ablation").inner_text()

    page.click("#tab-quiz")
    page.get_by_test_id("quiz-kind").select_option("row0")
    page.get_by_test_id("quiz-new").click()
    page.wait_for_selector("[data-testid=quiz-choice-mask]")
    page.get_by_test_id("quiz-choice-mask").check()
    page.get_by_test_id("quiz-submit").click()
    verdict = page.get_by_test_id("quiz-verdict")
    verdict.wait_for()
    assert verdict.inner_text() == "Correct."
    assert "softmax" in page.get_by_test_id("quiz-result").inner_text()
    # regression: a wrong choice showed its internal id ("the answer is mask")
    page.get_by_test_id("quiz-choice-largest").check()
    page.get_by_test_id("quiz-submit").click()
    page.wait_for_function("document.querySelector('[data-testid=quiz-verdict]')"
                           ".textContent.startsWith('Not quite')")
    assert verdict.inner_text() == f"Not quite: the answer is {ROW0_CHOICES['mask']}"
