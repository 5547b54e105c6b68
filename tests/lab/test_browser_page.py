"""The page as a whole, in real headless Chromium (the session's browser, tests/conftest.py):
the address names the open view (Back steps through views, a link opens one), the run
pickers follow the runs folder and default to a run that encodes their view's text, the
phone's header stays one row, charts thin their x labels, and in dark mode the figures'
lines keep 3:1 against their panel while an export keeps the light colours (a training
started from the page shows it for view 9, and lists its run in the other views)."""

from __future__ import annotations

import math
import re

import pytest

from gptlab import pretrained
from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
WHITE = (255, 255, 255)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, copy_tiny_run, save_char_model):
    """tiny, and before it in the listing a run whose vocabulary has no space."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "a-no-space", "abcdefghijklmnopqrstuvwxyz", n_layer=1, n_head=1,
                    n_embd=8, block_size=32)
    return root


@pytest.fixture(scope="module")
def lab(runs):
    """The lab over `runs` without the shipped model, which would be listed first and
    encodes every default text: here the first run listed cannot."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretrained, "NAMES", ())
        with BackgroundServer(runs) as url:
            yield url


def rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(float(x)) for x in re.findall(r"[\d.]+", colour)[:3])


def contrast(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    def lum(c):
        lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
               for x in (v / 255 for v in c)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted([lum(a), lum(b)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def lines_against_panel(page, figure: str, what: str = "polyline, line, circle, rect:not(.fig-bg)"):
    """[(colour, panel colour)] of the strokes (or fills) of a figure's marks, as drawn."""
    return page.eval_on_selector(f"[data-testid={figure}]", """(svg, what) => {
        const bg = getComputedStyle(svg.querySelector('.fig-bg')).fill;
        return [...svg.querySelectorAll(what)].filter((e) => !e.closest('[data-cell]'))
          .map((e) => { const s = getComputedStyle(e);
                        return [s.stroke !== 'none' ? s.stroke : s.fill, bg]; }); }""", what)


def visible_view(page) -> str:
    return page.eval_on_selector_all(".view", "vs => vs.filter(v => !v.hidden).map(v => v.id)")


def test_the_address_names_the_view_and_back_steps_through_views(lab, open_lab):
    # regression: setting location.hash did nothing, so Back left the page and a link to a
    # view opened view 1
    with open_lab(lab + "#positions", "[data-testid=fig-rope-scores]") as opened:
        page = opened.page
        page.click("#tab-params")
        page.click("#tab-quiz")
        assert page.evaluate("location.hash") == "#quiz"
        for back, view in [(True, "params"), (True, "positions"), (False, "params")]:
            page.go_back() if back else page.go_forward()
            page.wait_for_selector(f"#view-{view}", state="visible")
            assert visible_view(page) == [f"view-{view}"]
            assert page.get_attribute(f"#tab-{view}", "aria-selected") == "true"
        page.evaluate("location.hash = '#scaling'")  # a link, or a typed address
        page.wait_for_selector("[data-testid=fig-scaling-sweep]")
        assert visible_view(page) == ["view-scaling"]
        page.evaluate("location.hash = '#toString'")  # not a view: view 1
        page.wait_for_selector("#view-calc", state="visible")
        assert page.evaluate("location.hash") == "#calc"


def test_run_pickers_follow_the_runs_folder(runs, lab, open_lab, copy_tiny_run):
    # regression: the list was fetched once per page load, so a run trained meanwhile
    # appeared only after a reload; and the first run was the default even when its
    # vocabulary could not encode the view's text
    with open_lab(lab + "#heads", "[data-testid=fig-head-0-0]") as opened:
        page = opened.page
        options = "s => [...document.querySelectorAll(`#${s} option`)].map(o => o.value)"
        assert page.evaluate(options, "heads-run") == ["a-no-space", "tiny"]
        assert page.input_value("[data-testid=heads-run]") == "tiny"
        copy_tiny_run(runs / "b-new")
        page.click("#tab-nexttoken")  # a view's first opening lists the folder as it is
        page.wait_for_selector("[data-testid=nt-bar-0]")
        assert page.evaluate(options, "nt-run") == ["a-no-space", "b-new", "tiny"]
        page.click("#tab-heads")  # opening a view again lists it again
        page.wait_for_function(f"({options})('heads-run').includes('b-new')")
        assert page.input_value("[data-testid=heads-run]") == "tiny"  # the choice stays
        copy_tiny_run(runs / "c-newer")
        page.focus("[data-testid=heads-run]")  # so does focusing a picker
        page.wait_for_function(f"({options})('heads-run').includes('c-newer')")
        assert page.is_hidden("[data-testid=error]")


def test_the_phone_header_is_one_row_of_tabs(lab, open_lab):
    # regression: the sticky header wrapped its tabs into 230 px of an 844 px screen
    with open_lab(lab, "[data-testid=fig-q]", viewport=PHONE) as opened:
        page = opened.page
        tabs = page.eval_on_selector_all("#tabs [role=tab]", "ts => ts.map(t => t.id)")
        for tab in tabs:
            page.click(f"#{tab}")
            box = page.evaluate("""t => {
                const h = document.querySelector('header').getBoundingClientRect(),
                n = document.getElementById('tabs').getBoundingClientRect(),
                b = document.getElementById(t).getBoundingClientRect();
                return {header: h.height, inside: b.left >= n.left - 1 && b.right <= n.right + 1,
                        wide: document.documentElement.scrollWidth - innerWidth}; }""", tab)
            assert box["header"] <= 90 and box["inside"] and box["wide"] <= 0, (tab, box)


def oklab(c: tuple[int, ...]) -> tuple[float, ...]:
    """sRGB 0..255 -> OKLab (Ottosson 2020): a distance of 0.1 is a clearly different hue."""
    r, g, b = (x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4
               for x in (v / 255 for v in c))
    lms = [(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b) ** (1 / 3),
           (0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b) ** (1 / 3),
           (0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b) ** (1 / 3)]
    rows = [(0.2104542553, 0.7936177850, -0.0040720468),
            (1.9779984951, -2.4285922050, 0.4505937099),
            (0.0259040371, 0.7827717662, -0.8086757660)]
    return tuple(sum(k * x for k, x in zip(row, lms, strict=True)) for row in rows)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_twelve_heads_have_twelve_distinguishable_colours(lab, open_lab, scheme):
    # regression: eight colours, reused past 8 heads, with two similar blues in the light
    # theme (heads 0 and 5, 0.09 apart in OKLab) and two oranges in the dark one (0.04)
    with open_lab(lab, "[data-testid=fig-q]", color_scheme=scheme) as opened:
        colours, panels, names = opened.page.evaluate("""async () => {
            const {headColour} = await import('/static/svg.js');
            const read = (css, prop = 'color') => { const e = document.createElement('span');
              e.style[prop] = css; document.body.append(e);
              const c = getComputedStyle(e)[prop]; e.remove(); return c; };
            const heads = [...Array(12).keys()].map((h) => read(`var(--head-${h})`));
            const panels = ['var(--panel)', 'var(--nt-panel)', 'var(--bg)']
              .map((c) => read(c, 'backgroundColor'));
            return [heads, panels, [0, 5, 11, 12, 13].map(headColour)]; }""")
    assert names == ["var(--head-0)", "var(--head-5)", "var(--head-11)", "var(--head-0)",
                     "var(--head-1)"]
    points = [oklab(rgb(c)) for c in colours]
    closest = min((math.dist(a, b), i, j) for i, a in enumerate(points)
                  for j, b in enumerate(points) if i < j)
    assert closest[0] >= 0.11, (closest, colours)
    assert min(contrast(rgb(c), rgb(p)) for c in colours for p in panels) >= 3


def test_x_labels_are_thinned_until_none_touch(lab, open_lab):
    # regression: at 390 px view 9's step labels ran into each other
    with open_lab(lab, "[data-testid=fig-q]") as opened:
        boxes = opened.page.evaluate("""async () => {
            const {chart} = await import('/static/svg.js');
            const steps = [...Array(121).keys()].map((i) => String(25 * i));  // 0 .. 3000
            const series = [{name: 'loss', values: steps.map(Number), colour: '#000'}];
            const svg = chart({id: 't', kind: 'line', width: 342, xthin: true, xlabels: steps,
                               series});
            document.body.appendChild(svg);
            const out = [...svg.querySelectorAll('[data-tick=x]')].map((t) => {
                const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width]; });
            svg.remove();
            return out; }""")
    assert boxes[0][0] == "0" and boxes[-1][0] == "3000" and len(boxes) >= 4
    assert all(a[2] < b[1] for a, b in zip(boxes, boxes[1:], strict=False)), boxes


def test_dark_mode_lines_and_light_exports(lab, open_lab, tmp_path):
    # regression: in dark mode view 9's charts stayed white boxes with the dark theme's pale
    # head colours (1.7-2.3:1), views 2 and 4 drew red and blue at 2.35:1 and 2.74:1 on the
    # dark panel, and views 8, 9 and 10 had no export at all
    with open_lab(lab + "#nexttoken", "[data-testid=nt-lines]", color_scheme="dark",
                  accept_downloads=True, viewport=DESKTOP) as opened:
        page = opened.page

        def export(name: str, kind: str = "svg") -> str | bytes:
            with page.expect_download() as info:
                page.click(f"[data-testid=export-{kind}-{name}]")
            path = tmp_path / info.value.suggested_filename
            info.value.save_as(path)
            assert path.name == f"gptlab-{name}.{kind}"
            return path.read_text(encoding="utf-8") if kind == "svg" else path.read_bytes()

        # view 8: the files keep the light theme's colours, as plain styles
        bars = export("nt-bars")
        assert "var(" not in bars and "fill: rgb(10, 88, 202)" in bars  # --nt-final, light
        assert "fill: rgb(27, 31, 36)" in bars  # --ink, light
        lines = export("nt-lines")
        assert "stroke: rgb(0, 114, 178)" in lines and "86, 180, 233" not in lines  # head 0
        assert export("nt-lines", "png")[:8] == b"\x89PNG\r\n\x1a\n"
        page.click("#tab-lens")
        page.wait_for_selector("[data-testid=lens-dla]")
        assert "fill: rgb(10, 88, 202)" in export("lens-dla")  # --lens-up, light

        # views 2 and 4: lines and labels against the dark panel
        page.click("#tab-scaling")
        page.wait_for_selector("[data-testid=fig-scaling-sweep]")
        for fig in ("fig-scaling-sweep", "fig-scaling-hist"):
            marks = lines_against_panel(page, fig)
            assert marks and rgb(marks[0][1]) != WHITE
            assert min(contrast(rgb(a), rgb(b)) for a, b in marks) >= 3, (fig, marks[:3])
        page.click("#tab-positions")
        page.wait_for_selector("[data-testid=fig-rope-circle]")
        marks = lines_against_panel(page, "fig-rope-circle", "line")
        assert min(contrast(rgb(a), rgb(b)) for a, b in marks) >= 3
        labels = lines_against_panel(page, "fig-rope-circle", "text[data-label]")
        assert len(labels) == 32 and min(contrast(rgb(a), rgb(b)) for a, b in labels) >= 4.5

        # view 9: a short training from the page; its charts on the dark panel, its run
        # listed in view 8's picker (opened before it existed) without a reload
        page.click("#tab-live")
        page.fill("[data-testid=live-steps]", "30")
        page.fill("[data-testid=live-every]", "10")
        page.click("[data-testid=live-start]")
        page.wait_for_selector("[data-testid=live-status][data-status=finished]", timeout=120_000)
        page.wait_for_selector("[data-testid=fig-live-induction]")
        for fig in ("fig-live-loss", "fig-live-induction", "fig-live-previous_token"):
            marks = lines_against_panel(page, fig, "polyline")
            assert marks and rgb(marks[0][1]) != WHITE
            assert min(contrast(rgb(a), rgb(b)) for a, b in marks) >= 3, (fig, marks)
        loss = export("live-loss")
        assert "stroke: rgb(0, 114, 178)" in loss and "fill: rgb(255, 255, 255)" in loss
        page.wait_for_function("[...document.querySelectorAll('#nt-run option')]"
                               ".some(o => o.value === 'live-induction')")
        # and a page opened now defaults views 3, 8 and 10 to a run whose vocabulary has
        # the space of their text, not to live-induction or a-no-space
        page.reload()
        for tab, picker, ready in [("heads", "heads-run", "fig-head-0-0"),
                                   ("nexttoken", "nt-run", "nt-bar-0"),
                                   ("lens", "lens-run", "lens-dla")]:
            page.click(f"#tab-{tab}")
            page.wait_for_selector(f"[data-testid={ready}]")
            assert page.input_value(f"[data-testid={picker}]") not in ("live-induction",
                                                                        "a-no-space")
        assert page.is_hidden("[data-testid=error]")
