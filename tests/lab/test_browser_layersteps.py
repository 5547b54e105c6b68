"""View 12's attention stage opened into view 1's stages on the run's model
(static/wmsteps.js over POST /api/walk/layer), in headless Chromium: every stage's numbers
on the page against the library's own capture (the attention layer's input, the recorded
softmax weights, the per-head outputs at attn.heads, attention's output) within 1e-6, the
walk with Next step, the mask switch, W_O's block norms opening a head, the residual
bypass, the FFN's memories, the temperature; and the review's defects 1, 2, 3, 8, 9 and 12
(view 12's block hint, a bias-free LayerNorm's formula, the parameter legend under the bar,
the learned-position scale, view 1's mask switch at stage 5, view 3's W_O as one bitmap),
with axe-core at 1280 and 390 px, light and dark. Then the steps' controls, address,
matrices and keys: the mask switch followed by every stage after the mask (against the
library's own attention layer run without the mask) and off, with its reason, where it has
no effect; the last token saying how to pick an earlier one; the address's layer, head and
pos opening a block's attention and written back; the tour on the shipped model; the whole
T x T matrices; the concatenation's head boundaries; W_O's block zoomed; the arrow keys,
the focus at the last stage and "Next step" a few Tabs from the diagram. The timings of the
redraws they measure are printed (-s), never asserted."""

from __future__ import annotations

import copy
import json
import math
import time
from urllib.parse import parse_qs, quote, urlsplit

import pytest
import torch
from axe_playwright_python.sync_playwright import Axe

from gptlab.interp.hooks import capture_attention, forward_hooks
from gptlab.lab.runs import Runs
from gptlab.lab.server import BackgroundServer
from gptlab.model.attention import AttentionInputs
from gptlab.model.positional import sinusoidal_table

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TEXT = "the cat sat on the m"  # view 12's default text
POSITION, LAYER = 6, 1
WCAG_22_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]  # as test_browser_a11y


@pytest.fixture(scope="module")
def runs(tmp_path_factory, copy_tiny_run):
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    return root


@pytest.fixture(scope="module")
def lab(runs):
    with BackgroundServer(runs) as url:
        yield url


@pytest.fixture(scope="module")
def page(lab, open_lab):
    with open_lab(lab + "?run=tiny#model", "[data-testid=fig-whole-model]", accept_downloads=True,
                  viewport={"width": 1280, "height": 900}) as opened:
        yield opened.page


@pytest.fixture(scope="module")
def library(runs):
    """The library's capture at LAYER for TEXT: attention's input and output, the per-head
    outputs and the softmax weights; and the walk's logits."""
    run = Runs(runs).load("tiny")
    model = run.model.eval()
    idx = torch.tensor([run.tokenizer.encode(TEXT)])
    attn, seen = model.blocks[LAYER].attn, {}
    hooks = [(attn.heads, lambda _m, _a, out: seen.__setitem__("heads", out[0].double())),
             (attn, lambda _m, a, out: seen.update(x=a[0][0].double(), out=out[0].double()))]
    with torch.no_grad(), forward_hooks(*hooks):
        logits, _ = model(idx)
    seen["weights"] = capture_attention(model, idx)[LAYER, 0].double()
    seen["logits"] = logits[0, -1].double()
    seen["model"] = model
    with torch.no_grad(), forward_hooks((model.blocks[LAYER], lambda _m, a, _o: seen.__setitem__(
            "stream", a[0][0].double()))):
        model(idx)
    return seen


@pytest.fixture(scope="module")
def unmasked(library):
    """The library's own attention layer in float64 on the captured input, the mask off
    (is_causal=False): each head's output (nh, T, hs) and attention's output (T, C)."""
    attn, seen = copy.deepcopy(library["model"].blocks[LAYER].attn).double(), {}
    with torch.no_grad(), forward_hooks((attn.heads, lambda _m, _a, out: seen.__setitem__(
            "heads", out[0]))):
        out = attn(library["x"][None], AttentionInputs(is_causal=False))[0]
    return seen["heads"], out


def shown(page, testid):
    return torch.tensor(json.loads(page.get_attribute(f"[data-testid={testid}]", "data-values")),
                        dtype=torch.float64)


def worst(page, testid, want):
    return float((shown(page, testid) - want).abs().max())


def axe_clean(page):
    # the stage's fade (view 1's) must end first: mid-fade the text is paler than it is
    page.wait_for_function("document.getAnimations().every(a => a.playState !== 'running')")
    found = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_22_AA},
                                     "resultTypes": ["violations"]}).response["violations"]
    bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in found]
    assert not bad, bad


def open_attention(page, settle):
    page.select_option("[data-testid=wm-run]", "tiny")
    settle(page)
    page.select_option("[data-testid=wm-position]", str(POSITION))
    settle(page)
    if page.get_attribute(f"[data-testid=wm-stage-block-{LAYER}]", "aria-expanded") == "false":
        page.click(f"[data-testid=wm-stage-block-{LAYER}]")
        settle(page)
    page.click(f"[data-testid=wm-stage-attn-{LAYER}]")
    settle(page)
    page.wait_for_selector("[data-testid=wm-steps-figures]")


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def label(token: str) -> str:
    """A token as the page labels it (dom.js tokenLabel): a space shows as ␣."""
    return json.dumps(token)[1:-1].replace(" ", "\u2423")


def to_stage(page, settle, n):
    """Back or Next until the steps show stage n (0-based)."""
    while (at := int(page.get_attribute("[data-testid=wm-steps-figures]", "data-stage"))) != n:
        page.click("[data-testid=wm-steps-next]" if at < n else "[data-testid=wm-steps-back]")
        settle(page)
        page.wait_for_selector(f"[data-testid=wm-steps-figures]:not([data-stage='{at}'])")


def next_step(page, settle, n):
    page.click("[data-testid=wm-steps-next]")
    settle(page)
    page.wait_for_selector(f"[data-testid=wm-steps-figures][data-stage='{n}']")


def test_every_stage_matches_the_librarys_capture(page, settle, library):
    open_attention(page, settle)
    page.select_option("[data-testid=wm-steps-head]", "1")
    settle(page)
    to_stage(page, settle, 0)
    head, t = 1, POSITION
    model = library["model"]
    hs = model.config.head_dim
    assert "Stage 1 of 7" in page.text_content("[data-testid=wm-steps-label]")
    assert page.is_disabled("[data-testid=wm-steps-mask]")  # nothing masked yet
    assert worst(page, "fig-wm-steps-x", library["x"][t]) < 1e-6
    # q and the keys: the library's own weights applied to the captured input
    qkv = library["x"] @ model.blocks[LAYER].attn.qkv.weight.detach().double().T
    qkv = qkv + model.blocks[LAYER].attn.qkv.bias.detach().double()
    q = qkv[t, head * hs:(head + 1) * hs]
    k = qkv[:, model.config.n_embd + head * hs:model.config.n_embd + (head + 1) * hs]
    assert worst(page, "fig-wm-steps-q", q) < 1e-6
    # every strip: hover names a value; beside the raw row, the same values sorted
    page.hover("[data-testid=fig-wm-steps-q] g[data-row=raw] rect[data-i='3']")
    title = page.text_content("[data-testid=fig-wm-steps-q] title")
    assert title.startswith("q (head 1)[3] = ") and f"{float(q[3]):.4g}"[:4] in title, title
    ordered = page.eval_on_selector_all(
        "[data-testid=fig-wm-steps-q] g[data-row=sorted] rect[data-v]",
        "rs => rs.map(r => +r.dataset.v)")
    assert ordered == pytest.approx(sorted(q.tolist(), reverse=True), abs=1e-6)
    assert worst(page, "fig-wm-steps-keys", k) < 1e-6
    next_step(page, settle, 1)
    raw = k @ q
    assert worst(page, "fig-wm-steps-raw", raw) < 1e-6
    assert worst(page, "fig-wm-steps-scaled", raw / hs ** 0.5) < 1e-6
    assert "range" in page.text_content("#figure-wm-steps-raw .caption")
    next_step(page, settle, 2)
    masked = json.loads(page.get_attribute("[data-testid=fig-wm-steps-masked]", "data-values"))
    assert [m is None for m in masked] == [j > t for j in range(len(TEXT))]
    next_step(page, settle, 3)
    assert worst(page, "fig-wm-steps-weights", library["weights"][head, t]) < 1e-6
    next_step(page, settle, 4)
    assert worst(page, "fig-wm-steps-head-out", library["heads"][head, t]) < 1e-6
    next_step(page, settle, 5)
    assert worst(page, "fig-wm-steps-concat", library["heads"][:, t].reshape(-1)) < 1e-6
    w_o = model.blocks[LAYER].attn.proj.weight.detach().double()
    norms = torch.stack([w_o[:, h * hs:(h + 1) * hs].norm() for h in range(model.config.n_head)])
    assert worst(page, "fig-wm-steps-wo-norms", norms) < 1e-9
    next_step(page, settle, 6)
    assert page.is_disabled("[data-testid=wm-steps-next]")
    assert worst(page, "fig-wm-steps-out", library["out"][t]) < 1e-6
    assert page.is_visible("[data-testid=fig-wm-bypass]")


def test_mask_switch_shows_what_the_token_would_read_bidirectionally(page, settle, library):
    open_attention(page, settle)
    to_stage(page, settle, 3)
    head = int(page.input_value("[data-testid=wm-steps-head]"))
    page.uncheck("[data-testid=wm-steps-mask]")
    settle(page)
    page.wait_for_selector("[data-testid=fig-wm-steps-weights]")
    weights = shown(page, "fig-wm-steps-weights")
    assert float(weights[POSITION + 1:].sum()) > 0  # later tokens read
    assert abs(float(weights.sum()) - 1) < 1e-9
    # the bidirectional softmax is not the model's: compare with the causal capture
    assert float((weights - library["weights"][head, POSITION]).abs().max()) > 1e-3
    next_step(page, settle, 4)
    assert page.is_enabled("[data-testid=wm-steps-mask]")  # the output depends on the mask
    page.check("[data-testid=wm-steps-mask]")
    settle(page)
    assert worst(page, "fig-wm-steps-head-out", library["heads"][head, POSITION]) < 1e-6


def test_w_o_norm_opens_a_head_and_ffn_memories(page, settle, library):
    open_attention(page, settle)
    to_stage(page, settle, 5)
    page.click("[data-testid=fig-wm-steps-wo-norms] rect[data-cell='0,2']")
    settle(page)
    page.wait_for_selector("[data-testid=fig-wm-steps-wo-block]")
    assert page.input_value("[data-testid=wm-steps-head]") == "2"
    hs = library["model"].config.head_dim
    block = library["model"].blocks[LAYER].attn.proj.weight.detach().double()[:, 2 * hs:3 * hs]
    assert worst(page, "fig-wm-steps-wo-block", block.T) < 1e-9  # d_k x n_embd, as view 3
    page.click(f"[data-testid=wm-stage-ffn-{LAYER}]")
    settle(page)
    page.wait_for_selector("[data-testid=wm-ffn-units] tr[data-unit]")
    units = page.eval_on_selector_all("[data-testid=wm-ffn-units] tr[data-unit]",
                                      "rs => rs.map(r => [+r.dataset.unit, +r.dataset.coef])")
    coefs = [c for _, c in units]
    assert coefs == sorted(coefs, reverse=True) and len(units) == 8
    assert page.locator("[data-testid=wm-ffn-marks] line").count() == library[
        "model"].config.ffn_hidden
    # the bypass beside each open block's sublayers
    assert page.locator(f"[data-testid=wm-bypass-{LAYER}-1]").count() == 1
    assert page.locator(f"[data-testid=wm-bypass-{LAYER}-2]").count() == 1


def test_temperature_on_the_last_stage(page, settle, library):
    page.select_option("[data-testid=wm-position]", str(len(TEXT) - 1))
    settle(page)
    page.click("[data-testid=wm-stage-output]")
    page.fill("[data-testid=wm-temperature]", "0.5")
    got = page.eval_on_selector_all("[data-testid=wm-top-t] li",
                                    "ls => ls.map(l => [+l.dataset.id, +l.dataset.p])")
    want = torch.softmax(library["logits"] / 0.5, -1)
    assert [i for i, _ in got] == want.topk(5).indices.tolist()
    assert max(abs(p - float(want[i])) for i, p in got) < 1e-6
    assert page.text_content("[data-testid=wm-temperature-value]") == "0.50"


def test_defect_1_block_hint_says_what_a_click_does_now(page, settle):
    page.select_option("[data-testid=wm-run]", "tiny")
    settle(page)
    block = "[data-testid=wm-stage-block-0]"
    if page.get_attribute(block, "aria-expanded") == "true":
        page.click(block)
    page.click(block)  # opens it
    hint = page.text_content("[data-testid=wm-block-hint]")
    assert page.get_attribute(block, "aria-expanded") == "true"
    assert "click it again to close it" in hint and "open the block" not in hint
    page.click(block)  # closes it
    assert "click it to open it" in page.text_content("[data-testid=wm-block-hint]")


def test_defect_2_no_bias_no_beta(page, settle):
    page.select_option("[data-testid=wm-run]", "shakespeare")  # bias false
    settle(page)
    if page.get_attribute("[data-testid=wm-stage-block-0]", "aria-expanded") == "false":
        page.click("[data-testid=wm-stage-block-0]")
    page.click("[data-testid=wm-stage-norm1-0]")
    formula = page.text_content("[data-testid=wm-norm-formula]")
    assert "β" not in formula and "no bias" in formula
    page.select_option("[data-testid=wm-run]", "tiny")  # GPT-2 style: a bias
    settle(page)  # the stage shown stays, its block open
    assert page.get_attribute("[data-testid=wm-stage-block-0]", "aria-expanded") == "true"
    page.click("[data-testid=wm-stage-norm1-0]")
    assert "+ β (gain and bias)" in page.text_content("[data-testid=wm-norm-formula]")


@pytest.mark.parametrize("width", [1280, 390])
def test_defect_3_legend_clear_of_the_bar(page, settle, width):
    page.set_viewport_size({"width": width, "height": 900})
    try:
        page.select_option("[data-testid=wm-run]", "tiny")
        settle(page)
        bar = page.eval_on_selector_all(
            "[data-testid=wm-params-bar]",
            "rs => Math.max(...rs.map(r => r.getBoundingClientRect().bottom))")
        first = page.eval_on_selector("[data-testid=wm-params-legend]",
                                      "t => t.getBoundingClientRect().top")
        assert first >= bar, (first, bar)
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def test_defect_8_learned_table_on_a_robust_scale(page, settle, runs):
    page.click("#tab-positions")
    page.wait_for_selector("[data-testid=fig-learned-table]")
    page.select_option("[data-testid=lp-run]", "tiny")
    settle(page)
    wpe = Runs(runs).load("tiny").model.wpe.weight.detach().double().abs().flatten()
    top = float(page.get_attribute("[data-testid=fig-learned-table]", "data-max"))
    ordered = wpe.sort().values
    assert top == pytest.approx(float(ordered[int(0.98 * (len(ordered) - 1))]), rel=1e-9)
    assert top < float(wpe.max())
    page.click("#tab-model")


def test_view_4_rulers_are_dimensions_of_the_sinusoidal_table(page, settle):
    page.click("#tab-positions")
    page.wait_for_selector("[data-testid=fig-sinusoidal-rulers]")
    settle(page)
    dims = json.loads(page.get_attribute("[data-testid=fig-sinusoidal-rulers]", "data-dims"))
    assert dims == [0, 16, 32, 62]  # d_model 64: fast to slow
    table = sinusoidal_table(torch.arange(64), 64).double()
    assert worst(page, "fig-sinusoidal-rulers", table[:, dims].T) < 1e-6
    assert page.locator("[data-testid=fig-sinusoidal-rulers] polyline").count() == 4
    page.click("#tab-model")


def test_defect_9_view_1_mask_switch_live_at_stage_5(page):
    page.click("#tab-calc")
    page.wait_for_selector("[data-testid=fig-q]")
    for _ in range(4):
        page.click("[data-testid=calc-next]")
    assert "Stage 5 of 5" in page.text_content("[data-testid=stage-label]")
    toggle = page.get_by_test_id("mask-toggle")
    assert toggle.is_enabled()
    before = page.text_content("[data-testid=out-0-0]")
    toggle.uncheck()
    page.wait_for_function("document.querySelector('[data-testid=out-0-0]').textContent"
                           f" !== '{before}'")
    toggle.check()
    page.click("#tab-model")


def test_defect_12_w_o_is_one_bitmap_and_fast(page, settle, runs, download, tmp_path, png_magic):
    # the address carries the lab's state (run, text, ...): start from the bare page
    page.goto(page.url.split("#")[0].split("?")[0] + "?run=shakespeare#heads")
    page.wait_for_selector("[data-testid=fig-w_o]")
    settle(page)
    assert page.locator("[data-testid=fig-w_o] rect[data-cell]").count() == 0
    assert page.get_attribute("[data-testid=w_o-bitmap]", "data-cells") == "192x192"
    assert page.locator("[data-testid=fig-w_o-norms] rect[data-cell]").count() == 6
    # hover names the cell under the pointer, as a rect's title did
    bitmap = page.locator("[data-testid=w_o-bitmap]")
    bitmap.scroll_into_view_if_needed()
    box = bitmap.bounding_box()
    bitmap.hover(position={"x": box["width"] * 5.5 / 192, "y": box["height"] * 40.5 / 192})
    assert page.get_attribute("[data-testid=w_o-bitmap]", "data-hover") == "40,5"
    w_o = Runs(runs).load("shakespeare").model.blocks[0].attn.proj.weight.detach()
    title = page.text_content("[data-testid=w_o-bitmap] title")
    assert f"{float(w_o[5, 40]):.6g}"[:5] in title, title
    name, path = download(page, "export-png-w_o", tmp_path)  # the bitmap exports too
    assert path.read_bytes()[:8] == png_magic
    timings = []
    for layer in ("1", "2", "3"):
        start = time.perf_counter()
        page.select_option("[data-testid=heads-layer]", layer)
        settle(page)
        timings.append(time.perf_counter() - start)
    drawn = page.evaluate("""() => { const t = performance.now();
        document.querySelector('[data-testid=heads-head]').dispatchEvent(new Event('change'));
        return performance.now() - t; }""")
    page.click("[data-testid=fig-w_o-norms] rect[data-cell='0,3']")
    assert page.get_attribute("[data-testid=w_o-bitmap]", "data-cells") == "32x192"
    ms = [round(1000 * t) for t in timings]
    print(f"\nheads view, shakespeare: layer change (fetch + draw) {ms} ms; redraw {drawn:.0f} ms")


@pytest.mark.parametrize("dark", [False, True])
@pytest.mark.parametrize("width", [1280, 390])
def test_axe_clean_on_the_steps(page, settle, dark, width):
    page.goto(page.url.split("#")[0].split("?")[0] + "?run=tiny#model")
    page.wait_for_selector("[data-testid=fig-whole-model]")
    page.emulate_media(color_scheme="dark" if dark else "light")
    page.set_viewport_size({"width": width, "height": 900})
    try:
        open_attention(page, settle)
        to_stage(page, settle, 0)
        for n in range(1, 7):
            if n in (2, 3, 4, 6):  # the matrices (stages 2 to 4), W_O's norms and block
                axe_clean(page)
            next_step(page, settle, n)
        axe_clean(page)
        page.click(f"[data-testid=wm-stage-ffn-{LAYER}]")
        settle(page)
        page.wait_for_selector("[data-testid=wm-ffn-units]")
        axe_clean(page)
        page.click("[data-testid=wm-stage-output]")
        page.wait_for_selector("[data-testid=wm-temperature]")
        axe_clean(page)
        page.click("#tab-heads")
        page.wait_for_selector("[data-testid=fig-w_o-norms]")
        settle(page)
        axe_clean(page)
        page.click("#tab-positions")
        page.wait_for_selector("[data-testid=fig-sinusoidal-rulers]")
        settle(page)
        axe_clean(page)
        page.click("#tab-calc")
        while page.is_enabled("[data-testid=calc-next]"):  # to stage 5, the switch live
            page.click("[data-testid=calc-next]")
        axe_clean(page)
        if width == 390:
            size = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            assert size[0] <= size[1], size
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.emulate_media(color_scheme="light")


# ------------------------------------------------------------ the steps' controls, address, keys

MASK, WHY = "[data-testid=wm-steps-mask]", "[data-testid=wm-steps-mask-why]"


def fresh(page, lab, settle, address="?run=tiny#model"):
    """The page reloaded at address (view 12's state from it alone)."""
    page.goto(lab + address)
    page.wait_for_selector("[data-testid=fig-whole-model]")
    settle(page)


def test_every_stage_after_the_mask_follows_the_switch(page, lab, settle, library, unmasked):
    fresh(page, lab, settle)
    open_attention(page, settle)
    page.select_option("[data-testid=wm-steps-head]", "1")
    settle(page)
    to_stage(page, settle, 0)
    for n in (0, 1):  # before the mask: off, and the page says why
        assert page.is_disabled(MASK)
        assert "the mask acts from stage 3" in page.text_content(WHY)
        if n == 0:
            next_step(page, settle, 1)
    heads, out = unmasked
    t, hs = POSITION, library["model"].config.head_dim
    to_stage(page, settle, 5)
    page.uncheck(MASK)
    settle(page)
    page.wait_for_selector("[data-testid=wm-steps-figures][data-causal=false]")
    assert worst(page, "fig-wm-steps-concat", heads[:, t].reshape(-1)) < 1e-6
    assert worst(page, "fig-wm-steps-concat", library["heads"][:, t].reshape(-1)) > 1e-3
    w_o = library["model"].blocks[LAYER].attn.proj.weight.detach().double()
    written = torch.stack([(w_o[:, h * hs:(h + 1) * hs] @ heads[h, t]).norm()
                           for h in range(library["model"].config.n_head)])
    shown_written = json.loads(page.get_attribute("[data-testid=fig-wm-steps-wo-norms]",
                                                  "data-written"))
    assert float((torch.tensor(shown_written) - written).abs().max()) < 1e-6
    next_step(page, settle, 6)
    assert page.is_enabled(MASK) and not page.is_checked(MASK)
    assert worst(page, "fig-wm-steps-out", out[t]) < 1e-6
    stream, attn_out, added = shown(page, "fig-wm-bypass")
    assert float((stream - library["stream"][t]).abs().max()) < 1e-6
    assert float((added - (library["stream"][t] + out[t])).abs().max()) < 1e-6
    assert "mask off" in page.text_content("#figure-wm-bypass .caption")
    page.check(MASK)
    settle(page)
    page.wait_for_selector("[data-testid=wm-steps-figures][data-causal=true]")
    assert worst(page, "fig-wm-steps-out", library["out"][t]) < 1e-6
    assert float((shown(page, "fig-wm-bypass")[2] - (library["stream"][t] + library["out"][t]))
                 .abs().max()) < 1e-5


def test_at_the_last_token_the_mask_stage_says_how_to_pick_an_earlier_one(page, lab, settle):
    fresh(page, lab, settle)  # the walk follows the last token
    T = len(TEXT)
    assert page.input_value("[data-testid=wm-position]") == str(T - 1)
    page.click(f"[data-testid=wm-stage-block-{LAYER}]")
    page.click(f"[data-testid=wm-stage-attn-{LAYER}]")
    settle(page)
    to_stage(page, settle, 2)
    assert page.is_disabled(MASK)
    assert f"token {T - 1} is the last: no later token to mask" in page.text_content(WHY)
    assert "Pick an earlier token" in page.text_content("[data-testid=wm-steps-changed]")
    # the upper triangle still shows the mask, each masked cell labelled
    masked = json.loads(page.get_attribute("[data-testid=fig-wm-steps-masked-matrix]",
                                           "data-values"))
    assert [[c is None for c in r] for r in masked] == [[j > i for j in range(T)] for i in range(T)]
    page.click("[data-testid=wm-steps-earlier]")
    settle(page)
    page.wait_for_selector("[data-testid=wm-steps-figures][data-stage='2']")
    k = int(page.input_value("[data-testid=wm-position]"))
    assert k < T - 1 and query(page)["pos"] == str(k)
    assert page.is_enabled(MASK)
    assert f"{T - 1 - k} later token(s) are set to −∞" in page.text_content(
        "[data-testid=wm-steps-changed]")
    row = page.eval_on_selector_all("[data-testid=fig-wm-steps-masked] text[data-testid]",
                                    "ts => ts.map(t => [t.dataset.testid, t.textContent])")
    assert row == [[f"wm-steps-masked-0-{j}", "−∞"] for j in range(k + 1, T)]


def test_score_stages_show_the_heads_whole_matrices(page, lab, settle, library):
    fresh(page, lab, settle)
    open_attention(page, settle)
    page.select_option("[data-testid=wm-steps-head]", "1")
    settle(page)
    to_stage(page, settle, 1)
    model, head, t = library["model"], 1, POSITION
    hs, C = model.config.head_dim, model.config.n_embd
    attn = model.blocks[LAYER].attn
    qkv = library["x"] @ attn.qkv.weight.detach().double().T + attn.qkv.bias.detach().double()
    q, k = qkv[:, head * hs:(head + 1) * hs], qkv[:, C + head * hs:C + (head + 1) * hs]
    raw = q @ k.T  # (T, T): every query against every key
    assert worst(page, "fig-wm-steps-raw-matrix", raw) < 1e-6
    assert worst(page, "fig-wm-steps-scaled-matrix", raw / math.sqrt(hs)) < 1e-6
    for name in ("raw-matrix", "scaled-matrix", "masked-matrix"):
        if name == "masked-matrix":
            next_step(page, settle, 2)
        assert page.get_attribute(f"[data-testid=wm-steps-{name}-outline]", "data-row") == str(t)
    # numbers in the cells where they fit; above the diagonal, −∞
    cells = dict(page.eval_on_selector_all(
        "[data-testid=fig-wm-steps-masked-matrix] text[data-testid]",
        "ts => ts.map(t => [t.dataset.testid.split('-').slice(-2).join(','), t.textContent])"))
    T = len(TEXT)
    assert len(cells) == T * T
    scaled = raw / math.sqrt(hs)
    for i, j in ((0, 0), (t, 2), (T - 1, T - 1), (3, 1)):
        assert cells[f"{i},{j}"] == f"{float(scaled[i, j]):.1f}".replace("-0.0", "0.0")
    assert {cells[f"{i},{j}"] for i in range(T) for j in range(i + 1, T)} == {"−∞"}
    next_step(page, settle, 3)
    assert worst(page, "fig-wm-steps-weights-matrix", library["weights"][head]) < 1e-6
    page.uncheck(MASK)
    settle(page)
    page.wait_for_selector("[data-testid=wm-steps-figures][data-causal=false]")
    assert worst(page, "fig-wm-steps-weights-matrix", torch.softmax(scaled, -1)) < 1e-6
    page.check(MASK)
    settle(page)


def test_raw_and_scaled_share_a_scale_and_the_concatenation_shows_its_heads(page, lab, settle,
                                                                           library):
    fresh(page, lab, settle)
    open_attention(page, settle)
    to_stage(page, settle, 1)
    tops = {name: float(page.get_attribute(f"[data-testid=fig-wm-steps-{name}]", "data-max"))
            for name in ("raw-matrix", "scaled-matrix", "raw", "scaled")}
    raw = shown(page, "fig-wm-steps-raw-matrix")
    assert list(tops.values()) == pytest.approx([float(raw.abs().max())] * 4), tops
    # the same scale: the scaled row's cells are paler than the raw row's
    fills = [page.get_attribute(f"[data-testid=fig-wm-steps-{name}] rect[data-cell='0,0']", "fill")
             for name in ("raw", "scaled")]
    assert fills[0] != fills[1]
    to_stage(page, settle, 5)
    n_head = library["model"].config.n_head
    head = int(page.input_value("[data-testid=wm-steps-head]"))
    assert page.locator("[data-testid=wm-steps-concat-boundary]").count() == n_head - 1
    assert page.get_attribute("[data-testid=wm-steps-concat-outline]", "data-group") == str(head)
    assert f"head {head}'s outlined" in page.text_content("[data-testid=wm-steps-changed]")


def test_w_o_block_zooms_to_cells_a_pointer_can_hit(page, lab, settle, runs):
    fresh(page, lab, settle, "?run=shakespeare#model")
    page.click("[data-testid=wm-stage-block-0]")
    page.click("[data-testid=wm-stage-attn-0]")
    settle(page)
    to_stage(page, settle, 5)
    bitmap = "[data-testid=wm-steps-wo-block-bitmap]"
    assert page.get_attribute(bitmap, "data-cells") == "32x192"  # d_k x n_embd, as view 3
    before = page.locator(bitmap).bounding_box()["width"] / 192
    page.click("[data-testid=wm-steps-wo-zoom]")
    assert page.get_attribute("[data-testid=wm-steps-wo-zoom]", "aria-pressed") == "true"
    box = page.locator(bitmap).bounding_box()
    assert box["width"] / 192 >= 10 > before, (before, box)
    page.locator(bitmap).hover(position={"x": box["width"] * 40.5 / 192,
                                         "y": box["height"] * 5.5 / 32})
    assert page.get_attribute(bitmap, "data-hover") == "5,40"
    w_o = Runs(runs).load("shakespeare").model.blocks[0].attn.proj.weight.detach()
    title = page.text_content(f"{bitmap} title")
    assert f"{float(w_o[40, 5]):.6g}"[:5] in title, title


def test_the_address_opens_a_blocks_attention_at_a_head_and_follows_it(lab, open_lab, settle):
    address = f"{lab}?run=shakespeare&text={quote(TEXT)}&pos=8&layer=2&head=3#model"
    with open_lab(address, "[data-testid=wm-steps-figures]",
                  viewport={"width": 1280, "height": 900}) as opened:
        page = opened.page
        settle(page)
        assert page.text_content("[data-testid=wm-detail-title]") == "Block 2, attention"
        assert page.input_value("[data-testid=wm-steps-head]") == "3"
        assert page.input_value("[data-testid=wm-position]") == "8"
        assert "on" in page.get_attribute("[data-testid=wm-stage-attn-2]", "class")
        page.select_option("[data-testid=wm-steps-head]", "1")  # a head picked: the address says it
        settle(page)
        assert query(page)["head"] == "1"
        page.click("[data-testid=wm-stage-block-0]")  # opens it
        page.click("[data-testid=wm-stage-attn-0]")
        settle(page)
        assert query(page)["layer"] == "0"  # another block's stage: its layer
        page.go_back()
        settle(page)
        assert page.text_content("[data-testid=wm-detail-title]") == "Block 2, attention"
        page.go_back()
        settle(page)
        page.wait_for_function(
            "document.querySelector('[data-testid=wm-steps-head]').value === '3'")
        assert query(page) == {"run": "shakespeare", "text": TEXT, "pos": "8", "layer": "2",
                               "head": "3"}


def test_the_tour_reaches_the_seven_stages_on_the_shipped_model(lab, open_lab, settle):
    with open_lab(lab + "#calc", "[data-testid=fig-q]",
                  viewport={"width": 1280, "height": 900}) as opened:
        page = opened.page
        page.get_by_test_id("tour-start").click()
        page.wait_for_selector("[data-testid=wm-tokens] li")
        settle(page)
        assert page.input_value("[data-testid=wm-run]") == "shakespeare"
        tokens = page.eval_on_selector_all("[data-testid=wm-tokens] li code",
                                           "cs => cs.map(c => c.textContent)")
        assert tokens == [label(c) for c in TEXT]  # the shipped model reads characters
        while "Attention in a trained model" not in page.text_content("#tour-title"):
            page.get_by_test_id("tour-next").click()
        page.wait_for_selector("[data-testid=wm-steps-figures][data-stage='0']")
        settle(page)
        assert page.evaluate("location.hash") == "#model"
        assert page.input_value("[data-testid=wm-run]") == "shakespeare"
        t = int(page.input_value("[data-testid=wm-position]"))
        assert t < len(TEXT) - 1 and "Stage 1 of 7" in page.text_content(
            "[data-testid=wm-steps-label]")
        for n in range(1, 7):
            next_step(page, settle, n)
            if n == 2:  # the mask at work in this token's row, the switch live
                assert page.is_enabled(MASK)
                masked = json.loads(page.get_attribute("[data-testid=fig-wm-steps-masked]",
                                                       "data-values"))
                assert sum(m is None for m in masked) == len(TEXT) - 1 - t
        assert "Stage 7 of 7" in page.text_content("[data-testid=wm-steps-label]")


def test_stepper_keys_focus_and_next_a_few_tabs_away(page, lab, settle):
    fresh(page, lab, settle)
    open_attention(page, settle)
    to_stage(page, settle, 0)
    active = "document.activeElement.dataset.testid || document.activeElement.tagName"
    page.focus(f"[data-testid=wm-stage-attn-{LAYER}]")
    tabs = 0
    while page.evaluate(active) != "wm-steps-next" and tabs < 10:
        page.keyboard.press("Tab")
        tabs += 1
    assert tabs <= 3, tabs
    for n in range(1, 7):  # Enter on "Next step" to the last stage: the focus stays on a button
        page.keyboard.press("Enter")
        settle(page)
        page.wait_for_selector(f"[data-testid=wm-steps-figures][data-stage='{n}']")
    assert page.evaluate(active) == "wm-steps-back"
    page.keyboard.press("ArrowLeft")  # view 1's keys
    page.wait_for_selector("[data-testid=wm-steps-figures][data-stage='5']")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("[data-testid=wm-steps-figures][data-stage='6']")
    page.focus("[data-testid=wm-steps-head]")  # a field keeps its arrow keys
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("[data-testid=wm-steps-figures]", "data-stage") == "6"
    # the diagram is one Tab stop: ↑ ↓ move between its stages
    page.focus(f"[data-testid=wm-stage-attn-{LAYER}]")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.stage") == f"add1-{LAYER}"
    assert page.get_attribute(f"[data-testid=wm-stage-attn-{LAYER}]", "tabindex") == "-1"
