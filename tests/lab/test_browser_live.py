"""View 9 (watch it learn) in real headless Chromium, before a training starts: the page
says how long the training in its form will take, as an estimate from the server's probe
of the training (gptlab.lab.live.estimate): at the machine's load now and, where that
differs, on a quiet machine; it says it again when the form changes; at phone width
nothing overflows and axe-core finds nothing serious. (A training from the page, its
charts and its run in the pickers: test_browser_page.py.)"""

from __future__ import annotations

import re

import pytest

from gptlab.lab.server import BackgroundServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ESTIMATED = "[data-testid=live-estimate][data-seconds]"


@pytest.fixture(scope="module")
def page(tmp_path_factory, open_lab):
    root = tmp_path_factory.mktemp("live-runs")
    with BackgroundServer(root) as url, open_lab(url + "#live", ESTIMATED,
                                                 viewport={"width": 1280, "height": 900}) as lab:
        yield lab.page


def test_the_time_is_estimated_before_the_training_starts(page, settle):
    settle(page)
    text = page.text_content("[data-testid=live-estimate]")
    when = r"(\d+ min( \d+ s)?|\d+ s)"
    assert re.fullmatch(rf"This training of 1500 steps will take about {when} \(at this "
                        r"machine's load now(, [\d.]+ on \d+ CPU cores)?"
                        rf"(; {when} of computing, what a quiet machine takes)?; an estimate "
                        r"from a probe of the training: \d+ ms a step, [\d.]+ s an "
                        r"evaluation\)\.", text), text
    first = float(page.get_attribute("[data-testid=live-estimate]", "data-seconds"))
    low, high = (float(page.get_attribute("[data-testid=live-estimate]", f"data-{end}"))
                 for end in ("low", "high"))
    assert 0 < low <= first <= high
    assert page.is_enabled("[data-testid=live-start]")  # nothing started
    page.fill("[data-testid=live-steps]", "3000")
    page.dispatch_event("[data-testid=live-steps]", "change")
    page.wait_for_function(f"+document.querySelector('{ESTIMATED}').dataset.seconds > {first}")
    assert "3000 steps" in page.text_content("[data-testid=live-estimate]")


def test_phone_width_and_axe(page, fits_a_phone):
    with fits_a_phone(page):
        assert page.is_visible("[data-testid=live-estimate]")


def test_the_charts_draw_in_a_window_of_any_width(tmp_path, open_lab):
    # regression: in a window 1 px wide the charts were drawn -47 px wide (the console:
    # '<svg> attribute width: A negative value is not valid. ("-47")')
    with BackgroundServer(tmp_path) as url, open_lab(url + "#live", ESTIMATED) as lab:
        page, said = lab.page, []
        page.on("console", lambda m: said.append(m.text) if m.type == "error" else None)
        page.fill("[data-testid=live-steps]", "20")
        page.fill("[data-testid=live-every]", "10")
        page.click("[data-testid=live-start]")
        page.set_viewport_size({"width": 1, "height": 900})
        page.wait_for_selector("[data-testid=live-status][data-status=finished]",
                               state="attached", timeout=120_000)
        page.wait_for_selector("[data-testid=fig-live-induction]", state="attached")
        widths = page.eval_on_selector_all("#view-live svg",
                                           "ss => ss.map(s => +s.getAttribute('width'))")
        assert len(widths) == 3 and min(widths) >= 240, widths
        assert not [m for m in said if "negative value" in m], said[:3]
        page.set_viewport_size({"width": 1280, "height": 900})
