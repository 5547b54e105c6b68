"""Views 11 (the whole model) and 12 (every head) and the learned positions of view 4, in
real headless Chromium (the session's browser, tests/conftest.py): the numbers on the page
against the library (softmax(model(idx)), the residual stream's capture, the logit lens,
the FFN's firing units, the parameter counts, capture_attention, the run's wpe), the levels
opening, the post-norm reading, the links into view 3, export, and the shipped model as
the default run."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import torch

from gptlab.interp.hooks import capture_attention
from gptlab.interp.lens import logit_lens
from gptlab.interp.residuals import capture_residuals
from gptlab.interp.walk import walk_token
from gptlab.lab.runs import Runs
from gptlab.lab.server import BackgroundServer
from gptlab.model.params import accounting

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TEXT = "the cat sat on the m"  # the view's default text
PROMPT = "the cat sat on the mat"  # view 13's


@pytest.fixture(scope="module")
def runs(tmp_path_factory, copy_tiny_run, save_char_model, tiny_text):
    """The tiny run (pre-norm, learned positions) and a post-norm run of its characters."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "post", tiny_text, preset="tiny-gpt2", norm_position="post",
                    widen_seed=3)
    return root


@pytest.fixture(scope="module")
def lab(runs):
    with BackgroundServer(runs) as url:
        yield url


@pytest.fixture(scope="module")
def page(lab, open_lab):
    with open_lab(lab + "#model", "[data-testid=fig-whole-model]", accept_downloads=True,
                  viewport={"width": 1280, "height": 900}) as opened:
        yield opened.page


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def model_of(runs, name):
    run = Runs(runs).load(name)
    return run.model.eval(), run.tokenizer


def pick(page, settle, select: str, value: str) -> None:
    page.select_option(select, value)
    settle(page)


def stage(page, settle, name: str) -> None:
    page.click(f"[data-testid=wm-stage-{name}]")
    settle(page)


def test_the_shipped_model_is_the_default_run(page):
    assert page.input_value("[data-testid=wm-run]") == "shakespeare"
    options = page.eval_on_selector_all("[data-testid=wm-run] option", "os => os.map(o => o.value)")
    assert options == ["shakespeare", "post", "tiny"]
    assert "shakespeare" in page.text_content("#figure-whole-model .caption")


def test_final_probabilities_stream_norms_and_lens_are_the_librarys(page, runs, settle):
    pick(page, settle, "[data-testid=wm-run]", "tiny")
    model, tok = model_of(runs, "tiny")
    idx = torch.tensor([tok.encode(TEXT)])
    T = idx.shape[1]
    assert page.input_value("[data-testid=wm-position]") == str(T - 1)
    stage(page, settle, "output")
    with torch.no_grad():
        logits, _ = model(idx)
    probs = torch.softmax(logits[0, -1].double(), -1)
    shown = page.eval_on_selector_all("[data-testid=wm-top] li",
                                      "ls => ls.map(l => [+l.dataset.id, +l.dataset.p])")
    p, ids = probs.topk(5)
    assert [i for i, _ in shown] == ids.tolist()
    assert max(abs(q - float(w)) for (_, q), w in zip(shown, p, strict=True)) < 1e-6
    # beside each block: the stream's norm and its logit-lens token after the block
    parts = capture_residuals(model, idx)
    lens = torch.softmax(logit_lens(model, idx).double(), -1)[:, 0, -1]
    for layer in range(2):
        read = page.eval_on_selector(f"[data-testid=wm-reading-block-{layer}]",
                                     "t => [+t.dataset.norm, +t.dataset.lensId, +t.dataset.lensP]")
        assert read[0] == pytest.approx(float(parts.resid_post[layer][0, -1].norm()), rel=1e-6)
        assert read[1] == int(lens[layer + 1].argmax())
        assert read[2] == pytest.approx(float(lens[layer + 1].max()), abs=1e-6)
    embed = page.eval_on_selector("[data-testid=wm-reading-embed]", "t => +t.dataset.norm")
    assert embed == pytest.approx(float(parts.resid_pre[0][0, -1].norm()), rel=1e-6)


def test_a_block_opens_into_its_stages_and_each_shows_its_numbers(page, runs, settle):
    pick(page, settle, "[data-testid=wm-run]", "tiny")
    pick(page, settle, "[data-testid=wm-position]", "4")
    model, tok = model_of(runs, "tiny")
    walk = walk_token(model, torch.tensor(tok.encode(TEXT)), 4)
    assert page.get_attribute("[data-testid=wm-stage-block-1]", "aria-expanded") == "false"
    stage(page, settle, "block-1")
    assert page.get_attribute("[data-testid=wm-stage-block-1]", "aria-expanded") == "true"
    order = page.eval_on_selector_all("[data-stage]", "gs => gs.map(g => g.dataset.stage)")
    i = order.index("block-1")
    assert order[i + 1:i + 7] == ["norm1-1", "attn-1", "add1-1", "norm2-1", "ffn-1", "add2-1"]
    assert order[-3:] == ["final", "head", "output"]  # pre-norm: a final norm before lm_head
    stage(page, settle, "ffn-1")
    fired = page.get_attribute("[data-testid=wm-ffn-fired]", "data-fired")
    assert int(fired) == walk.blocks[1].ffn.fired
    assert f"{walk.blocks[1].ffn.fired} of {model.config.ffn_hidden} units fire" in (
        page.text_content("[data-testid=wm-ffn-fired]"))
    stage(page, settle, "norm1-1")
    formula = page.text_content("[data-testid=wm-norm-formula]")
    assert f"{walk.blocks[1].norm_1.mean:.4f}" in formula
    assert f"{walk.blocks[1].norm_1.scale:.4f}" in formula
    read = page.eval_on_selector("[data-testid=wm-reading-add1-1]", "t => +t.dataset.norm")
    assert read == pytest.approx(walk.blocks[1].add_1.norm, rel=1e-6)
    stage(page, settle, "block-1")  # closes again
    assert page.locator("[data-testid=wm-stage-ffn-1]").count() == 0


def test_ffn_share_is_the_runs_own_count(page, runs, settle):
    pick(page, settle, "[data-testid=wm-run]", "tiny")
    model, _ = model_of(runs, "tiny")
    acc = accounting(model.config)
    ffn = next(r for r in acc.rows if r.name.startswith("feed-forward")).params
    share = float(page.get_attribute("[data-testid=wm-ffn-share]", "data-share"))
    assert share == pytest.approx(ffn / acc.per_block, abs=1e-12)
    assert f"{100 * ffn / acc.per_block:.1f}% of a block" in page.text_content(
        "[data-testid=wm-ffn-share]")
    assert f"{acc.total:,} parameters" in page.text_content("[data-testid=fig-wm-params]")


def test_a_post_norm_run_and_its_pre_norm_reading(page, runs, settle):
    pick(page, settle, "[data-testid=wm-run]", "post")
    assert page.is_visible("[data-testid=wm-reading]")
    stage(page, settle, "block-0")
    order = page.eval_on_selector_all("[data-stage]", "gs => gs.map(g => g.dataset.stage)")
    i = order.index("block-0")
    assert order[i + 1:i + 7] == ["attn-0", "add1-0", "norm1-0", "ffn-0", "add2-0", "norm2-0"]
    assert "final" not in order  # the last block's norm feeds lm_head
    model, tok = model_of(runs, "post")
    idx = torch.tensor([tok.encode(TEXT)])
    with torch.no_grad():
        probs = torch.softmax(model(idx)[0][0, -1].double(), -1)
    stage(page, settle, "output")
    first = page.eval_on_selector("[data-testid=wm-top] li", "l => [+l.dataset.id, +l.dataset.p]")
    assert first[0] == int(probs.argmax()) and abs(first[1] - float(probs.max())) < 1e-6
    page.check("[data-testid=wm-reading]")
    order = page.eval_on_selector_all("[data-stage]", "gs => gs.map(g => g.dataset.stage)")
    i = order.index("block-0")
    assert order[i + 1:i + 7] == ["norm1-0", "attn-0", "add1-0", "norm2-0", "ffn-0", "add2-0"]
    assert "final" in order and page.locator(".wm-reading").count() == 0  # no numbers
    stage(page, settle, "attn-0")
    assert "post-norm" in page.text_content("[data-testid=wm-detail]")
    page.uncheck("[data-testid=wm-reading]")
    assert page.locator(".wm-reading").count() > 0


def test_attention_stage_opens_its_layer_and_head_in_views_3_and_13(page, runs, settle):
    """The links write the state they open: view 3 at the block's layer and the stepper's
    head, view 13's head view at the block's layer; the address says both."""
    page.click("#tab-model")
    pick(page, settle, "[data-testid=wm-run]", "shakespeare")
    page.click("[data-testid=wm-stage-block-2]")
    stage(page, settle, "attn-2")
    model, tok = model_of(runs, "shakespeare")
    rows = page.eval_on_selector_all("[data-testid=fig-wm-attn-2] rect[data-cell]",
                                     "rs => rs.length")
    assert rows == model.config.n_head * len(TEXT)
    pick(page, settle, "[data-testid=wm-steps-head]", "3")
    page.click("[data-testid=wm-open-heads]")
    page.wait_for_selector("[data-testid=fig-head-2-3]")
    settle(page)
    assert page.is_visible("#view-heads")
    assert page.input_value("[data-testid=heads-run]") == "shakespeare"
    assert page.input_value("[data-testid=heads-prompt]") == TEXT
    assert (page.input_value("[data-testid=heads-layer]"),
            page.input_value("[data-testid=heads-head]")) == ("2", "3")
    assert (query(page)["layer"], query(page)["head"]) == ("2", "3")
    page.click("#tab-model")
    page.wait_for_selector("[data-testid=wm-open-allheads]")
    settle(page)
    page.click("[data-testid=wm-open-allheads]")
    page.wait_for_selector("[data-testid=hv-lines]")
    settle(page)
    assert page.is_visible("#view-allheads")
    assert page.input_value("[data-testid=hv-layer]") == "2"
    assert query(page)["layer"] == "2"
    page.click("#tab-model")


def test_every_head_is_the_models_and_opens_in_view_3(page, runs, settle):
    page.click("#tab-allheads")
    page.wait_for_selector("[data-testid=fig-all-heads]")
    pick(page, settle, "[data-testid=ah-run]", "tiny")
    model, tok = model_of(runs, "tiny")
    # the text the earlier views typed: one state across the lab (static/state.js)
    prompt = page.input_value("[data-testid=ah-prompt]")
    weights = capture_attention(model, torch.tensor([tok.encode(prompt)]))[:, 0].double()
    cells = page.eval_on_selector_all("[data-testid^=ah-head-]",
                                      "gs => gs.map(g => [g.dataset.testid, +g.dataset.prev])")
    assert len(cells) == model.config.n_layer * model.config.n_head
    for name, prev in cells:
        layer, head = (int(x) for x in name.split("-")[2:])
        want = weights[layer, head].diagonal(-1).mean()
        assert prev == pytest.approx(float(want), abs=1e-9), name
    page.focus("[data-testid=ah-head-1-2]")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=fig-head-1-2]")
    settle(page)
    assert page.is_visible("#view-heads")
    assert (page.input_value("[data-testid=heads-layer]"),
            page.input_value("[data-testid=heads-head]")) == ("1", "2")
    assert page.input_value("[data-testid=heads-prompt]") == prompt
    shown = page.text_content("[data-testid=fig-head-1-2] rect[data-cell='5,3'] title")
    assert f"{float(weights[1, 2, 5, 3]):.6g}"[:6] in shown
    page.click("#tab-model")


def test_learned_positions_are_the_runs_wpe(page, runs, settle):
    page.click("#tab-positions")
    page.wait_for_selector("[data-testid=fig-learned-sim]")
    pick(page, settle, "[data-testid=lp-run]", "tiny")
    wpe = Runs(runs).load("tiny").model.wpe.weight.detach().double()
    unit = wpe / wpe.norm(dim=1, keepdim=True)
    cos = unit @ unit.T
    for p in (0, 5):
        got = page.eval_on_selector_all(f"[data-testid=lp-row-{p}] td[data-position]",
                                        "ts => ts.map(t => [+t.dataset.position, "
                                        "+t.dataset.cosine])")
        row = cos[p].clone()
        row[p] = -2
        best = torch.argsort(row, descending=True, stable=True)[:3]
        assert [q for q, _ in got] == best.tolist()
        assert [c for _, c in got] == pytest.approx(row[best].tolist(), abs=1e-12)
    adjacent = float(page.get_attribute("[data-testid=lp-summary]", "data-adjacent"))
    assert adjacent == pytest.approx(float(cos.diagonal(1).mean()), abs=1e-12)
    cells = page.locator("[data-testid=fig-learned-table] rect[data-cell]").count()
    assert cells == 32 * 32  # tiny-gpt2: 32 positions of 32 dims
    pick(page, settle, "[data-testid=lp-run]", "post")  # learned too
    page.get_by_test_id("lp-positions").fill("8")
    page.get_by_test_id("lp-positions").press("Enter")
    settle(page)
    assert page.locator("[data-testid=fig-learned-sim] rect[data-cell]").count() == 64
    page.click("#tab-model")


def test_export_the_diagram_as_png_and_the_grid_as_svg(page, tmp_path, png_magic, download):
    page.click("#tab-model")
    name, path = download(page, "export-png-whole-model", tmp_path)
    assert name == "gptlab-whole-model.png"
    assert path.read_bytes()[:8] == png_magic and path.stat().st_size > 1000
    page.click("#tab-allheads")
    name, path = download(page, "export-svg-all-heads", tmp_path)
    text = path.read_text(encoding="utf-8")
    assert name == "gptlab-all-heads.svg" and text.startswith("<?xml")
    assert "<image" in text and "data:image/png;base64," in text  # the patterns, embedded
    page.click("#tab-model")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_width_dark_mode_and_axe(lab, open_lab, fits_a_phone, settle, scheme):
    with open_lab(lab + "?run=tiny#model", "[data-testid=fig-whole-model]",
                  color_scheme=scheme) as opened:
        page = opened.page
        stage(page, settle, "block-0")
        for tab, ready in (("model", "fig-whole-model"), ("allheads", "fig-all-heads"),
                           ("positions", "fig-learned-sim")):
            page.click(f"#tab-{tab}")
            page.wait_for_selector(f"[data-testid={ready}]")
            settle(page)
            with fits_a_phone(page):
                if tab == "model":  # the diagram fits unscaled: its boxes stay 24 px high
                    width = page.eval_on_selector("[data-testid=fig-whole-model]",
                                                  "s => s.getBoundingClientRect().width")
                    assert width == pytest.approx(340, abs=1)
            if scheme == "dark":  # the figures follow the page's colours
                bg = page.eval_on_selector(f"[data-testid={ready}] .fig-bg",
                                           "r => getComputedStyle(r).fill")
                assert bg != "rgb(255, 255, 255)"
