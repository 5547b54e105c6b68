"""The docs' screenshots (tools/screenshots.py): one PNG per view of the lab, in the session's
headless Chromium."""

import pytest
from tools.screenshots import VIEWS, capture_views

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_screenshots_of_every_view(lab_url, open_lab, tmp_path, png_magic, one_thread):
    with open_lab(lab_url, "[data-testid=fig-q]") as lab:
        written = capture_views(lab.page, lab_url, tmp_path)
    assert [p.stem for p in written] == [name for name, *_ in VIEWS]
    assert all(p.read_bytes()[:8] == png_magic for p in written)
